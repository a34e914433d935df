#!/usr/bin/env bash
# The local stack Raven is developed and tested against, all on 127.0.0.1:
#   etcd + kube-apiserver + kube-controller-manager (built from the Go module proxy, cached),
#   Open vSwitch (userspace datapath) + OVN with this machine as the one chassis, an "outside" network namespace
#   on br-ex that stands in for the world beyond the cloud,
#   Neutron (ML2/OVN, router, security groups, tags) and Octavia from Debian: its OVN provider (real load balancing
#   in OVN, with the driver agent) on the stack that holds the root namespace's datapath, else the amphora provider
#   with noop drivers (STACK_LB_PROVIDER=ovn|amphora chooses),
#   Keystone when STACK_KEYSTONE=1, and real nodes: a kubelet with containerd each, kube-scheduler, and raven-node
#   as the DaemonSet of deploy/node (hack/stack-nodes.sh); two on the stack that holds the root namespace's
#   datapath, one on another. Without the node side (STACK_CNI=0, for the control-plane benchmark), the nodes are
#   hollow: Node objects that kube-scheduler binds pods to and that no kubelet runs.
#
# Usage: hack/stack.sh up | build | down | status | stop-service NAME | start-service NAME | install-raven | uninstall-raven
#        | raven-overlay DIR
# (build: everything up needs, built into the caches, nothing started; install-raven: Raven from deploy/ into the
# running stack's cluster, as make run does; uninstall-raven: removed; raven-overlay: writes the stack's overlay of
# deploy/ into DIR, for an install by hand as docs/operations.md has it)
# State lives in $STACK_DIR (default .stack/ in the repository); .stack/env is shell-sourceable.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STACK_DIR=$(realpath -m "${STACK_DIR:-$REPO/.stack}")
K8S_VERSION=${K8S_VERSION:-v1.37.2}
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/raven
# The OpenStack release the cloud side runs: 2025.1 (Neutron 26, Octavia 16, OVN 25.03, Open vSwitch 3.5), the
# default, from a Debian 13 root file system (hack/build-openstack-rootfs.sh) that its daemons and tools run in by
# chroot (hack/openstack/os-run, through the wrappers in $OS_TOOLS, first on the PATH); or zed (Neutron 21,
# Octavia 11, OVN 23.03, Open vSwitch 3.1), the host's own Debian 12 packages, the compatibility lane
# (docs/operations.md, "OpenStack versions tested").
OPENSTACK=${STACK_OPENSTACK:-2025.1}
OS_TOOLS=$STACK_DIR/osbin
case $OPENSTACK in
  2025.1) export PATH=$OS_TOOLS:$PATH PY=$OS_TOOLS/python3 ;;
  zed) PY=/usr/bin/python3 ;;
  *) echo "STACK_OPENSTACK=$OPENSTACK: use 2025.1 (the default) or zed" >&2; exit 2 ;;
esac
CLUSTER_ID=${RAVEN_CLUSTER_ID:-local}
# What runs the nodes: kubelet (a real kubelet with containerd on each node, kube-scheduler, raven-node as the
# DaemonSet of deploy/node), or hollow without the node side (hack/stack-nodes.sh).
NODE_RUNTIME=kubelet
NODE_NAME=${STACK_NODE_NAME:-node-1} NODE2_NAME=${STACK_NODE2_NAME:-node-2}
export GOTOOLCHAIN=local

# Open vSwitch and OVN: every daemon and every CLI call finds its sockets, pidfiles and databases here, never in
# /var/run or /etc. The databases live on tmpfs with the rest of the state.
export OVS_RUNDIR=$STACK_DIR/ovs OVS_LOGDIR=$STACK_DIR/logs OVS_DBDIR=$STACK_DIR/state/ovs OVN_RUNDIR=$STACK_DIR/ovn
OVS_DB=unix:$OVS_RUNDIR/db.sock
OVN_NB=unix:$OVN_RUNDIR/ovnnb_db.sock
OVN_SB=unix:$OVN_RUNDIR/ovnsb_db.sock
vsctl() { ovs-vsctl --db="$OVS_DB" --timeout=20 "$@"; }
EXT_CIDR=172.24.4.0/24 EXT_GW=172.24.4.1
CHASSIS_NS="" OUTSIDE_NS=""
# The second node: a chassis of its own (ovsdb-server, ovs-vswitchd, ovn-controller) whose datapath is in the
# network namespace raven-node2, joined to the first by a geneve tunnel between two br-phy bridges over a veth
# pair. Its kubelet and raven-node run in the root namespace (they need 127.0.0.1); raven-node puts the host
# ends of the pods' veths into raven-node2 (--datapath-netns).
NODE2_NS=raven-node2
OVS2_RUNDIR=$STACK_DIR/ovs2 OVN2_RUNDIR=$STACK_DIR/ovn2
OVS2_DB=unix:$OVS2_RUNDIR/db.sock
vsctl2() { ovs-vsctl --db="$OVS2_DB" --timeout=20 "$@"; }
TUNNEL1=169.254.100.1 TUNNEL2=169.254.100.2

log() { printf '[stack %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# stack_tag: six hex digits that tell this stack's namespaces and cgroups from another's (one stack per
# $STACK_DIR).
stack_tag() { printf %s "$STACK_DIR" | sha1sum | cut -c1-6; }

# shellcheck source=hack/stack-nodes.sh
. "$REPO/hack/stack-nodes.sh"
# A nested node (a Kubernetes node that stands for a Nova VM: hack/stack-vm.sh) on the stack with the root
# namespace's datapath and two nodes; STACK_NESTED=0: none.
NESTED=${STACK_NESTED:-1}
# shellcheck source=hack/stack-vm.sh
. "$REPO/hack/stack-vm.sh"

# starttime PID: when the process started, in clock ticks since boot (field 22 of /proc/PID/stat).
starttime() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }

# ours PIDFILE: the PID in PIDFILE is still the process this stack started, not a later one that reused the PID
# (a stale pidfile after a crash): its start time is the one recorded when it was started, or, for a pidfile
# without one, its command line names the program recorded in cmds/.
ours() {
  local pid=$(<"$1") want name=$(basename "$1" .pid)
  [[ -r /proc/$pid/cmdline ]] || return 1
  if [[ -f ${1%.pid}.start ]]; then
    want=$(<"${1%.pid}.start")
    [[ $(starttime "$pid") == "$want" ]]
  else
    local prog
    prog=$(awk '{print $1}' "$STACK_DIR/cmds/$name" 2>/dev/null) || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$(basename "$prog")"
  fi
}

# alive PIDFILE: the process runs and is ours (a zombie left by a parent that does not reap does not count).
alive() {
  [[ -f $1 ]] || return 1
  local pid state
  pid=$(cat "$1")
  kill -0 "$pid" 2>/dev/null || return 1
  state=$(ps -o stat= -p "$pid" 2>/dev/null) || return 1
  [[ $state != Z* ]] && ours "$1"
}

is_up() {
  [[ -f $STACK_DIR/env && -d $STACK_DIR/pids ]] || return 1
  local f
  for f in "$STACK_DIR"/pids/*.pid; do alive "$f" || return 1; done
}

declare -A TAKEN=()
# freeport picks a free port below the kernel's ephemeral range: a client retrying a stopped service on an
# ephemeral port can connect to itself and leave a TIME-WAIT that keeps the service from binding again.
EPHEMERAL_LOW=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
freeport() {
  local p
  while :; do
    p=$((10000 + RANDOM % (EPHEMERAL_LOW - 10000)))
    [[ -n ${TAKEN[$p]:-} ]] && continue
    ss -Hltn "sport = :$p" | grep -q . && continue
    TAKEN[$p]=1
    echo "$p"
    return
  done
}

# start NAME CMD... : runs CMD in its own session (so its forked children share its process group).
start() {
  local name=$1; shift
  mkdir -p "$STACK_DIR/cmds"
  printf '%q ' "$@" >"$STACK_DIR/cmds/$name"
  setsid "$@" >>"$STACK_DIR/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$STACK_DIR/pids/$name.pid"
  starttime $! >"$STACK_DIR/pids/$name.start"
}

# stop_service NAME: stops one service of the running stack (for fault-injection tests).
stop_service() {
  local f=$STACK_DIR/pids/$1.pid pid
  [[ -f $f ]] || die "no service $1"
  alive "$f" || { log "$1 does not run"; return 0; }
  pid=$(cat "$f")
  kill -TERM -- "-$pid" 2>/dev/null || true
  for _ in $(seq 100); do alive "$f" || break; sleep 0.1; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  pkill -KILL -g "$pid" 2>/dev/null || true
  # A killed process is gone only once the kernel has torn it down: a start-service right after would find it
  # still alive (an API server with kubelets' watches outlives the 10 s of TERM) and start nothing.
  for _ in $(seq 100); do alive "$f" || break; sleep 0.1; done
  alive "$f" && die "$1 (PID $pid) still runs after SIGKILL"
  log "stopped $1"
}

# start_service NAME: starts a stopped service again with the command it was first started with.
start_service() {
  local name=$1
  [[ -f $STACK_DIR/cmds/$name ]] || die "no service $name"
  alive "$STACK_DIR/pids/$name.pid" && { log "$name already runs"; return 0; }
  eval "start $name $(cat "$STACK_DIR/cmds/$name")"
  log "started $name"
}

# wait_for NAME SECONDS CMD... : polls CMD until it succeeds, failing if the process died.
wait_for() {
  local name=$1 timeout=$2; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    alive "$STACK_DIR/pids/$name.pid" || { tail -30 "$STACK_DIR/logs/$name.log" >&2; die "$name exited"; }
    ((SECONDS < deadline)) || { tail -30 "$STACK_DIR/logs/$name.log" >&2; die "$name not ready after ${timeout}s"; }
    sleep 0.1
  done
}

# --- The cloud side's release -------------------------------------------------------------------------------

# The programs that run from the OpenStack root file system, each a wrapper in $OS_TOOLS.
OS_PROGRAMS=(ovsdb-tool ovsdb-server ovsdb-client ovs-vswitchd ovs-vsctl ovs-appctl ovs-ofctl ovn-northd ovn-controller
  ovn-nbctl ovn-sbctl ovn-appctl ovn-trace mariadb-install-db mariadbd mariadb python3 keystone-manage)

# os_tools: builds (or finds cached) the root file system of the release and writes the wrappers that run its
# programs: in it, with /proc, /sys, /dev, /tmp, the repository, this stack's directory and the OVN provider's
# socket directory the host's. Sets OS_ROOT.
os_tools() {
  OS_ROOT=$("$REPO/hack/build-openstack-rootfs.sh")
  local -a binds=("$REPO" "$OCTAVIA_RUN")
  [[ $STACK_DIR == "$REPO"/* ]] || binds+=("$STACK_DIR")
  local b t
  mkdir -p "$OS_TOOLS" "$OCTAVIA_RUN"
  for b in "${binds[@]}"; do mkdir -p "$OS_ROOT$b"; done
  printf '#!/bin/sh
exec %q %q %s -- "$@"
' "$REPO/hack/openstack/os-run" "$OS_ROOT" "$(printf '%q ' "${binds[@]}")" >"$OS_TOOLS/os-run"
  chmod +x "$OS_TOOLS/os-run"
  for t in "${OS_PROGRAMS[@]}"; do
    printf '#!/bin/sh
exec %q %s "$@"
' "$OS_TOOLS/os-run" "$t" >"$OS_TOOLS/$t"
    chmod +x "$OS_TOOLS/$t"
  done
  echo "$OS_ROOT" >"$STACK_DIR/openstack-root"
}

# os_run CMD...: CMD of the root file system (the host's on the zed lane), for programs without a wrapper.
os_run() {
  if [[ $OPENSTACK == zed ]]; then "$@"; else "$OS_TOOLS/os-run" "$@"; fi
}

# os_version PACKAGE: the version of a package the cloud side runs.
os_version() {
  if [[ $OPENSTACK == zed ]]; then
    dpkg-query -W -f='${Version}' "$1"
  else
    awk -v p="$1" '$1 == p {print $2}' "$(<"$STACK_DIR/openstack-root")/.raven-manifest"
  fi
}

# --- Open vSwitch + OVN -------------------------------------------------------------------------------------
# The datapath (ovs-vswitchd's taps ovs-netdev, br-int and br-ex, and every veth plugged into them) lives in the
# root network namespace, where a node's CNI plugin expects it. Their names are fixed, so only one stack at a
# time can have it there; another stack on the same machine (the e2e tests' Keystone stack) runs its
# ovs-vswitchd in a network namespace of its own, raven-node-<tag>. Creating the namespace raven-outside is the
# claim on the root one (it fails when it exists). Every namespace the stack creates is listed in $STACK_DIR/netns.
choose_datapath_netns() {
  CHASSIS_NS="" OUTSIDE_NS=raven-outside
  local l busy=""
  for l in ovs-netdev br-int br-ex raven-ext0 br-phy raven-phy1; do
    ip link show "$l" >/dev/null 2>&1 && busy+=" $l"
  done
  ip netns list | grep -qw "^$NODE2_NS" && busy+=" netns $NODE2_NS"
  if [[ -n $busy ]] && ! pgrep -x ovs-vswitchd >/dev/null; then
    # No Open vSwitch runs on this machine: these are the leftovers of a stack that died (its pods' veths too).
    log "removing the leftovers of a stopped stack's datapath:$busy, its pods' veths and netns $OUTSIDE_NS"
    for l in $(ip -o link show type veth | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E '^tap[0-9a-f]{8}-[0-9a-f]{2}$'); do
      ip link del "$l" 2>/dev/null || true
    done
    for l in ovs-netdev br-int br-ex raven-ext0 br-phy raven-phy1; do ip link del "$l" 2>/dev/null || true; done
    ip netns del "$OUTSIDE_NS" 2>/dev/null || true
    ip netns del "$NODE2_NS" 2>/dev/null || true
    busy=""
  fi
  if [[ -z $busy ]] && ip netns add "$OUTSIDE_NS" 2>/dev/null; then
    echo "$OUTSIDE_NS" >>"$STACK_DIR/netns"
    echo root >"$STACK_DIR/datapath"
    return
  fi
  [[ -n $busy ]] || busy=" netns $OUTSIDE_NS"
  local tag
  tag=$(stack_tag)
  CHASSIS_NS=raven-node-$tag OUTSIDE_NS=raven-outside-$tag
  log "the root network namespace's datapath is taken (${busy# }: another stack, or leftovers of one); this stack's goes into netns $CHASSIS_NS"
  local ns
  for ns in "$CHASSIS_NS" "$OUTSIDE_NS"; do
    # A namespace of this name can only be a leftover of a stack in this same $STACK_DIR.
    ip netns del "$ns" 2>/dev/null || true
    ip netns add "$ns"
    echo "$ns" >>"$STACK_DIR/netns"
  done
  ip -n "$CHASSIS_NS" link set lo up
  echo "$CHASSIS_NS" >"$STACK_DIR/datapath"
}

# ipch ARGS...: ip in the namespace that holds this stack's datapath.
ipch() {
  if [[ -n $CHASSIS_NS ]]; then ip -n "$CHASSIS_NS" "$@"; else ip "$@"; fi
}

# start_ovsdbs NB-PORT SB-PORT: the Open_vSwitch database and the OVN northbound and southbound databases. Local
# tools use unix sockets; Neutron reaches NB and SB over TCP, served from each database's Connection table so
# that the inactivity probe can be 60 s (busy Python clients miss the default 5 s probe and get dropped).
start_ovsdbs() {
  local nbp=$1 sbp=$2
  ovsdb-tool create "$OVS_DBDIR/conf.db" /usr/share/openvswitch/vswitch.ovsschema
  ovsdb-tool create "$OVS_DBDIR/ovnnb_db.db" /usr/share/ovn/ovn-nb.ovsschema
  ovsdb-tool create "$OVS_DBDIR/ovnsb_db.db" /usr/share/ovn/ovn-sb.ovsschema
  start ovsdb-server ovsdb-server "$OVS_DBDIR/conf.db" --remote="p$OVS_DB" \
    --pidfile="$OVS_RUNDIR/ovsdb-server.pid" --log-file="$STACK_DIR/logs/ovsdb-server.log" -vconsole:off -vsyslog:off --no-chdir
  start ovsdb-server-nb ovsdb-server "$OVS_DBDIR/ovnnb_db.db" --remote="p$OVN_NB" --remote=db:OVN_Northbound,NB_Global,connections \
    --pidfile="$OVN_RUNDIR/ovnnb_db.pid" --unixctl="$OVN_RUNDIR/ovnnb_db.ctl" \
    --log-file="$STACK_DIR/logs/ovsdb-server-nb.log" -vconsole:off -vsyslog:off --no-chdir
  start ovsdb-server-sb ovsdb-server "$OVS_DBDIR/ovnsb_db.db" --remote="p$OVN_SB" --remote=db:OVN_Southbound,SB_Global,connections \
    --pidfile="$OVN_RUNDIR/ovnsb_db.pid" --unixctl="$OVN_RUNDIR/ovnsb_db.ctl" \
    --log-file="$STACK_DIR/logs/ovsdb-server-sb.log" -vconsole:off -vsyslog:off --no-chdir
  wait_for ovsdb-server-nb 20 ovn-nbctl --db="$OVN_NB" --no-wait init -- --id=@c create Connection \
    target="\"ptcp:$nbp:127.0.0.1\"" inactivity_probe=60000 -- set NB_Global . connections=@c
  wait_for ovsdb-server-sb 20 ovn-sbctl --db="$OVN_SB" init -- --id=@c create Connection \
    target="\"ptcp:$sbp:127.0.0.1\"" inactivity_probe=60000 -- set SB_Global . connections=@c
  # The chassis: its name is the node's, so that Neutron binds ports whose binding:host_id is the node name.
  # No userspace TSO: the CNI turns tx checksum offload off in each pod, which also works across chassis.
  wait_for ovsdb-server 20 vsctl --no-wait init
  vsctl --no-wait set Open_vSwitch . external_ids:system-id="$NODE_NAME" external_ids:hostname="$NODE_NAME" \
    external_ids:ovn-remote="$OVN_SB" external_ids:ovn-encap-type=geneve external_ids:ovn-encap-ip="$ENCAP_IP" \
    external_ids:ovn-bridge=br-int external_ids:ovn-bridge-datapath-type=netdev \
    external_ids:ovn-bridge-mappings=public:br-ex external_ids:ovn-cms-options=enable-chassis-as-gw
  # No openvswitch kernel module here: every bridge uses the userspace datapath (netdev).
  vsctl --no-wait -- add-br br-int -- set Bridge br-int datapath_type=netdev fail-mode=secure \
    other_config:disable-in-band=true -- add-br br-ex -- set Bridge br-ex datapath_type=netdev
}

# start_chassis: ovs-vswitchd (in the datapath's namespace), ovn-northd, ovn-controller, and the outside
# namespace on br-ex: veth raven-ext0 <-> eth0 with the external subnet's gateway address.
start_chassis() {
  local -a nsexec=()
  [[ -n $CHASSIS_NS ]] && nsexec=(ip netns exec "$CHASSIS_NS")
  # --monitor restarts it after a crash (OVS 3.1's userspace conntrack has an assertion that can fire).
  start ovs-vswitchd "${nsexec[@]}" ovs-vswitchd "$OVS_DB" --monitor --pidfile="$OVS_RUNDIR/ovs-vswitchd.pid" \
    --log-file="$STACK_DIR/logs/ovs-vswitchd.log" -vconsole:off -vsyslog:off --no-chdir
  start ovn-northd ovn-northd --ovnnb-db="$OVN_NB" --ovnsb-db="$OVN_SB" --pidfile="$OVN_RUNDIR/ovn-northd.pid" \
    --log-file="$STACK_DIR/logs/ovn-northd.log" -vconsole:off -vsyslog:off --no-chdir
  # ovn-controller has no --unixctl: its control socket is $OVN_RUNDIR/ovn-controller.<pid>.ctl.
  start ovn-controller ovn-controller "$OVS_DB" --pidfile="$OVN_RUNDIR/ovn-controller.pid" \
    --log-file="$STACK_DIR/logs/ovn-controller.log" -vconsole:off -vsyslog:off --no-chdir
  wait_for ovs-vswitchd 30 ipch link show br-ex
  ipch link add raven-ext0 type veth peer name eth0 netns "$OUTSIDE_NS"
  ip -n "$OUTSIDE_NS" addr add "$EXT_GW/${EXT_CIDR#*/}" dev eth0
  ip -n "$OUTSIDE_NS" link set eth0 up
  ip -n "$OUTSIDE_NS" link set lo up
  # The userspace datapath never fills in a partial checksum: without this, ping works and TCP does not.
  ip netns exec "$OUTSIDE_NS" ethtool -K eth0 tx off >/dev/null
  ipch link set raven-ext0 up
  vsctl add-port br-ex raven-ext0
}

chassis_registered() { # [name]
  [[ -n $(ovn-sbctl --db="$OVN_SB" --timeout=5 --bare --columns=name find Chassis name="${1:-$NODE_NAME}") ]]
}

# publish_gateway_chassis: Neutron 21's gateway scheduler reads a chassis' bridge mappings and CMS options from
# the southbound Chassis' external_ids, where OVN 23.03's ovn-controller no longer writes them (it writes
# other_config only). Finding no eligible chassis, Neutron then schedules a router's gateway on every chassis,
# the second node (which has no bridge to the external network) included; whenever that node holds the gateway,
# SNAT and floating IPs stop working. The first node's options are copied where Neutron reads them; Neutron
# reschedules gateways as soon as it sees the change. ovn-controller leaves these keys alone across restarts.
# Zed lane only: Neutron 26 reads other_config.
publish_gateway_chassis() {
  ovn-sbctl --db="$OVN_SB" --timeout=10 set Chassis "$NODE_NAME" \
    external_ids:ovn-bridge-mappings=public:br-ex external_ids:ovn-cms-options=enable-chassis-as-gw
}

# start_node2: the second chassis (see NODE2_NAME). The tunnel address sits on each side's br-phy, never on the
# veth itself (the userspace datapath cannot route tunnels out of a plain port).
start_node2() {
  mkdir -p "$OVS2_RUNDIR" "$OVN2_RUNDIR"
  ip netns add "$NODE2_NS"
  echo "$NODE2_NS" >>"$STACK_DIR/netns"
  ip -n "$NODE2_NS" link set lo up
  ovsdb-tool create "$OVS_DBDIR/conf2.db" /usr/share/openvswitch/vswitch.ovsschema
  start ovsdb-server-2 ovsdb-server "$OVS_DBDIR/conf2.db" --remote="p$OVS2_DB" --pidfile="$OVS2_RUNDIR/ovsdb-server.pid" \
    --unixctl="$OVS2_RUNDIR/ovsdb-server.ctl" --log-file="$STACK_DIR/logs/ovsdb-server-2.log" -vconsole:off -vsyslog:off --no-chdir
  wait_for ovsdb-server-2 20 vsctl2 --no-wait init
  vsctl2 --no-wait set Open_vSwitch . external_ids:system-id="$NODE2_NAME" external_ids:hostname="$NODE2_NAME" \
    external_ids:ovn-remote="$OVN_SB" external_ids:ovn-encap-type=geneve external_ids:ovn-encap-ip="$TUNNEL2" \
    external_ids:ovn-bridge=br-int external_ids:ovn-bridge-datapath-type=netdev
  vsctl2 --no-wait -- add-br br-int -- set Bridge br-int datapath_type=netdev fail-mode=secure \
    other_config:disable-in-band=true -- add-br br-phy -- set Bridge br-phy datapath_type=netdev
  start ovs-vswitchd-2 ip netns exec "$NODE2_NS" env OVS_RUNDIR="$OVS2_RUNDIR" ovs-vswitchd "$OVS2_DB" --monitor \
    --pidfile="$OVS2_RUNDIR/ovs-vswitchd.pid" --log-file="$STACK_DIR/logs/ovs-vswitchd-2.log" -vconsole:off -vsyslog:off --no-chdir
  start ovn-controller-2 ip netns exec "$NODE2_NS" env OVS_RUNDIR="$OVS2_RUNDIR" OVN_RUNDIR="$OVN2_RUNDIR" ovn-controller "$OVS2_DB" \
    --pidfile="$OVN2_RUNDIR/ovn-controller.pid" --log-file="$STACK_DIR/logs/ovn-controller-2.log" -vconsole:off -vsyslog:off --no-chdir
  # The wire between the two nodes' br-phy.
  vsctl add-br br-phy -- set Bridge br-phy datapath_type=netdev
  ip link add raven-phy1 type veth peer name raven-phy2 netns "$NODE2_NS"
  ip link set raven-phy1 up
  ip -n "$NODE2_NS" link set raven-phy2 up
  vsctl add-port br-phy raven-phy1
  wait_for ovs-vswitchd-2 30 ip -n "$NODE2_NS" link show br-phy
  vsctl2 add-port br-phy raven-phy2
  wait_for ovs-vswitchd 30 ip link show br-phy
  ip addr add "$TUNNEL1/30" dev br-phy
  ip link set br-phy up
  ip -n "$NODE2_NS" addr add "$TUNNEL2/30" dev br-phy
  ip -n "$NODE2_NS" link set br-phy up
}

# stop_node2: the second node's pods' host ends, bridges and switch go with its namespace, once its
# ovn-controller (stopped with the other services before) and ovs-vswitchd are gone.
stop_node2() {
  [[ -f $STACK_DIR/pids/ovsdb-server-2.pid ]] || return 0
  if alive "$STACK_DIR/pids/ovsdb-server-2.pid"; then
    vsctl2 --if-exists del-br br-int -- --if-exists del-br br-phy >/dev/null 2>&1 || true
  fi
  if alive "$STACK_DIR/pids/ovs-vswitchd-2.pid"; then
    OVS_RUNDIR=$OVS2_RUNDIR ovs-appctl --timeout=10 -t ovs-vswitchd exit --cleanup >/dev/null 2>&1 || true
    for _ in $(seq 50); do alive "$STACK_DIR/pids/ovs-vswitchd-2.pid" || break; sleep 0.1; done
  fi
  terminate ovs-vswitchd-2
  ip netns del "$NODE2_NS" 2>/dev/null || true
}

# stop_datapath: with ovn-controller already stopped (it would create br-int again), deletes the namespaces of
# the pods plugged into this stack's bridges and every namespace in $STACK_DIR/netns, the bridges, then stops ovs-vswitchd with --cleanup so that its persistent taps go too.
# After a crash of ovs-vswitchd, it deletes those taps itself, if this stack's datapath was the root namespace's.
stop_datapath() {
  local where="" ns p id
  [[ -f $STACK_DIR/datapath ]] || return 0
  where=$(<"$STACK_DIR/datapath")
  CHASSIS_NS=""
  [[ $where != root ]] && CHASSIS_NS=$where
  local -a netns=()
  stop_node2
  stop_vm
  if alive "$STACK_DIR/pids/ovsdb-server.pid"; then
    # A pod's host-side veth is a port of br-int; its peer's namespace is the pod's.
    local ids
    ids=$(ipch -j netns list-id 2>/dev/null || echo '[]')
    for p in $(vsctl list-ports br-int 2>/dev/null); do
      id=$(ipch -j -d link show dev "$p" 2>/dev/null | jq -r '.[0].link_netnsid // empty' 2>/dev/null) || continue
      [[ -n $id ]] || continue
      ns=$(jq -r --argjson id "$id" '.[] | select(.nsid == $id) | .name // empty' <<<"$ids")
      [[ -n $ns ]] && netns+=("$ns")
    done
  fi
  [[ -f $STACK_DIR/netns ]] && mapfile -t -O "${#netns[@]}" netns <"$STACK_DIR/netns"
  for ns in "${netns[@]}"; do
    [[ -n $ns && $ns != "$CHASSIS_NS" ]] || continue
    ip netns del "$ns" 2>/dev/null || true
  done
  if alive "$STACK_DIR/pids/ovsdb-server.pid"; then
    vsctl --if-exists del-br br-int -- --if-exists del-br br-ex -- --if-exists del-br br-phy >/dev/null 2>&1 || true
  fi
  if alive "$STACK_DIR/pids/ovs-vswitchd.pid"; then
    ovs-appctl --timeout=10 -t ovs-vswitchd exit --cleanup >/dev/null 2>&1 || true
    for _ in $(seq 50); do alive "$STACK_DIR/pids/ovs-vswitchd.pid" || break; sleep 0.1; done
  fi
  if [[ -n $CHASSIS_NS ]]; then
    # Its taps and veths go with it once ovs-vswitchd is gone.
    alive "$STACK_DIR/pids/ovs-vswitchd.pid" && terminate ovs-vswitchd
    ip netns del "$CHASSIS_NS" 2>/dev/null || true
  elif ! alive "$STACK_DIR/pids/ovs-vswitchd.pid"; then
    for p in ovs-netdev br-int br-ex br-phy; do
      ip -d link show dev "$p" 2>/dev/null | grep -q ' tun type tap ' && ip link del "$p" 2>/dev/null
    done
    ip link del raven-ext0 2>/dev/null || true
    ip link del raven-phy1 2>/dev/null || true
  fi
  return 0
}

# build makes or installs everything up needs, into the caches, and starts nothing: the Kubernetes binaries, the
# host's packages, the OpenStack root file system (beside the Kubernetes build: it mostly downloads and unpacks),
# the nodes' binaries and the images. make test runs it beside lint and the unit tests; up then finds it all.
build() {
  local t0=$SECONDS root=/ rootfs_pid=""
  local rootfs_out=$REPO/bin/.openstack-root.$$
  mkdir -p "$REPO/bin"
  if [[ $OPENSTACK != zed ]]; then
    "$REPO/hack/build-openstack-rootfs.sh" >"$rootfs_out" &
    rootfs_pid=$!
  fi
  "$REPO/hack/build-k8s.sh" >/dev/null
  STACK_OPENSTACK=$OPENSTACK "$REPO/hack/install-openstack.sh"
  if [[ -n $rootfs_pid ]]; then
    wait "$rootfs_pid" || die "building the OpenStack root file system failed"
    root=$(cat "$rootfs_out")
    rm -f "$rootfs_out"
  fi
  "$REPO/hack/build-node.sh" >/dev/null
  log "building the images (make images)"
  (cd "$REPO" && make -s images OVS_ROOT="$root" >"$REPO/bin/images.log" 2>&1) || { tail -20 "$REPO/bin/images.log" >&2; die "make images failed"; }
  log "everything the stack needs is built, in $((SECONDS - t0)) s"
}

up() {
  if is_up; then
    log "already running (. $STACK_DIR/env)"
    return 0
  fi
  [[ -d $STACK_DIR ]] && down_quiet
  local t0=$SECONDS
  local bins cni=${STACK_CNI:-1}
  bins=$("$REPO/hack/build-k8s.sh")
  STACK_OPENSTACK=$OPENSTACK "$REPO/hack/install-openstack.sh"

  rm -rf "$STACK_DIR"
  mkdir -p "$STACK_DIR"/{pids,logs,pki,bin,neutron,octavia/certs/store,kcm-certs} "$OVS_RUNDIR" "$OVN_RUNDIR"
  local shm=/dev/shm/raven-stack-$$-$RANDOM
  mkdir -p "$shm" && echo "$shm" >"$STACK_DIR/shm"
  ln -s "$shm" "$STACK_DIR/state"
  mkdir -p "$OVS_DBDIR"
  if [[ $OPENSTACK != zed ]]; then
    os_tools
    log "the cloud side runs OpenStack $OPENSTACK from $OS_ROOT"
  fi
  choose_datapath_netns
  if [[ $cni == 0 ]]; then
    # A kubelet needs a network plugin to run pods; without one, pods are bound to nodes that never run them.
    log "no node side (STACK_CNI=0): hollow nodes, which kube-scheduler binds pods to and no kubelet runs"
    NODE_RUNTIME=hollow
  fi
  NODE_BINS=$("$REPO/hack/build-node.sh")
  [[ $NODE_RUNTIME == kubelet ]] && node_images
  # Two nodes when this stack has the root namespace's datapath and the node side (STACK_NODES=1: one).
  local nodes=${STACK_NODES:-2}
  [[ $cni == 1 && -z $CHASSIS_NS ]] || nodes=1
  ((nodes >= 2)) || NESTED=0
  ENCAP_IP=127.0.0.1
  ((nodes >= 2)) && ENCAP_IP=$TUNNEL1
  local EP PP AP KP NP OP KSP NBP SBP DBP
  EP=$(freeport); PP=$(freeport); AP=$(freeport); KP=$(freeport); NP=$(freeport); OP=$(freeport); KSP=$(freeport)
  NBP=$(freeport); SBP=$(freeport); DBP=$(freeport)
  RAVEN_METRICS=127.0.0.1:$(freeport); RAVEN_HEALTH=127.0.0.1:$(freeport)
  local ports="$EP $PP $AP $KP $NP $OP $NBP $SBP $DBP"
  [[ ${STACK_KEYSTONE:-0} == 1 ]] && ports+=" $KSP"
  echo "$ports" >"$STACK_DIR/ports"

  log "starting etcd and the OVN databases"
  start etcd "$bins/etcd" --name=raven --data-dir="$STACK_DIR/state/etcd" \
    --listen-client-urls="http://127.0.0.1:$EP" --advertise-client-urls="http://127.0.0.1:$EP" \
    --listen-peer-urls="http://127.0.0.1:$PP" --initial-advertise-peer-urls="http://127.0.0.1:$PP" \
    --initial-cluster="raven=http://127.0.0.1:$PP" --unsafe-no-fsync --log-level=warn --listen-metrics-urls=""
  start_ovsdbs "$NBP" "$SBP"

  local auth=noauth
  [[ ${STACK_KEYSTONE:-0} == 1 ]] && auth=keystone
  choose_lb_provider "$auth"
  log "starting MariaDB, Neutron (ML2/OVN) and Octavia ($LB_PROVIDER provider)"
  [[ $auth == keystone ]] && start_keystone "$KSP"
  start_mariadb "$DBP"
  start_neutron "$NP" "$auth" "$KSP" "$NBP" "$SBP" "$DBP"
  start_octavia "$OP" "$auth" "$KSP" "$DBP" "$NP" "$NBP" "$SBP"

  log "starting Open vSwitch, ovn-northd and ovn-controller (chassis $NODE_NAME)"
  start_chassis
  if ((nodes >= 2)); then
    log "starting the second node's Open vSwitch and ovn-controller (chassis $NODE2_NAME, netns $NODE2_NS, geneve over br-phy)"
    start_node2
  fi

  wait_for etcd 30 curl -sf "http://127.0.0.1:$EP/health"
  log "starting kube-apiserver"
  openssl genrsa -out "$STACK_DIR/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$STACK_DIR/pki/sa.key" -pubout -out "$STACK_DIR/pki/sa.pub" 2>/dev/null
  local token ctoken
  token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  ctoken=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  {
    echo "$token,admin,admin-uid,\"system:masters\""
    # The unprivileged identity is named as Raven's service account, so that the shipped admission policy
    # raven-pod-annotations (deploy/node/admission.yaml) lets it write the pod annotations it owns; it holds only
    # the RBAC a test binds to it (or the shipped binding of deploy/rbac.yaml, once installed).
    echo "$ctoken,system:serviceaccount:raven-system:raven,raven-unprivileged-uid,\"system:serviceaccounts,system:serviceaccounts:raven-system\""
  } >"$STACK_DIR/pki/tokens.csv"
  # Without kubelets, pods need no ServiceAccount token; with them, the API server authorizes each kubelet as its
  # node (Node authorizer, NodeRestriction) and reaches kubelets with a client certificate of their CA.
  local -a apiflags=(--authorization-mode=RBAC --disable-admission-plugins=ServiceAccount)
  local kcm_more=""
  if [[ $NODE_RUNTIME == kubelet ]]; then
    node_pki
    if [[ $NESTED == 1 ]]; then
      node_tokens "$NODE_NAME" "$NODE2_NAME" "$VM_NAME" "$VM2_NAME" >>"$STACK_DIR/pki/tokens.csv"
    else
      node_tokens "$NODE_NAME" "$NODE2_NAME" >>"$STACK_DIR/pki/tokens.csv"
    fi
    apiflags=(--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction
      --kubelet-client-certificate="$STACK_DIR/pki/kubelet-client.crt" --kubelet-client-key="$STACK_DIR/pki/kubelet-client.key"
      --kubelet-preferred-address-types=InternalIP --allow-privileged=true)
    kcm_more=,node-lifecycle-controller,daemonset-controller,serviceaccount-controller,root-ca-certificate-publisher-controller,pod-garbage-collector-controller
  fi
  API_PORT=$AP
  start kube-apiserver "$bins/kube-apiserver" --etcd-servers="http://127.0.0.1:$EP" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$AP" \
    --cert-dir="$STACK_DIR/pki" --token-auth-file="$STACK_DIR/pki/tokens.csv" "${apiflags[@]}" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$STACK_DIR/pki/sa.pub" --service-account-signing-key-file="$STACK_DIR/pki/sa.key" \
    --service-cluster-ip-range=10.0.0.0/25 --endpoint-reconciler-type=none
  wait_for kube-apiserver 60 curl -sf -k -H "Authorization: Bearer $token" "https://127.0.0.1:$AP/readyz"
  write_kubeconfig "$STACK_DIR/kubeconfig" "$AP" "$token" admin
  write_kubeconfig "$STACK_DIR/kubeconfig-unprivileged" "$AP" "$ctoken" raven-unprivileged

  log "starting kube-controller-manager"
  start kube-controller-manager "$bins/kube-controller-manager" --kubeconfig="$STACK_DIR/kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$KP" --cert-dir="$STACK_DIR/kcm-certs" --leader-elect=false \
    --controllers=deployment-controller,replicaset-controller,endpoints-controller,endpointslice-controller,namespace-controller,garbage-collector-controller$kcm_more \
    --root-ca-file="$STACK_DIR/pki/apiserver.crt" \
    --concurrent-deployment-syncs=5 --concurrent-replicaset-syncs=5
  wait_for kube-controller-manager 60 curl -sf -k "https://127.0.0.1:$KP/healthz"

  wait_for neutron-server 90 curl -sf -o /dev/null "http://127.0.0.1:$NP/"
  wait_for octavia 90 curl -sf -o /dev/null "http://127.0.0.1:$OP/"
  local NEUTRON_URL=http://127.0.0.1:$NP OCTAVIA_URL=http://127.0.0.1:$OP
  local -a hdr=()
  if [[ $auth == keystone ]]; then
    wait_for keystone 60 curl -sf -o /dev/null "http://127.0.0.1:$KSP/v3"
    keystone_bootstrap "$KSP" "$NP" "$OP"
    hdr=(-H "X-Auth-Token: $(keystone_token "$KSP" admin secret admin)")
  fi
  wait_for ovn-controller 30 chassis_registered
  ((nodes >= 2)) && wait_for ovn-controller-2 30 chassis_registered "$NODE2_NAME"
  [[ $OPENSTACK == zed ]] && publish_gateway_chassis
  # Neutron allocates router gateways and LoadBalancer floating IPs from .100 up; below stay free for the
  # addresses users ask for in a Service's externalIPs.
  log "creating the operator's external network 'public' ($EXT_CIDR, flat on br-ex; automatic addresses from .100)"
  local net
  net=$(curl -sf "${hdr[@]}" -H 'Content-Type: application/json' -X POST "$NEUTRON_URL/v2.0/networks" \
    -d '{"network":{"name":"public","router:external":true,"provider:network_type":"flat","provider:physical_network":"public","shared":false}}' |
    jq -r .network.id)
  curl -sf "${hdr[@]}" -H 'Content-Type: application/json' -X POST "$NEUTRON_URL/v2.0/subnets" \
    -d "{\"subnet\":{\"name\":\"public-subnet\",\"network_id\":\"$net\",\"ip_version\":4,\"cidr\":\"$EXT_CIDR\",\"gateway_ip\":\"$EXT_GW\",\"enable_dhcp\":false,\"allocation_pools\":[{\"start\":\"${EXT_CIDR%.*}.100\",\"end\":\"${EXT_CIDR%.*}.254\"}]}}" >/dev/null

  write_openstack_config "$auth" "$NEUTRON_URL" "$OCTAVIA_URL" "$KSP"
  write_raven_config
  cat >"$STACK_DIR/env" <<ENV
# Source me: . $STACK_DIR/env
export KUBECONFIG=$STACK_DIR/kubeconfig
export OS_CLIENT_CONFIG_FILE=$STACK_DIR/clouds.yaml
export OS_CLOUD=raven
export RAVEN_CONFIG=$STACK_DIR/raven.yaml
export NEUTRON_URL=$NEUTRON_URL
export OCTAVIA_URL=$OCTAVIA_URL
export ETCD_URL=http://127.0.0.1:$EP
export STACK_DIR=$STACK_DIR
export STACK_AUTH=$auth
export STACK_NODE_NAME=$NODE_NAME
export STACK_UNPRIVILEGED_KUBECONFIG=$STACK_DIR/kubeconfig-unprivileged
export RAVEN_METRICS_ADDR=$RAVEN_METRICS
export RAVEN_HEALTH_ADDR=$RAVEN_HEALTH
export OVS_RUNDIR=$OVS_RUNDIR
export OVN_RUNDIR=$OVN_RUNDIR
export STACK_OVS_DB=$OVS_DB
export OVN_NB_DB=$OVN_NB
export OVN_SB_DB=$OVN_SB
export STACK_OVN_NB_TCP=tcp:127.0.0.1:$NBP
export STACK_OVN_SB_TCP=tcp:127.0.0.1:$SBP
export STACK_NODE_NETNS=$CHASSIS_NS
export STACK_OUTSIDE_NETNS=$OUTSIDE_NS
export STACK_EXTERNAL_GATEWAY=$EXT_GW
export STACK_NETNS_FILE=$STACK_DIR/netns
export STACK_CNI=$cni
export STACK_LB_PROVIDER=$LB_PROVIDER
export STACK_NODES=$nodes
export STACK_NODE_RUNTIME=$NODE_RUNTIME
export STACK_OPENSTACK=$OPENSTACK
export STACK_OVN_OCTAVIA_PROVIDER=$(os_version python3-ovn-octavia-provider)
ENV
  [[ $OPENSTACK == zed ]] || echo "export STACK_TOOLS=$OS_TOOLS" >>"$STACK_DIR/env"
  if ((nodes >= 2)); then
    printf 'export STACK_NODE2_NAME=%s\nexport STACK_NODE2_NETNS=%s\nexport STACK_OVS2_DB=%s\n' "$NODE2_NAME" "$NODE2_NS" "$OVS2_DB" >>"$STACK_DIR/env"
  fi
  if [[ $auth == keystone ]]; then
    echo "export KEYSTONE_URL=http://127.0.0.1:$KSP/v3" >>"$STACK_DIR/env"
  fi

  if [[ $NESTED == 1 ]]; then
    log "making the nested nodes $VM_NAME and $VM2_NAME: their VMs' ports on raven-workers ($VM_CIDR), bound to $NODE_NAME and $NODE2_NAME, with a trunk each; each VM's namespace and Open vSwitch"
    vm_neutron "$NEUTRON_URL" "${hdr[@]}"
    start_vm 1
    start_vm 2
    cat "$STACK_DIR/vm.env" >>"$STACK_DIR/env"
  fi
  if [[ $NODE_RUNTIME == kubelet ]]; then
    log "starting the registry, containerd and the kubelet of each node, kube-scheduler"
    start_nodes "$nodes" "$(freeport)"
    printf 'export CONTAINER_RUNTIME_ENDPOINT=unix://%s\nexport STACK_REGISTRY=%s\nexport STACK_IMAGES_VERSION=%s\nexport STACK_NODE_BINS=%s\n' \
      "$(node_dir "$NODE_NAME")/run/containerd.sock" "$REGISTRY_ADDR" "$IMAGES_VERSION" "$NODE_BINS" >>"$STACK_DIR/env"
    ((nodes >= 2)) && printf 'export STACK_NODE2_RUNTIME_ENDPOINT=unix://%s\n' "$(node_dir "$NODE2_NAME")/run/containerd.sock" >>"$STACK_DIR/env"
    [[ $NESTED == 1 ]] && printf 'export STACK_VM_RUNTIME_ENDPOINT=unix://%s\nexport STACK_VM2_RUNTIME_ENDPOINT=unix://%s\n' \
      "$(node_dir "$VM_NAME")/run/containerd.sock" "$(node_dir "$VM2_NAME")/run/containerd.sock" >>"$STACK_DIR/env"
    # crictl (and ctr, kubelet, containerd) on the PATH; crictl's own config names node 1's runtime.
    printf 'runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 10\n' "$(node_dir "$NODE_NAME")/run/containerd.sock" \
      "$(node_dir "$NODE_NAME")/run/containerd.sock" >"$STACK_DIR/crictl.yaml"
    printf 'export CRI_CONFIG_FILE=%s\nexport PATH=%s:$PATH\n' "$STACK_DIR/crictl.yaml" "$NODE_BINS" >>"$STACK_DIR/env"
  else
    log "starting kube-scheduler and registering the hollow node $NODE_NAME"
    start_hollow_nodes "$(freeport)"
    printf 'export STACK_NODE_BINS=%s\n' "$NODE_BINS" >>"$STACK_DIR/env"
  fi
  log "stack is up in $((SECONDS - t0)) s; use it with: . $STACK_DIR/env"
}

write_kubeconfig() { # file port token user
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$2
    certificate-authority: $STACK_DIR/pki/apiserver.crt
users:
- name: $4
  user:
    token: $3
contexts:
- name: local
  context: {cluster: local, user: $4}
current-context: local
KC
}

# start_mariadb PORT: Neutron's and Octavia's databases. MariaDB 11.8 (2025.1's) checks repeatable-read snapshots by
# default (innodb_snapshot_isolation, since 11.6): a transaction that writes a row another one changed since it
# read fails with error 1020 "Record has changed since last read", which Octavia's member batch update met under
# the OVN provider's concurrent status writes and answered with a 500. Off, as on the MariaDB releases OpenStack
# was written against; "loose" because 10.11 (zed lane) has no such option. ML2/OVN's four writing processes (api, rpc, maintenance, periodic
# workers) on one sqlite file made port creates take seconds under load and, worse, left ports whose OVN
# post-commit had failed on a sqlite foreign-key error: rows without a Logical_Switch_Port, on which every later
# update answered 500. Its data lives on tmpfs, with durability switched off: the stack is throwaway.
start_mariadb() {
  local port=$1 data=$STACK_DIR/state/mariadb run=$STACK_DIR/mariadb
  mkdir -p "$data" "$run"
  local -a as=()
  if ((EUID == 0)); then
    # The server runs as mysql (the root file system's user) and dies silently when it cannot write here.
    os_run chown mysql:mysql "$data" "$run"
    as=(--user=mysql)
  fi
  mariadb-install-db "${as[@]}" --datadir="$data" --auth-root-authentication-method=normal --skip-test-db \
    >"$STACK_DIR/logs/mariadb-install.log" 2>&1 || { tail -20 "$STACK_DIR/logs/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
  start mariadb mariadbd --no-defaults "${as[@]}" --datadir="$data" --bind-address=127.0.0.1 --port="$port" \
    --socket="$run/mysqld.sock" --pid-file="$run/mysqld.pid" --skip-name-resolve --skip-log-bin \
    --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --sync-binlog=0 --innodb-buffer-pool-size=128M \
    --max-connections=500 --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
    --loose-innodb-snapshot-isolation=OFF
  wait_for mariadb 60 mariadb --socket="$run/mysqld.sock" -uroot -e 'select 1'
  mariadb --socket="$run/mysqld.sock" -uroot -e 'create database neutron character set utf8mb4; create database octavia character set utf8mb4'
}

start_neutron() { # port auth keystone-port nb-port sb-port db-port
  local port=$1 auth=$2 ksp=$3 nbp=$4 sbp=$5 dbp=$6
  mkdir -p "$STACK_DIR/neutron/lock" "$STACK_DIR/neutron/state"
  local db="mysql+pymysql://root@127.0.0.1:$dbp/neutron?charset=utf8mb4"
  # The schema from the models (as the migrations would leave it, in a fraction of their time).
  "$PY" -W ignore "$REPO/hack/openstack/neutron_schema.py" "$db" >>"$STACK_DIR/logs/neutron-server.log" 2>&1 ||
    { tail -20 "$STACK_DIR/logs/neutron-server.log" >&2; die "creating Neutron's schema failed"; }
  sed "s#@STACK@#$STACK_DIR#g" "$REPO/hack/openstack/api-paste.ini" >"$STACK_DIR/neutron/api-paste.ini"
  # ML2/OVN needs api_workers >= 1: the driver connects to OVN only in a forked worker (with 0, creates hang).
  # One worker: each API worker keeps its own copy of the OVN databases and follows every change, so on these
  # two cores a second one doubled Neutron's CPU for a burst of port creates (docs/performance.md).
  # Quotas are unlimited by default (-1: Neutron counts nothing for an unlimited resource), but kept by the
  # database driver, so that a test can set a project's quota (the e2e test of a refused security group).
  cat >"$STACK_DIR/neutron/neutron.conf" <<CONF
[DEFAULT]
bind_host = 127.0.0.1
bind_port = $port
auth_strategy = $auth
core_plugin = ml2
# trunk: VLAN-aware VMs, whose ports carry nested nodes' pods' ports as subports.
service_plugins = ovn-router,trunk
api_paste_config = $STACK_DIR/neutron/api-paste.ini
state_path = $STACK_DIR/neutron/state
transport_url = fake://
api_workers = ${STACK_NEUTRON_API_WORKERS:-1}
rpc_workers = 0
rpc_state_report_workers = 0
notify_nova_on_port_status_changes = false
notify_nova_on_port_data_changes = false
dhcp_agent_notification = false
allow_overlapping_ips = true
debug = false
use_stderr = true
[database]
connection = $db
max_pool_size = 20
max_overflow = 40
[oslo_concurrency]
lock_path = $STACK_DIR/neutron/lock
[oslo_messaging_notifications]
driver = noop
[ml2]
type_drivers = flat,geneve
tenant_network_types = geneve
mechanism_drivers = ovn
extension_drivers = port_security,tag_ports_during_bulk_creation
overlay_ip_version = 4
[ml2_type_geneve]
vni_ranges = 1:65536
max_header_size = 38
[ml2_type_flat]
flat_networks = *
[securitygroup]
enable_security_group = true
[ovn]
ovn_nb_connection = tcp:127.0.0.1:$nbp
ovn_sb_connection = tcp:127.0.0.1:$sbp
ovn_l3_scheduler = leastloaded
ovn_metadata_enabled = true
neutron_sync_mode = off
enable_distributed_floating_ip = false
[quotas]
quota_driver = neutron.db.quota.driver_nolock.DbQuotaNoLockDriver
quota_port = -1
quota_network = -1
quota_subnet = -1
quota_router = -1
quota_floatingip = -1
quota_security_group = -1
quota_security_group_rule = -1
CONF
  [[ $auth == keystone ]] && keystone_authtoken neutron "$ksp" >>"$STACK_DIR/neutron/neutron.conf"
  if [[ $OPENSTACK != zed ]]; then
    # Raven's policy override, as an operator installs it: the raven-port-binder role binds its project's ports
    # (hack/keystone.sh gives Raven's user that role instead of service).
    cp "$REPO/deploy/openstack/neutron-policy.yaml" "$STACK_DIR/neutron/policy.yaml"
    printf '[oslo_policy]\npolicy_file = %s\n' "$STACK_DIR/neutron/policy.yaml" >>"$STACK_DIR/neutron/neutron.conf"
  fi
  start neutron-server "$PY" "$REPO/hack/openstack/neutron_server.py" --config-file "$STACK_DIR/neutron/neutron.conf"
}

# choose_lb_provider AUTH: sets LB_PROVIDER. The OVN provider's driver library finds the driver agent only at the
# fixed paths /run/octavia/{status,stats,get}.sock (it ignores [driver_agent]), so one stack per machine can run
# it: the one with the root namespace's datapath. Its neutron client authenticates with a fixed token, which only
# a Neutron without Keystone accepts.
choose_lb_provider() {
  LB_PROVIDER=${STACK_LB_PROVIDER:-}
  if [[ -z $LB_PROVIDER ]]; then
    LB_PROVIDER=amphora
    [[ -z $CHASSIS_NS && $1 == noauth ]] && LB_PROVIDER=ovn
  fi
  case $LB_PROVIDER in
    amphora) ;;
    ovn)
      [[ -z $CHASSIS_NS ]] || die "STACK_LB_PROVIDER=ovn needs the root namespace's datapath, which another stack holds (hack/stack.sh down removes what this attempt made)"
      [[ $1 == noauth ]] || die "STACK_LB_PROVIDER=ovn runs without Keystone only (STACK_KEYSTONE=0; hack/stack.sh down removes what this attempt made)"
      ;;
    *) die "STACK_LB_PROVIDER=$LB_PROVIDER: use ovn or amphora" ;;
  esac
}

# The driver agent's sockets, where the OVN provider looks for them.
OCTAVIA_RUN=/run/octavia

start_octavia() { # port auth keystone-port db-port neutron-port nb-port sb-port
  local port=$1 auth=$2 ksp=$3 dbp=$4 np=$5 nbp=$6 sbp=$7 d=$STACK_DIR/octavia
  mkdir -p "$d/lock"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/certs/ca.key" -out "$d/certs/ca.pem" -days 3650 -subj /CN=raven-stack 2>/dev/null
  local db="mysql+pymysql://root@127.0.0.1:$dbp/octavia?charset=utf8mb4"
  "$PY" -W ignore "$REPO/hack/openstack/octavia_schema.py" "$db" >>"$STACK_DIR/logs/octavia.log" 2>&1 ||
    { tail -20 "$STACK_DIR/logs/octavia.log" >&2; die "creating Octavia's schema failed"; }
  cat >"$d/octavia.conf" <<CONF
[DEFAULT]
transport_url = fake://
debug = false
use_stderr = true
[api_settings]
bind_host = 127.0.0.1
bind_port = $port
auth_strategy = $auth
api_base_uri = http://127.0.0.1:$port
$(octavia_provider_conf "$port" "$np" "$nbp" "$sbp")
[database]
connection = $db
[controller_worker]
compute_driver = compute_noop_driver
amphora_driver = amphora_noop_driver
volume_driver = volume_noop_driver
image_driver = image_noop_driver
loadbalancer_topology = SINGLE
amp_image_tag = amphora
amp_flavor_id = 1
amp_boot_network_list = 00000000-0000-0000-0000-000000000001
amp_secgroup_list = 00000000-0000-0000-0000-000000000002
client_ca = $d/certs/ca.pem
[certificates]
cert_manager = local_cert_manager
cert_generator = local_cert_generator
ca_certificate = $d/certs/ca.pem
ca_private_key = $d/certs/ca.key
storage_path = $d/certs/store
[oslo_concurrency]
lock_path = $d/lock
[oslo_messaging]
topic = octavia_prov
[oslo_messaging_notifications]
driver = noop
[task_flow]
jobboard_enabled = false
[health_manager]
bind_ip = 127.0.0.1
bind_port = 0
heartbeat_key = insecure
[quotas]
default_load_balancer_quota = -1
default_listener_quota = -1
default_member_quota = -1
default_pool_quota = -1
default_health_monitor_quota = -1
CONF
  [[ $auth == keystone ]] && keystone_authtoken octavia "$ksp" >>"$d/octavia.conf"
  if [[ $LB_PROVIDER == ovn ]]; then
    # The API's provider waits for the driver agent's sockets: the agent first. Stale sockets of a stack that
    # died would be answered by nobody.
    mkdir -p "$OCTAVIA_RUN" && rm -f "$OCTAVIA_RUN"/{status,stats,get}.sock
    echo "$OCTAVIA_RUN" >"$STACK_DIR/octavia-run"
    start octavia-driver-agent "$PY" "$REPO/hack/openstack/octavia_driver_agent.py" --config-file "$d/octavia.conf"
  fi
  start octavia "$PY" "$REPO/hack/openstack/octavia_allinone.py" --config-file "$d/octavia.conf"
}

# octavia_provider_conf PORT NEUTRON-PORT NB-PORT SB-PORT: the provider part of octavia.conf. The OVN provider
# needs the real network driver (the API checks the VIP subnet in Neutron, the provider creates the VIP port),
# a Neutron client (a fixed token: Neutron runs without Keystone), OVN's databases and the driver agent.
octavia_provider_conf() {
  if [[ $LB_PROVIDER == amphora ]]; then
    printf '%s\n' 'enabled_provider_drivers = amphora:Amphora provider (noop drivers)' 'default_provider_driver = amphora' \
      '[controller_worker]' 'network_driver = network_noop_driver'
    return
  fi
  cat <<CONF
enabled_provider_drivers = ovn:OVN provider
default_provider_driver = ovn
[controller_worker]
network_driver = allowed_address_pairs_driver
[networking]
allow_invisible_resource_usage = true
$(octavia_neutron_conf "$2")
[ovn]
ovn_nb_connection = tcp:127.0.0.1:$3
ovn_sb_connection = tcp:127.0.0.1:$4
[driver_agent]
status_socket_path = $OCTAVIA_RUN/status.sock
stats_socket_path = $OCTAVIA_RUN/stats.sock
get_socket_path = $OCTAVIA_RUN/get.sock
enabled_provider_agents = ovn
CONF
}

# octavia_neutron_conf NEUTRON-PORT: how Octavia and the OVN provider reach Neutron (which runs without Keystone).
# Zed's clients authenticate with a fixed token from [service_auth]; 2025.1's load their keystoneauth plugin from
# [neutron] (whose admin_token plugin's "endpoint" collides with Octavia's own [neutron] endpoint): none, with the
# endpoint given.
octavia_neutron_conf() {
  if [[ $OPENSTACK == zed ]]; then
    printf '%s\n' '[neutron]' "endpoint = http://127.0.0.1:$1" '[service_auth]' 'auth_type = admin_token' \
      "endpoint = http://127.0.0.1:$1" 'token = raven-stack'
    return
  fi
  printf '%s\n' '[neutron]' 'auth_type = none' "endpoint_override = http://127.0.0.1:$1" '[service_auth]' 'auth_type = none'
}

keystone_authtoken() { # user port
  cat <<CONF
[keystone_authtoken]
www_authenticate_uri = http://127.0.0.1:$2
auth_url = http://127.0.0.1:$2
auth_type = password
username = $1
password = secret
project_name = service
user_domain_id = default
project_domain_id = default
CONF
}

# shellcheck source=hack/keystone.sh
. "$REPO/hack/keystone.sh"

write_openstack_config() { # auth neutron octavia keystone-port
  if [[ $1 == keystone ]]; then
    cat >"$STACK_DIR/clouds.yaml" <<Y
clouds:
  raven:
    auth_type: password
    auth:
      auth_url: http://127.0.0.1:$4/v3
      username: raven
      password: secret
      project_name: raven
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
    interface: public
  raven-appcred:
    auth_type: v3applicationcredential
    auth:
      auth_url: http://127.0.0.1:$4/v3
      application_credential_id: $APPCRED_ID
      application_credential_secret: appcred-secret
    region_name: RegionOne
    interface: public
  admin:
    auth_type: password
    auth:
      auth_url: http://127.0.0.1:$4/v3
      username: admin
      password: secret
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
Y
  else
    cat >"$STACK_DIR/clouds.yaml" <<Y
# No Keystone: Neutron and Octavia run with auth_strategy=noauth, so the endpoints are given directly.
clouds:
  raven:
    auth_type: none
    auth:
      project_id: raven-local
    network_endpoint_override: $2/
    load_balancer_endpoint_override: $3/
Y
  fi
}

write_raven_config() {
  cat >"$STACK_DIR/raven.yaml" <<Y
# Raven configuration for the local stack (see docs/operations.md for every field).
clusterID: $CLUSTER_ID
kubeconfig: $STACK_DIR/kubeconfig
openstack:
  cloudsFile: $STACK_DIR/clouds.yaml
  cloud: raven
neutron:
  externalNetwork: public
  externalSubnetCIDR: 172.24.4.0/24
  podSubnetPoolCIDR: 10.244.0.0/16
  podSubnetPrefixLength: 24
  serviceSubnetCIDR: 10.0.0.0/24
  # The outside namespace stands in for the world beyond the cloud: pods with a floating IP answer it.
  podIngressCIDRs: [172.24.4.0/24]
  # ML2/OVN lists no extension alias it does not know, but the tag_ports_during_bulk_creation extension
  # driver is configured here: tags go into port creates.
  tagPortsOnCreate: "true"
# As the shipped config: raven-system's pods are in the nodes' network, and a network there would hold the
# namespace's deletion on Raven's finalizer once Raven is gone.
namespaces:
  exclude: [kube-node-lease, raven-system]
octavia:
  provider: $LB_PROVIDER
$( [[ $OPENSTACK == zed ]] && printf '  # ovn-octavia-provider 3.0.0 (docs/operations.md, "OpenStack versions tested")\n  deleteMembersFirst: true\n')
metricsAddr: $RAVEN_METRICS
healthAddr: $RAVEN_HEALTH
resyncPeriod: 30s
orphanGracePeriod: 10s
Y
}

# terminate NAME...: TERM to each named service's process group (only if the recorded PID is still the process the
# stack started), KILL after 10 s.
terminate() {
  local name f pid pids=()
  for name in "$@"; do
    f=$STACK_DIR/pids/$name.pid
    alive "$f" || continue
    pid=$(cat "$f")
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    pids+=("$pid")
  done
  local deadline=$((SECONDS + 10))
  for pid in "${pids[@]}"; do
    while [[ $(ps -o stat= -p "$pid" 2>/dev/null) == [^Z]* ]] && ((SECONDS < deadline)); do sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  # Children that outlive their group leader (forked neutron workers) still carry its process group id.
  for pid in "${pids[@]}"; do
    pkill -KILL -g "$pid" 2>/dev/null || true
  done
}

down_quiet() {
  [[ -d $STACK_DIR/pids ]] || { rm -rf "$STACK_DIR"; return 0; }
  local f name all=() rest=()
  for f in "$STACK_DIR"/pids/*.pid; do
    [[ -f $f ]] || continue
    name=$(basename "$f" .pid)
    all+=("$name")
    [[ $name == ovsdb-server || $name == ovs-vswitchd || $name == ovsdb-server-2 || $name == ovs-vswitchd-2 ]] || rest+=("$name")
  done
  # The nodes' kubelets, containers and runtimes first; then everything but the Open vSwitch database and switch
  # (ovn-controller would re-create br-int), then the datapath: namespaces, bridges, taps; then the switch and
  # its database.
  stop_nodes
  terminate "${rest[@]}"
  stop_datapath
  terminate "${all[@]}"
  if [[ -f $STACK_DIR/ports ]]; then
    local p left=""
    for p in $(cat "$STACK_DIR/ports"); do
      ss -Hltn "sport = :$p" | grep -q . && left+=" $p"
    done
    [[ -z $left ]] || log "WARNING: ports still listening:$left"
  fi
  [[ -f $STACK_DIR/shm ]] && rm -rf "$(cat "$STACK_DIR/shm")"
  [[ -f $STACK_DIR/octavia-run ]] && rm -rf "$(cat "$STACK_DIR/octavia-run")"
  rm -rf "$STACK_DIR"
}

down() {
  down_quiet
  log "stack stopped"
}

status() {
  if is_up; then
    log "running"; cat "$STACK_DIR/env"
  else
    log "not running"; return 1
  fi
}

case ${1:-} in
  up) up ;;
  build) build ;;
  down) down ;;
  status) status ;;
  stop-service) stop_service "$2" ;;
  start-service) start_service "$2" ;;
  install-raven) install_raven ;;
  uninstall-raven) uninstall_raven ;;
  raven-overlay)
    [[ -n ${2:-} && -f $STACK_DIR/env ]] || die "usage: $0 raven-overlay DIR, with the stack running"
    # shellcheck disable=SC1091
    . "$STACK_DIR/env"
    raven_overlay "$2"
    ;;
  *) echo "usage: $0 up|build|down|status|stop-service NAME|start-service NAME|install-raven|uninstall-raven|raven-overlay DIR" >&2; exit 2 ;;
esac
