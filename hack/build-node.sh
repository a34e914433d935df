#!/usr/bin/env bash
# Builds what a node runs besides Raven, from the Go module proxy, into a cache folder
# (default ~/.cache/raven/node-bins): kubelet and kube-scheduler (hack/build-k8s.sh --node), containerd 2 with its
# runc shim and ctr, runc (with seccomp, which containerd's default profile needs) and crictl. A second run finds
# the binaries and returns at once. Prints the folder that holds all of them (links to the cached builds).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
RUNC_VERSION=${RUNC_VERSION:-v1.5.2}
CRICTL_VERSION=${CRICTL_VERSION:-v1.37.0}
K8S_VERSION=${K8S_VERSION:-v1.37.2}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/raven/node-bins
OUT=$CACHE/bin-$K8S_VERSION-containerd-$CONTAINERD_VERSION-runc-$RUNC_VERSION-crictl-$CRICTL_VERSION
export GOTOOLCHAIN=local GOFLAGS=-mod=mod

log() { printf '[build-node %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

all=(kubelet kube-scheduler containerd containerd-shim-runc-v2 ctr runc crictl)
have() { local b; for b in "${all[@]}"; do [[ -x $OUT/$b ]] || return 1; done; }
if have; then
  log "cached binaries found in $OUT"
  echo "$OUT"
  exit 0
fi

start=$SECONDS
mkdir -p "$OUT"
k8s=$("$REPO/hack/build-k8s.sh" --node)
ln -sf "$k8s/kubelet" "$k8s/kube-scheduler" "$OUT/"

# build_module MODULE VERSION DIR CGO TAGS LDFLAGS PKG... : builds the module's packages at VERSION into DIR (cached by
# DIR), from a throwaway module that requires it, so that its own go.mod pins every dependency.
build_module() {
  local mod=$1 ver=$2 dir=$3 cgo=$4 tags=$5 ldflags=$6
  shift 6
  local b missing=0
  for b in "$@"; do [[ -x $dir/$(basename "$b") ]] || missing=1; done
  ((missing)) || return 0
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/raven-node-build.XXXXXX")
  mkdir -p "$dir"
  (
    cd "$work"
    printf 'module ravennodebins\n\ngo 1.26.0\n' >go.mod
    go mod edit -require="$mod@$ver"
    # The module's own requirements decide every version (as its release build does).
    local gomod
    gomod=$(go mod download -json "$mod@$ver" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
    awk '/^replace/,0' "$gomod" | grep -v '=> \.' >>go.mod || true
    printf 'package tools\n\nimport (\n' >tools.go
    for b in "$@"; do printf '\t_ "%s"\n' "$b" >>tools.go; done
    printf ')\n' >>tools.go
    sed -i '1i //go:build tools' tools.go
    go mod tidy -e >/dev/null 2>&1 || true
    go get "$mod@$ver" >/dev/null
    CGO_ENABLED=$cgo go build -trimpath -tags "$tags" -ldflags="-s -w $ldflags" -o "$dir/" "$@"
  )
  rm -rf "$work"
}

log "step 1/3: containerd $CONTAINERD_VERSION, its runc shim and ctr (about 2 minutes on 2 cores, cold)"
cdir=$CACHE/containerd-$CONTAINERD_VERSION
C=github.com/containerd/containerd/v2
build_module $C "$CONTAINERD_VERSION" "$cdir" 0 "no_btrfs" "-X $C/version.Version=$CONTAINERD_VERSION" $C/cmd/containerd $C/cmd/containerd-shim-runc-v2 $C/cmd/ctr
ln -sf "$cdir/containerd" "$cdir/containerd-shim-runc-v2" "$cdir/ctr" "$OUT/"

log "step 2/3: runc $RUNC_VERSION (cgo, with seccomp; about 1 minute)"
rdir=$CACHE/runc-$RUNC_VERSION
build_module github.com/opencontainers/runc "$RUNC_VERSION" "$rdir" 1 "seccomp urfave_cli_no_docs" "-X main.version=${RUNC_VERSION#v}" github.com/opencontainers/runc
ln -sf "$rdir/runc" "$OUT/"

log "step 3/3: crictl $CRICTL_VERSION"
xdir=$CACHE/crictl-$CRICTL_VERSION
build_module sigs.k8s.io/cri-tools "$CRICTL_VERSION" "$xdir" 0 "" "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" sigs.k8s.io/cri-tools/cmd/crictl
ln -sf "$xdir/crictl" "$OUT/"

have || { log "ERROR: some binaries are missing in $OUT"; exit 1; }
log "done in $((SECONDS - start)) s: $OUT"
echo "$OUT"
