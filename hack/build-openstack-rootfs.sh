#!/usr/bin/env bash
# Builds the cloud side's root file system: OpenStack 2025.1 (Neutron 26, Octavia 16, ovn-octavia-provider 8),
# OVN 25.03, Open vSwitch 3.5, MariaDB and Keystone, as Debian 13 (trixie) packages them, made with mmdebstrap
# (Debian's own tool) so that the host keeps its own release. The stack runs these daemons in it by chroot
# (hack/stack.sh, os_run). Built once per package list and script, cached like the Kubernetes binaries:
#   $XDG_CACHE_HOME/raven/openstack-rootfs/<suite>-<hash of FORMAT, suite and packages>
# Prints the root's path on stdout; progress goes to stderr. About 2-3 min and 1.3 GB on a fresh machine.
set -euo pipefail

SUITE=trixie
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/raven
# What the stack runs from the root file system, and the tools its scripts call there.
PACKAGES=(
  python3-neutron python3-octavia python3-ovn-octavia-provider python3-keystone python3-pymysql
  openvswitch-switch openvswitch-common ovn-central ovn-host mariadb-server
  iproute2 procps
)

# FORMAT changes when what the build makes changes (its command, the manifest); with the suite and the packages
# it names the cached root.
FORMAT=1

log() { printf '[build-openstack-rootfs %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

key=$(printf '%s\n' "$FORMAT" "$SUITE" "${PACKAGES[@]}" | sha256sum | cut -c1-12)
root=$CACHE_ROOT/openstack-rootfs/$SUITE-$key
if [[ -f $root/.raven-manifest ]]; then
  echo "$root"
  exit 0
fi

SUDO=()
((EUID != 0)) && SUDO=(sudo)
if ! command -v mmdebstrap >/dev/null; then
  log "installing mmdebstrap (Debian's tool that makes a root file system from packages)"
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -q >/dev/null
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null
fi

mkdir -p "$CACHE_ROOT/openstack-rootfs"
tmp=$root.tmp-$$
trap '"${SUDO[@]}" rm -rf "$tmp"' EXIT
log "building the OpenStack 2025.1 root file system (Debian $SUITE: ${#PACKAGES[@]} packages and their dependencies," \
  "about 480 packages, 180 MB to download, 2-3 min) in $root"
start=$SECONDS
# Services are never started inside (mmdebstrap installs a policy-rc.d that refuses to); the stack starts
# them with its own configuration. Recommends are left out, as on the host.
"${SUDO[@]}" mmdebstrap --variant=apt --components=main --aptopt='APT::Install-Recommends "false"' \
  --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  "$SUITE" "$tmp" \
  "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" "deb $SECURITY_MIRROR $SUITE-security main" 2>&1 |
  while IFS= read -r line; do
    # mmdebstrap's steps (I: ...) say how far along it is; the rest is apt's detail.
    [[ $line == I:* || $line == E:* || $line == W:* ]] && log "${line}"
  done
[[ ${PIPESTATUS[0]} == 0 ]] || { log "mmdebstrap failed"; exit 1; }
# The versions this root holds, for the compatibility table and the benchmark artifacts.
"${SUDO[@]}" chroot "$tmp" dpkg-query -W -f '${Package}\t${Version}\n' | "${SUDO[@]}" tee "$tmp/.raven-manifest" >/dev/null
rm -rf "$root"
mv "$tmp" "$root"
trap - EXIT
# Roots of earlier package lists or scripts (1.3 GB each) go, unless a process still runs in one (a stack started
# before this build).
in_use() { local p; for p in /proc/[0-9]*/root; do [[ $(readlink "$p" 2>/dev/null) == "$1" ]] && return 0; done; return 1; }
for old in "$CACHE_ROOT/openstack-rootfs/$SUITE"-*; do
  [[ $old == "$root" || ! -d $old ]] && continue
  in_use "$old" && { log "keeping the earlier root file system $old: a running stack uses it"; continue; }
  log "removing the earlier root file system $old"
  "${SUDO[@]}" rm -rf "$old"
done
log "built in $((SECONDS - start)) s ($(du -sh "$root" | cut -f1)): $(grep -P '^(python3-neutron|python3-octavia|python3-ovn-octavia-provider|ovn-central|openvswitch-switch|mariadb-server)\t' "$root/.raven-manifest" | tr '\t\n' ' ,')"
echo "$root"
