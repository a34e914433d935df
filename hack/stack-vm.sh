# Sourced by hack/stack.sh: the nested nodes of the local stack (STACK_NESTED=1), Kubernetes nodes that stand
# for Nova VMs, as ../docs/operations.md ("Nested nodes") describes a real one. The first, $VM_NAME, is described
# here; the second, $VM2_NAME, is the same on node-2 (its NIC's other end on node-2's br-int, in node-2's
# namespace; its namespace $VM2_NS, its Open vSwitch's files under ovs4, its address $VM2_IP):
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
# The second VM, on node-2: its pods' traffic to the first VM's crosses the tunnel between the chassis.
VM2_NAME=vm-2
VM2_NS=raven-vm2
VM2_IP=192.168.200.12
OVS4_RUNDIR=$STACK_DIR/ovs4
OVS4_DB=unix:$OVS4_RUNDIR/db.sock
vsctl3() { ovs-vsctl --db="$OVS3_DB" --timeout=20 "$@"; }

# vm J NAME: the value of NAME (name, ns, ip, host, rundir, db, index) for VM J (1: on node-1, 2: on node-2).
vm() {
  case $1:$2 in
    1:name) echo "$VM_NAME" ;; 2:name) echo "$VM2_NAME" ;;
    1:ns) echo "$VM_NS" ;; 2:ns) echo "$VM2_NS" ;;
    1:ip) echo "$VM_IP" ;; 2:ip) echo "$VM2_IP" ;;
    1:host) echo "$NODE_NAME" ;; 2:host) echo "$NODE2_NAME" ;;
    1:rundir) echo "$OVS3_RUNDIR" ;; 2:rundir) echo "$OVS4_RUNDIR" ;;
    1:db) echo "$OVS3_DB" ;; 2:db) echo "$OVS4_DB" ;;
    1:index) echo 3 ;; 2:index) echo 4 ;;
  esac
}

# hypervisor_vsctl J ARGS...: ovs-vsctl on the Open vSwitch of VM J's chassis (node-1's or node-2's).
hypervisor_vsctl() {
  local j=$1
  shift
  if ((j == 1)); then vsctl "$@"; else vsctl2 "$@"; fi
}

# vm_neutron URL CURL-ARGS...: the worker network and subnet, and for each VM its port bound to its chassis and
# its trunk; their IDs go into $STACK_DIR/vm.env (STACK_VM_* for the first VM, STACK_VM2_* for the second).
vm_neutron() {
  local url=$1 net subnet port mac trunk j v
  shift
  local -a c=(curl -sf "$@" -H 'Content-Type: application/json')
  net=$("${c[@]}" -X POST "$url/v2.0/networks" -d '{"network":{"name":"raven-workers"}}' | jq -r .network.id)
  subnet=$("${c[@]}" -X POST "$url/v2.0/subnets" \
    -d "{\"subnet\":{\"name\":\"raven-workers\",\"network_id\":\"$net\",\"ip_version\":4,\"cidr\":\"$VM_CIDR\",\"enable_dhcp\":false}}" | jq -r .subnet.id)
  : >"$STACK_DIR/vm.env"
  for j in 1 2; do
    port=$("${c[@]}" -X POST "$url/v2.0/ports" -d "{\"port\":{\"name\":\"$(vm $j name)\",\"network_id\":\"$net\",\"device_owner\":\"compute:nova\",
      \"fixed_ips\":[{\"subnet_id\":\"$subnet\",\"ip_address\":\"$(vm $j ip)\"}],\"binding:host_id\":\"$(vm $j host)\"}}")
    mac=$(jq -r .port.mac_address <<<"$port")
    port=$(jq -r .port.id <<<"$port")
    trunk=$("${c[@]}" -X POST "$url/v2.0/trunks" -d "{\"trunk\":{\"name\":\"$(vm $j name)\",\"port_id\":\"$port\"}}" | jq -r .trunk.id)
    [[ -n $trunk && $trunk != null ]] || die "creating the trunk of $(vm $j name) failed (is the trunk service plugin on?)"
    v=STACK_VM
    ((j == 2)) && v=STACK_VM2
    printf 'export %s_NAME=%s\nexport %s_NETNS=%s\nexport %s_PORT=%s\nexport %s_MAC=%s\nexport %s_TRUNK=%s\nexport %s_IP=%s\nexport STACK_OVS%s_DB=%s\n' \
      "$v" "$(vm $j name)" "$v" "$(vm $j ns)" "$v" "$port" "$v" "$mac" "$v" "$trunk" "$v" "$(vm $j ip)" "$(vm $j index)" "$(vm $j db)" >>"$STACK_DIR/vm.env"
  done
  echo "export STACK_VM_SUBNET=$subnet" >>"$STACK_DIR/vm.env"
}

# start_vm J: VM J's namespace, its Open vSwitch with br-vm, and its NIC, the other end of which is on its
# chassis' br-int as the VM's port (node-1's in the root namespace, node-2's in its namespace).
start_vm() {
  local j=$1 i ns rundir db nic port mac
  # shellcheck disable=SC1091
  . "$STACK_DIR/vm.env"
  i=$(vm "$j" index) ns=$(vm "$j" ns) rundir=$(vm "$j" rundir) db=$(vm "$j" db) nic=raven-vm$j-nic
  port=$STACK_VM_PORT mac=$STACK_VM_MAC
  ((j == 2)) && port=$STACK_VM2_PORT mac=$STACK_VM2_MAC
  mkdir -p "$rundir"
  ip netns add "$ns"
  echo "$ns" >>"$STACK_DIR/netns"
  ip -n "$ns" link set lo up
  ovsdb-tool create "$OVS_DBDIR/conf$i.db" /usr/share/openvswitch/vswitch.ovsschema
  start "ovsdb-server-$i" ovsdb-server "$OVS_DBDIR/conf$i.db" --remote="p$db" --pidfile="$rundir/ovsdb-server.pid" \
    --unixctl="$rundir/ovsdb-server.ctl" --log-file="$STACK_DIR/logs/ovsdb-server-$i.log" -vconsole:off -vsyslog:off --no-chdir
  wait_for "ovsdb-server-$i" 20 ovs-vsctl --db="$db" --timeout=20 --no-wait init
  ovs-vsctl --db="$db" --timeout=20 --no-wait -- add-br br-vm -- set Bridge br-vm datapath_type=netdev
  start "ovs-vswitchd-$i" ip netns exec "$ns" env OVS_RUNDIR="$rundir" ovs-vswitchd "$db" --monitor \
    --pidfile="$rundir/ovs-vswitchd.pid" --log-file="$STACK_DIR/logs/ovs-vswitchd-$i.log" -vconsole:off -vsyslog:off --no-chdir
  if ((j == 1)); then
    ip link add "$nic" type veth peer name eth0 netns "$ns"
    ip link set "$nic" up
  else
    ip -n "$NODE2_NS" link add "$nic" type veth peer name eth0 netns "$ns"
    ip -n "$NODE2_NS" link set "$nic" up
  fi
  ip -n "$ns" link set eth0 address "$mac" up
  wait_for "ovs-vswitchd-$i" 30 ip -n "$ns" link show br-vm
  ovs-vsctl --db="$db" --timeout=20 add-port br-vm eth0
  ip -n "$ns" link set br-vm up
  hypervisor_vsctl "$j" add-port br-int "$nic" -- set Interface "$nic" external_ids:iface-id="$port" \
    external_ids:attached-mac="$mac" external_ids:iface-status=active
  local controller=ovn-controller
  ((j == 2)) && controller=ovn-controller-2
  wait_for "$controller" 30 vm_port_bound "$j"
}

# vm_port_bound J: the chassis' ovn-controller has bound VM J's port.
vm_port_bound() {
  [[ $(hypervisor_vsctl "$1" --timeout=5 get Interface "raven-vm$1-nic" external_ids:ovn-installed 2>/dev/null) == '"true"' ]]
}

# stop_vm: each VM's switch goes with its namespace, once its ovs-vswitchd is gone; the NIC's other end goes with it.
stop_vm() {
  local j i rundir
  for j in 1 2; do
    i=$(vm "$j" index) rundir=$(vm "$j" rundir)
    [[ -f $STACK_DIR/pids/ovsdb-server-$i.pid ]] || continue
    if alive "$STACK_DIR/pids/ovsdb-server-$i.pid"; then
      ovs-vsctl --db="$(vm "$j" db)" --timeout=20 --if-exists del-br br-vm >/dev/null 2>&1 || true
    fi
    if alive "$STACK_DIR/pids/ovs-vswitchd-$i.pid"; then
      OVS_RUNDIR=$rundir ovs-appctl --timeout=10 -t ovs-vswitchd exit --cleanup >/dev/null 2>&1 || true
      for _ in $(seq 50); do alive "$STACK_DIR/pids/ovs-vswitchd-$i.pid" || break; sleep 0.1; done
    fi
    terminate "ovs-vswitchd-$i" "ovsdb-server-$i"
    ip link del "raven-vm$j-nic" 2>/dev/null || true
    ip -n "$NODE2_NS" link del "raven-vm$j-nic" 2>/dev/null || true
    ip netns del "$(vm "$j" ns)" 2>/dev/null || true
  done
}
