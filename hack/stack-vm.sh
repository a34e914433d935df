# Sourced by hack/stack.sh: the nested node of the local stack (STACK_NESTED=1), a Kubernetes node that stands
# for a Nova VM, as ../docs/operations.md ("Nested nodes") describes a real one:
#   - its port on the worker network raven-workers ($VM_CIDR), bound to the chassis node-1, is the parent of a
#     trunk (what Nova makes for a VLAN-aware VM);
#   - the VM is the network namespace $VM_NS, whose NIC is a veth whose other end is on node-1's br-int with the
#     VM port's iface-id (ovn-controller binds the VM port there, and with it the trunk's subports);
#   - in the VM, an Open vSwitch of its own (ovsdb-server, ovs-vswitchd in $VM_NS, userspace) with one bridge,
#     br-vm, whose uplink is the NIC: pods are access ports of their subport's VLAN on it;
#   - a containerd and a kubelet of its own (in the root namespace, as node-2's), registered as $VM_NAME with the
#     VM port's address as InternalIP, labelled raven.io/nested=true and tainted raven.io/nested:NoSchedule;
#   - raven-node runs there as the DaemonSet raven-node-nested (--nested, --bridge=br-vm), which the stack's
#     overlay of deploy/node adds; the DaemonSet raven-node keeps off nested nodes.

VM_NAME=${STACK_VM_NAME:-vm-1}
VM_NS=raven-vm1
VM_CIDR=192.168.200.0/24 VM_IP=192.168.200.11
OVS3_RUNDIR=$STACK_DIR/ovs3
OVS3_DB=unix:$OVS3_RUNDIR/db.sock
vsctl3() { ovs-vsctl --db="$OVS3_DB" --timeout=20 "$@"; }

# vm_neutron URL CURL-ARGS...: the worker network and subnet, the VM's port bound to node-1 and its trunk; their
# IDs go into $STACK_DIR/vm.env.
vm_neutron() {
  local url=$1 net subnet port mac trunk
  shift
  local -a c=(curl -sf "$@" -H 'Content-Type: application/json')
  net=$("${c[@]}" -X POST "$url/v2.0/networks" -d '{"network":{"name":"raven-workers"}}' | jq -r .network.id)
  subnet=$("${c[@]}" -X POST "$url/v2.0/subnets" \
    -d "{\"subnet\":{\"name\":\"raven-workers\",\"network_id\":\"$net\",\"ip_version\":4,\"cidr\":\"$VM_CIDR\",\"enable_dhcp\":false}}" | jq -r .subnet.id)
  port=$("${c[@]}" -X POST "$url/v2.0/ports" -d "{\"port\":{\"name\":\"$VM_NAME\",\"network_id\":\"$net\",\"device_owner\":\"compute:nova\",
    \"fixed_ips\":[{\"subnet_id\":\"$subnet\",\"ip_address\":\"$VM_IP\"}],\"binding:host_id\":\"$NODE_NAME\"}}")
  mac=$(jq -r .port.mac_address <<<"$port")
  port=$(jq -r .port.id <<<"$port")
  trunk=$("${c[@]}" -X POST "$url/v2.0/trunks" -d "{\"trunk\":{\"name\":\"$VM_NAME\",\"port_id\":\"$port\"}}" | jq -r .trunk.id)
  [[ -n $trunk && $trunk != null ]] || die "creating the trunk of $VM_NAME failed (is the trunk service plugin on?)"
  printf 'export STACK_VM_NAME=%s\nexport STACK_VM_NETNS=%s\nexport STACK_VM_SUBNET=%s\nexport STACK_VM_PORT=%s\nexport STACK_VM_MAC=%s\nexport STACK_VM_TRUNK=%s\nexport STACK_VM_IP=%s\nexport STACK_OVS3_DB=%s\n' \
    "$VM_NAME" "$VM_NS" "$subnet" "$port" "$mac" "$trunk" "$VM_IP" "$OVS3_DB" >"$STACK_DIR/vm.env"
}

# start_vm: the VM's namespace, its Open vSwitch with br-vm, and its NIC, the other end of which is on node-1's
# br-int as the VM's port.
start_vm() {
  # shellcheck disable=SC1091
  . "$STACK_DIR/vm.env"
  mkdir -p "$OVS3_RUNDIR"
  ip netns add "$VM_NS"
  echo "$VM_NS" >>"$STACK_DIR/netns"
  ip -n "$VM_NS" link set lo up
  ovsdb-tool create "$OVS_DBDIR/conf3.db" /usr/share/openvswitch/vswitch.ovsschema
  start ovsdb-server-3 ovsdb-server "$OVS_DBDIR/conf3.db" --remote="p$OVS3_DB" --pidfile="$OVS3_RUNDIR/ovsdb-server.pid" \
    --unixctl="$OVS3_RUNDIR/ovsdb-server.ctl" --log-file="$STACK_DIR/logs/ovsdb-server-3.log" -vconsole:off -vsyslog:off --no-chdir
  wait_for ovsdb-server-3 20 vsctl3 --no-wait init
  vsctl3 --no-wait -- add-br br-vm -- set Bridge br-vm datapath_type=netdev
  start ovs-vswitchd-3 ip netns exec "$VM_NS" env OVS_RUNDIR="$OVS3_RUNDIR" ovs-vswitchd "$OVS3_DB" --monitor \
    --pidfile="$OVS3_RUNDIR/ovs-vswitchd.pid" --log-file="$STACK_DIR/logs/ovs-vswitchd-3.log" -vconsole:off -vsyslog:off --no-chdir
  ip link add raven-vm1-nic type veth peer name eth0 netns "$VM_NS"
  ip -n "$VM_NS" link set eth0 address "$STACK_VM_MAC" up
  ip link set raven-vm1-nic up
  wait_for ovs-vswitchd-3 30 ip -n "$VM_NS" link show br-vm
  vsctl3 add-port br-vm eth0
  ip -n "$VM_NS" link set br-vm up
  vsctl add-port br-int raven-vm1-nic -- set Interface raven-vm1-nic external_ids:iface-id="$STACK_VM_PORT" \
    external_ids:attached-mac="$STACK_VM_MAC" external_ids:iface-status=active
  wait_for ovn-controller 30 vm_port_bound
}

# vm_port_bound: ovn-controller has bound the VM's port to this chassis.
vm_port_bound() {
  [[ $(ovs-vsctl --db="$OVS_DB" --timeout=5 get Interface raven-vm1-nic external_ids:ovn-installed 2>/dev/null) == '"true"' ]]
}

# stop_vm: the VM's switch goes with its namespace, once ovs-vswitchd is gone; the NIC's other end goes with it.
stop_vm() {
  [[ -f $STACK_DIR/pids/ovsdb-server-3.pid ]] || return 0
  if alive "$STACK_DIR/pids/ovsdb-server-3.pid"; then
    vsctl3 --if-exists del-br br-vm >/dev/null 2>&1 || true
  fi
  if alive "$STACK_DIR/pids/ovs-vswitchd-3.pid"; then
    OVS_RUNDIR=$OVS3_RUNDIR ovs-appctl --timeout=10 -t ovs-vswitchd exit --cleanup >/dev/null 2>&1 || true
    for _ in $(seq 50); do alive "$STACK_DIR/pids/ovs-vswitchd-3.pid" || break; sleep 0.1; done
  fi
  terminate ovs-vswitchd-3 ovsdb-server-3
  ip link del raven-vm1-nic 2>/dev/null || true
  ip netns del "$VM_NS" 2>/dev/null || true
}
