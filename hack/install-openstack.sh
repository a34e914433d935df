#!/usr/bin/env bash
# Installs Neutron and Octavia (and Keystone when STACK_KEYSTONE=1) from Debian packages when missing.
# Library packages only: no services are started, no /etc files are written.
set -euo pipefail

log() { printf '[install-openstack %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

pkgs=(python3-neutron python3-octavia python3-ovn-octavia-provider openvswitch-switch ovn-central ovn-host sqlite3 openssl curl jq iproute2 procps)
[[ ${STACK_KEYSTONE:-0} == 1 ]] && pkgs+=(python3-keystone)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  log "all packages present"
  exit 0
fi

SUDO=()
((EUID != 0)) && SUDO=(sudo)
log "installing ${missing[*]} with apt (about 2 min on a fresh machine)"
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
