#!/usr/bin/env bash
# The local stack Raven is developed and tested against, all on 127.0.0.1:
#   etcd + kube-apiserver + kube-controller-manager (built from the Go module proxy, cached),
#   Neutron (ML2/vxlan, router, security groups, tags) and Octavia (amphora provider, noop drivers) from Debian,
#   Keystone when STACK_KEYSTONE=1, and the node stand-in that plays the kubelet's part.
#
# Usage: hack/stack.sh up | down | status | stop-service NAME | start-service NAME
# State lives in $STACK_DIR (default .stack/ in the repository); .stack/env is shell-sourceable.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STACK_DIR=${STACK_DIR:-$REPO/.stack}
K8S_VERSION=${K8S_VERSION:-v1.37.2}
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/raven
PY=/usr/bin/python3
CLUSTER_ID=${RAVEN_CLUSTER_ID:-local}
NODE_NAME=${STACK_NODE_NAME:-standin-node}
export GOTOOLCHAIN=local

log() { printf '[stack %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# alive PIDFILE: the process runs (a zombie left by a parent that does not reap does not count).
alive() {
  [[ -f $1 ]] || return 1
  local pid state
  pid=$(cat "$1")
  kill -0 "$pid" 2>/dev/null || return 1
  state=$(ps -o stat= -p "$pid" 2>/dev/null) || return 1
  [[ $state != Z* ]]
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
}

# stop_service NAME: stops one service of the running stack (for fault-injection tests).
stop_service() {
  local f=$STACK_DIR/pids/$1.pid pid
  [[ -f $f ]] || die "no service $1"
  pid=$(cat "$f")
  kill -TERM -- "-$pid" 2>/dev/null || true
  for _ in $(seq 100); do alive "$f" || break; sleep 0.1; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  pkill -KILL -g "$pid" 2>/dev/null || true
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

cached_schema() { # name script
  local name=$1 script=$2 ver
  ver=$(dpkg-query -W -f='${Version}' "python3-$name" | tr -c 'A-Za-z0-9.\n' '_')
  local f=$CACHE_ROOT/schema/$name-$ver.sqlite
  if [[ ! -f $f ]]; then
    mkdir -p "$CACHE_ROOT/schema"
    log "creating the $name database schema (cached for next time)"
    rm -f "$f.tmp"
    "$PY" -W ignore "$REPO/hack/openstack/$script" "sqlite:///$f.tmp"
    mv "$f.tmp" "$f"
  fi
  echo "$f"
}

up() {
  if is_up; then
    log "already running (. $STACK_DIR/env)"
    return 0
  fi
  [[ -d $STACK_DIR ]] && down_quiet
  local t0=$SECONDS
  local bins
  bins=$("$REPO/hack/build-k8s.sh")
  "$REPO/hack/install-openstack.sh"

  rm -rf "$STACK_DIR"
  mkdir -p "$STACK_DIR"/{pids,logs,pki,bin,neutron,octavia/certs/store,kcm-certs}
  local shm=/dev/shm/raven-stack-$$-$RANDOM
  mkdir -p "$shm" && echo "$shm" >"$STACK_DIR/shm"
  ln -s "$shm" "$STACK_DIR/state"

  local EP PP AP KP NP OP KSP
  EP=$(freeport); PP=$(freeport); AP=$(freeport); KP=$(freeport); NP=$(freeport); OP=$(freeport); KSP=$(freeport)
  RAVEN_METRICS=127.0.0.1:$(freeport); RAVEN_HEALTH=127.0.0.1:$(freeport)
  local ports="$EP $PP $AP $KP $NP $OP"
  [[ ${STACK_KEYSTONE:-0} == 1 ]] && ports+=" $KSP"
  echo "$ports" >"$STACK_DIR/ports"

  log "starting etcd, Neutron and Octavia"
  start etcd "$bins/etcd" --name=raven --data-dir="$STACK_DIR/state/etcd" \
    --listen-client-urls="http://127.0.0.1:$EP" --advertise-client-urls="http://127.0.0.1:$EP" \
    --listen-peer-urls="http://127.0.0.1:$PP" --initial-advertise-peer-urls="http://127.0.0.1:$PP" \
    --initial-cluster="raven=http://127.0.0.1:$PP" --unsafe-no-fsync --log-level=warn --listen-metrics-urls=""

  local auth=noauth
  [[ ${STACK_KEYSTONE:-0} == 1 ]] && auth=keystone
  [[ $auth == keystone ]] && start_keystone "$KSP"
  start_neutron "$NP" "$auth" "$KSP"
  start_octavia "$OP" "$auth" "$KSP"

  wait_for etcd 30 curl -sf "http://127.0.0.1:$EP/health"
  log "starting kube-apiserver"
  openssl genrsa -out "$STACK_DIR/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$STACK_DIR/pki/sa.key" -pubout -out "$STACK_DIR/pki/sa.pub" 2>/dev/null
  local token ctoken
  token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  ctoken=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  {
    echo "$token,admin,admin-uid,\"system:masters\""
    echo "$ctoken,raven-unprivileged,raven-unprivileged-uid"
  } >"$STACK_DIR/pki/tokens.csv"
  start kube-apiserver "$bins/kube-apiserver" --etcd-servers="http://127.0.0.1:$EP" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$AP" \
    --cert-dir="$STACK_DIR/pki" --token-auth-file="$STACK_DIR/pki/tokens.csv" --authorization-mode=RBAC \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$STACK_DIR/pki/sa.pub" --service-account-signing-key-file="$STACK_DIR/pki/sa.key" \
    --service-cluster-ip-range=10.0.0.0/25 --endpoint-reconciler-type=none \
    --disable-admission-plugins=ServiceAccount
  wait_for kube-apiserver 60 curl -sf -k -H "Authorization: Bearer $token" "https://127.0.0.1:$AP/readyz"
  write_kubeconfig "$STACK_DIR/kubeconfig" "$AP" "$token" admin
  write_kubeconfig "$STACK_DIR/kubeconfig-unprivileged" "$AP" "$ctoken" raven-unprivileged

  log "starting kube-controller-manager"
  start kube-controller-manager "$bins/kube-controller-manager" --kubeconfig="$STACK_DIR/kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$KP" --cert-dir="$STACK_DIR/kcm-certs" --leader-elect=false \
    --controllers=deployment-controller,replicaset-controller,endpoints-controller,endpointslice-controller,namespace-controller,garbage-collector-controller \
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
  log "creating the operator's external network 'public' (172.24.4.0/24)"
  local net
  net=$(curl -sf "${hdr[@]}" -H 'Content-Type: application/json' -X POST "$NEUTRON_URL/v2.0/networks" \
    -d '{"network":{"name":"public","router:external":true,"provider:network_type":"flat","provider:physical_network":"public","shared":false}}' |
    jq -r .network.id)
  curl -sf "${hdr[@]}" -H 'Content-Type: application/json' -X POST "$NEUTRON_URL/v2.0/subnets" \
    -d "{\"subnet\":{\"name\":\"public-subnet\",\"network_id\":\"$net\",\"ip_version\":4,\"cidr\":\"172.24.4.0/24\",\"gateway_ip\":\"172.24.4.1\",\"enable_dhcp\":false}}" >/dev/null

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
ENV
  if [[ $auth == keystone ]]; then
    echo "export KEYSTONE_URL=http://127.0.0.1:$KSP/v3" >>"$STACK_DIR/env"
  fi

  log "building and starting the node stand-in (plays the kubelet's part for node $NODE_NAME)"
  (cd "$REPO" && go build -o "$STACK_DIR/bin/node-standin" ./hack/node-standin)
  start node-standin "$STACK_DIR/bin/node-standin" --kubeconfig="$STACK_DIR/kubeconfig" --node-name="$NODE_NAME"
  wait_for node-standin 30 env KUBECONFIG="$STACK_DIR/kubeconfig" kubectl get node "$NODE_NAME"
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

start_neutron() { # port auth keystone-port
  local port=$1 auth=$2 ksp=$3
  mkdir -p "$STACK_DIR/neutron/lock" "$STACK_DIR/neutron/state"
  cp "$(cached_schema neutron neutron_schema.py)" "$STACK_DIR/state/neutron.sqlite"
  sed "s#@STACK@#$STACK_DIR#g" "$REPO/hack/openstack/api-paste.ini" >"$STACK_DIR/neutron/api-paste.ini"
  cat >"$STACK_DIR/neutron/neutron.conf" <<CONF
[DEFAULT]
bind_host = 127.0.0.1
bind_port = $port
auth_strategy = $auth
core_plugin = ml2
service_plugins = router
api_paste_config = $STACK_DIR/neutron/api-paste.ini
state_path = $STACK_DIR/neutron/state
transport_url = fake://
api_workers = 0
rpc_workers = 0
rpc_state_report_workers = 0
notify_nova_on_port_status_changes = false
notify_nova_on_port_data_changes = false
dhcp_agent_notification = false
allow_overlapping_ips = true
debug = false
use_stderr = true
[database]
connection = sqlite:///$STACK_DIR/state/neutron.sqlite?timeout=30
[oslo_concurrency]
lock_path = $STACK_DIR/neutron/lock
[oslo_messaging_notifications]
driver = noop
[ml2]
type_drivers = flat,vlan,vxlan,geneve,local
tenant_network_types = vxlan
mechanism_drivers =
extension_drivers = port_security,tag_ports_during_bulk_creation
[ml2_type_vxlan]
vni_ranges = 1:10000
[ml2_type_flat]
flat_networks = *
[ml2_type_vlan]
network_vlan_ranges = physnet1:100:200
[securitygroup]
enable_security_group = true
[quotas]
quota_port = -1
quota_network = -1
quota_subnet = -1
quota_router = -1
quota_floatingip = -1
quota_security_group = -1
quota_security_group_rule = -1
CONF
  [[ $auth == keystone ]] && keystone_authtoken neutron "$ksp" >>"$STACK_DIR/neutron/neutron.conf"
  start neutron-server "$PY" -c 'import sys; from neutron.cmd.eventlet.server import main; sys.argv[0]="neutron-server"; sys.exit(main())' \
    --config-file "$STACK_DIR/neutron/neutron.conf"
}

start_octavia() { # port auth keystone-port
  local port=$1 auth=$2 ksp=$3 d=$STACK_DIR/octavia
  mkdir -p "$d/lock"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/certs/ca.key" -out "$d/certs/ca.pem" -days 3650 -subj /CN=raven-stack 2>/dev/null
  cp "$(cached_schema octavia octavia_schema.py)" "$STACK_DIR/state/octavia.sqlite"
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
enabled_provider_drivers = amphora:Amphora provider (noop drivers)
default_provider_driver = amphora
[database]
connection = sqlite:///$STACK_DIR/state/octavia.sqlite?timeout=30
[controller_worker]
network_driver = network_noop_driver
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
  start octavia "$PY" "$REPO/hack/openstack/octavia_allinone.py" --config-file "$d/octavia.conf"
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
metricsAddr: $RAVEN_METRICS
healthAddr: $RAVEN_HEALTH
resyncPeriod: 30s
orphanGracePeriod: 10s
Y
}

down_quiet() {
  local f pid pids=()
  [[ -d $STACK_DIR/pids ]] || { rm -rf "$STACK_DIR"; return 0; }
  for f in "$STACK_DIR"/pids/*.pid; do
    [[ -f $f ]] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
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
  if [[ -f $STACK_DIR/ports ]]; then
    local p left=""
    for p in $(cat "$STACK_DIR/ports"); do
      ss -Hltn "sport = :$p" | grep -q . && left+=" $p"
    done
    [[ -z $left ]] || log "WARNING: ports still listening:$left"
  fi
  [[ -f $STACK_DIR/shm ]] && rm -rf "$(cat "$STACK_DIR/shm")"
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
  down) down ;;
  status) status ;;
  stop-service) stop_service "$2" ;;
  start-service) start_service "$2" ;;
  *) echo "usage: $0 up|down|status|stop-service NAME|start-service NAME" >&2; exit 2 ;;
esac
