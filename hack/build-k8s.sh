#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kube-controller-manager from the Go module proxy into a cache folder
# (default ~/.cache/raven/k8s-bins/<version>). With --node, it builds the nodes' kubelet and kube-scheduler
# instead (default ~/.cache/raven/node-bins/k8s-<version>). A second run finds the binaries and returns at once.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}
export GOTOOLCHAIN=local GOFLAGS=-mod=mod

if [[ ${1:-} == --node ]]; then
  OUT=${K8S_NODE_BINS:-$CACHE_ROOT/raven/node-bins/k8s-$K8S_VERSION}
  bins=(kubelet kube-scheduler)
else
  OUT=${K8S_BINS:-$CACHE_ROOT/raven/k8s-bins/$K8S_VERSION}
  bins=(etcd kube-apiserver kube-controller-manager)
fi

log() { printf '[build-k8s %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

cached=1
for b in "${bins[@]}"; do [[ -x $OUT/$b ]] || cached=0; done
if ((cached)); then
  log "cached binaries found in $OUT"
  echo "$OUT"
  exit 0
fi

mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/raven-k8s-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
start=$SECONDS

log "step 1/4: resolving k8s.io/kubernetes@$K8S_VERSION (first run downloads about 700 MB of modules)"
gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
staging_version="v0.${K8S_VERSION#v1.}"

# Keep only the staging modules that k8s.io/kubernetes requires; the others are refused by the proxy.
required=$(awk '/^require \(/{r=1;next} r&&/^\)/{r=0} r{print $1}' "$gomod" | sort -u)
{
  echo "module ravenk8sbins"
  echo
  echo "go 1.26.0"
  echo
  echo "tool ("
  for b in "${bins[@]}"; do
    if [[ $b == etcd ]]; then echo "	go.etcd.io/etcd/server/v3"; else echo "	k8s.io/kubernetes/cmd/$b"; fi
  done
  echo ")"
  echo
  echo "require k8s.io/kubernetes $K8S_VERSION"
  echo
  echo "replace ("
  grep -E '=> \./staging/' "$gomod" | awk '{print $1}' | sort -u | while read -r m; do
    if grep -qx "$m" <<<"$required"; then echo "	$m => $m $staging_version"; fi
  done
  echo ")"
} > go.mod

log "step 2/4: go mod tidy"
go mod tidy

V=k8s.io/component-base/version
ldflags="-s -w -X $V.gitVersion=$K8S_VERSION -X $V.gitMajor=1 -X $V.gitMinor=${K8S_VERSION#v1.} -X $V.gitTreeState=clean"
ldflags=${ldflags/gitMinor=${K8S_VERSION#v1.}/gitMinor=$(cut -d. -f2 <<<"$K8S_VERSION")}

if [[ ${bins[0]} == etcd ]]; then
  log "step 3/4: building etcd (about 1 minute on 2 cores)"
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$WORK/etcd" go.etcd.io/etcd/server/v3
  log "step 4/4: building kube-apiserver and kube-controller-manager (about 6-7 minutes on 2 cores, cold)"
  CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$WORK/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
else
  log "step 3/4: building kube-scheduler (about 1 minute on 2 cores once kube-apiserver was built)"
  CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$WORK/" k8s.io/kubernetes/cmd/kube-scheduler
  log "step 4/4: building kubelet (about 2 minutes on 2 cores)"
  CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$WORK/" k8s.io/kubernetes/cmd/kubelet
fi

for b in "${bins[@]}"; do mv "$WORK/$b" "$OUT/"; done
log "done in $((SECONDS - start)) s: $OUT"
echo "$OUT"
