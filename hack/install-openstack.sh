#!/usr/bin/env bash
# Installs what the stack needs on the host from Debian packages when missing: its tools, what the nodes need, and
# on the zed lane Neutron, Octavia, Open vSwitch + OVN (and Keystone when STACK_KEYSTONE=1).
# Library packages and binaries only: no services are started (policy-rc.d), no /etc files are written by this
# script (the Open vSwitch postinst creates an unused /etc/openvswitch/conf.db).
set -euo pipefail

log() { printf '[install-openstack %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# "what it is: packages", so that the progress line can say what is being installed.
groups=(
  "tools: sqlite3 openssl curl jq iproute2 procps iputils-ping ethtool"
  "the nodes (runc's seccomp, nsenter, mount, conntrack): libseccomp-dev util-linux mount conntrack"
)
# On the 2025.1 lane (the default) the cloud side comes from its own root file system
# (hack/build-openstack-rootfs.sh); the zed lane (STACK_OPENSTACK=zed) runs the host's own packages.
if [[ ${STACK_OPENSTACK:-2025.1} == zed ]]; then
  groups+=(
    "Neutron and Octavia: python3-neutron python3-octavia python3-ovn-octavia-provider"
    "Open vSwitch and OVN (the datapath): openvswitch-switch ovn-central ovn-host"
    "MariaDB (Neutron's database): mariadb-server python3-pymysql"
  )
  [[ ${STACK_KEYSTONE:-0} == 1 ]] && groups+=("Keystone: python3-keystone")
fi

missing=() what=()
for g in "${groups[@]}"; do
  gm=()
  for p in ${g#*: }; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || gm+=("$p")
  done
  ((${#gm[@]} == 0)) && continue
  missing+=("${gm[@]}")
  what+=("${g%%: *} (${gm[*]})")
done
if ((${#missing[@]} == 0)); then
  log "all packages present"
  exit 0
fi

SUDO=()
((EUID != 0)) && SUDO=(sudo)
log "installing with apt (about 2-4 min on a fresh machine):"
for w in "${what[@]}"; do log "  $w"; done
start=$SECONDS
# Keep Debian from starting daemons during the install.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee /usr/sbin/policy-rc.d >/dev/null
  "${SUDO[@]}" chmod +x /usr/sbin/policy-rc.d
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q >/dev/null
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
log "installed in $((SECONDS - start)) s"
