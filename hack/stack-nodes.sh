# Sourced by hack/stack.sh: the nodes of the local stack. Each node is a kubelet with a containerd and runc of its
# own (hack/build-node.sh), on this one machine:
#   - its own directory $STACK_DIR/nodes/<node>: containerd's root, state and socket, the kubelet's root dir and pod
#     logs, the CNI bin and conf dirs that raven-node fills, raven-node's socket, links to the node's Open vSwitch
#     and OVN run dirs, and datapath-netns, a bind mount of the network namespace its ovs-vswitchd runs in;
#   - its own cgroup root /raven-<tag>-n<i> in every v1 controller (two kubelets sharing /kubepods kill each
#     other's pods);
#   - its own address, 10.255.<n>.<i>/32 on lo (a kubelet refuses a loopback node IP), where the API server
#     reaches it for logs and exec: n is 255 on the stack that holds the root namespace's datapath, and one of
#     its own (from its tag) on another stack, whose one node's datapath is that stack's network namespace;
#   - one registry on 127.0.0.1 (hack/images serve) that every containerd uses as the mirror of every registry
#     name, holding the images `make images` builds: Raven's, the test server (also as nginx) and the pause image.
# kube-scheduler places pods; the second node is tainted NoSchedule, so that pods go there only when they ask
# for it by name or tolerate the taint. raven-node runs on both as the DaemonSet of deploy/node, through the
# overlay in $STACK_DIR/deploy/node, which changes only what an operator changes for this machine: the image
# tags, the API server's address, and the host paths of the Open vSwitch sockets and CNI dirs.
# A stack without the node side (STACK_CNI=0) has hollow nodes instead (start_hollow_nodes).

NODE_NET=""
REGISTRY_ADDR=""

# node_net: the first three octets of the nodes' addresses (see above).
node_net() {
  if [[ -z $CHASSIS_NS ]]; then
    echo 10.255.255
  else
    echo "10.255.$((16#$(stack_tag | cut -c1-2) % 250 + 1))"
  fi
}

# node_dir NAME: the node's directory.
node_dir() { echo "$STACK_DIR/nodes/$1"; }

# node_images: the images' version and directory, built by `make images` (its binaries are static).
node_images() {
  log "building the images (raven, raven-node, the test server and the pause image; make images)"
  (cd "$REPO" && make -s images OVS_ROOT="${OS_ROOT:-/}" >"$STACK_DIR/logs/images.log" 2>&1) || { tail -20 "$STACK_DIR/logs/images.log" >&2; die "make images failed"; }
  IMAGES_VERSION=$(awk '$1 ~ /\/raven-node:/ {sub(/.*:/, "", $1); print $1; exit}' "$REPO/bin/images/images.txt")
  [[ -n $IMAGES_VERSION ]] || die "bin/images/images.txt names no raven-node image"
  # The registry runs the images tool make images built, a copy of its own: a later make images replaces the built one.
  cp "$REPO/bin/image-bins/images" "$STACK_DIR/bin/images"
}

# node_pki: a CA for the kubelets' client certificates, and the API server's client certificate for the
# kubelets (logs, exec, port-forward), in the group system:masters.
node_pki() {
  local p=$STACK_DIR/pki
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$p/ca.key" -out "$p/ca.crt" -days 30 -subj "/CN=raven-stack-ca" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout "$p/kubelet-client.key" -out "$p/kubelet-client.csr" \
    -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
  openssl x509 -req -in "$p/kubelet-client.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial \
    -out "$p/kubelet-client.crt" -days 30 2>/dev/null
}

# node_tokens: one line per node for the API server's token file; each kubelet is system:node:<name>, which the
# Node authorizer and NodeRestriction confine to its own node and pods.
node_tokens() {
  local name t
  for name in "$@"; do
    t=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
    echo "$t" >"$STACK_DIR/pki/token-$name"
    echo "$t,system:node:$name,node-$name-uid,\"system:nodes\""
  done
}

# start_registry: the mirror of every registry, loaded with the images of $REPO/bin/images.
start_registry() {
  REGISTRY_ADDR=127.0.0.1:$(freeport)
  echo "${REGISTRY_ADDR#*:}" >>"$STACK_DIR/ports"
  start registry "$STACK_DIR/bin/images" serve --addr="$REGISTRY_ADDR" --dir="$REPO/bin/images"
  wait_for registry 60 curl -sf "http://$REGISTRY_ADDR/v2/"
}

# node_cgroups I: the node's cgroup root in every v1 controller; cpuset needs its CPUs and memory nodes set
# before anything can join it.
node_cgroups() {
  local root=/raven-$(stack_tag)-n$1 c
  for c in /sys/fs/cgroup/*/; do
    c=${c%/}
    [[ $(basename "$c") == unified ]] && continue
    mkdir -p "$c$root"
  done
  cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset$root/cpuset.cpus"
  cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset$root/cpuset.mems"
  mkdir -p "/sys/fs/cgroup/unified$root"
  echo "$root"
}

# remove_cgroups: every process left in the stack's cgroup roots is killed, then the cgroups go, deepest first.
remove_cgroups() {
  local tag dirs d
  tag=$(stack_tag)
  for _ in 1 2 3; do
    dirs=$(find /sys/fs/cgroup/*/ -maxdepth 1 -type d -name "raven-$tag-n*" 2>/dev/null)
    [[ -n $dirs ]] || return 0
    # shellcheck disable=SC2086
    for d in $(find $dirs -name cgroup.procs 2>/dev/null); do
      { xargs -r kill -KILL <"$d"; } 2>/dev/null || true
    done
    # shellcheck disable=SC2086
    find $dirs -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

# node_netns_file I DIR: DIR/datapath-netns becomes the node's datapath namespace (for the first node the root
# one, or this stack's when another stack holds the root one; the second node's for the second), a path raven-node can be given whichever node it runs on.
node_netns_file() {
  local f=$2/datapath-netns src=/proc/self/ns/net
  [[ -n $CHASSIS_NS ]] && src=/var/run/netns/$CHASSIS_NS
  (($1 == 2)) && src=/var/run/netns/$NODE2_NS
  (($1 == 3)) && src=/var/run/netns/$VM_NS
  (($1 == 4)) && src=/var/run/netns/$VM2_NS
  touch "$f"
  mount --bind "$src" "$f"
}

# write_containerd_config DIR: containerd 2's configuration for the node in DIR.
write_containerd_config() {
  local d=$1 bins=$2
  mkdir -p "$d/certs.d/_default"
  cat >"$d/certs.d/_default/hosts.toml" <<T
# Every registry name resolves at the stack's own registry, as an air-gapped cluster's mirror.
[host."http://$REGISTRY_ADDR"]
  capabilities = ["pull", "resolve"]
T
  cat >"$d/containerd.toml" <<T
version = 3
root = "$d/containerd"
state = "$d/run/containerd"

[grpc]
  address = "$d/run/containerd.sock"

[ttrpc]
  address = "$d/run/containerd.sock.ttrpc"

[plugins.'io.containerd.cri.v1.images']
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "registry.k8s.io/pause:3.10.1"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "$d/certs.d"

[plugins.'io.containerd.cri.v1.runtime']
  # Processes here cannot lower their oom_score_adj (no CAP_SYS_RESOURCE), which the pause container asks for.
  restrict_oom_score_adj = true
  # Pods' network namespaces under this node's state dir (a shared mount, seen by raven-node's container).
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$d/cni/bin"]
    conf_dir = "$d/cni/net.d"
    use_internal_loopback = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = "$bins/runc"

[plugins.'io.containerd.nri.v1.nri']
  disable = true
T
}

# write_kubelet_config I NAME DIR CGROUP-ROOT PORT HEALTHZ-PORT ADDRESS
write_kubelet_config() {
  local i=$1 name=$2 d=$3 root=$4 port=$5 hport=$6 addr=$7 taints=""
  ((i == 2)) && taints=$'registerWithTaints:\n- {key: raven.io/second-node, effect: NoSchedule}'
  ((i >= 3)) && taints=$'registerWithTaints:\n- {key: raven.io/nested, effect: NoSchedule}'
  cat >"$d/kubelet.yaml" <<T
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine's cgroups are hybrid (v1 controllers), which the kubelet refuses unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: $root
containerRuntimeEndpoint: unix://$d/run/containerd.sock
address: $addr
port: $port
healthzBindAddress: 127.0.0.1
healthzPort: $hport
readOnlyPort: 0
podLogsDir: $d/pod-logs
oomScoreAdj: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $STACK_DIR/pki/ca.crt}
authorization: {mode: Webhook}
# A test machine's disk is often fuller than a node's; pods must not be evicted for it.
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, nodefs.inodesFree: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
maxPods: 250
serializeImagePulls: false
resolvConf: /etc/resolv.conf
$taints
T
  write_kubeconfig "$d/kubelet.kubeconfig" "$API_PORT" "$(cat "$STACK_DIR/pki/token-$name")" "system:node:$name"
}

# start_node I NAME: containerd and the kubelet of node I (3 and 4: the nested nodes, whose addresses are their
# VM ports').
start_node() {
  local i=$1 name=$2 d bins root addr labels=""
  addr=$NODE_NET.$i
  d=$(node_dir "$name")
  bins=$NODE_BINS
  mkdir -p "$d"/{containerd,run,cni/bin,cni/net.d,kubelet,pod-logs,raven}
  ((i == 3)) && addr=$VM_IP labels=--node-labels=raven.io/nested=true
  ((i == 4)) && addr=$VM2_IP labels=--node-labels=raven.io/nested=true
  ip addr add "$addr/32" dev lo 2>/dev/null || true
  echo "$addr/32" >>"$STACK_DIR/lo-addrs"
  root=$(node_cgroups "$i")
  case $i in
    1) ln -sfn "$OVS_RUNDIR" "$d/ovs"; ln -sfn "$OVN_RUNDIR" "$d/ovn" ;;
    2) ln -sfn "$OVS2_RUNDIR" "$d/ovs"; ln -sfn "$OVN2_RUNDIR" "$d/ovn" ;;
    3) ln -sfn "$OVS3_RUNDIR" "$d/ovs" ;; # a VM runs no ovn-controller
    4) ln -sfn "$OVS4_RUNDIR" "$d/ovs" ;;
  esac
  node_netns_file "$i" "$d"
  write_containerd_config "$d" "$bins"
  start "containerd-$i" env PATH="$bins:$PATH" "$bins/containerd" --config="$d/containerd.toml" --log-level=warn
  wait_for "containerd-$i" 30 test -S "$d/run/containerd.sock"
  write_kubelet_config "$i" "$name" "$d" "$root" "$(freeport)" "$(freeport)" "$addr"
  # shellcheck disable=SC2086
  start "kubelet-$i" env PATH="$bins:$PATH" "$bins/kubelet" --config="$d/kubelet.yaml" --kubeconfig="$d/kubelet.kubeconfig" \
    --root-dir="$d/kubelet" --cert-dir="$d/kubelet/pki" --hostname-override="$name" --node-ip="$addr" $labels --v=1
}

# start_nodes: the nodes' shared parts, then each node, the scheduler, and raven-node on every node.
start_nodes() {
  local nodes=$1 kp=$2
  NODE_NET=$(node_net)
  mkdir -p "$STACK_DIR/nodes"
  # Shared, so that the network namespaces containerd mounts under a node's state dir after raven-node's
  # container started appear in it (its hostPath mount is HostToContainer); / is a private mount here.
  mount --bind "$STACK_DIR/nodes" "$STACK_DIR/nodes"
  mount --make-rshared "$STACK_DIR/nodes"
  start_registry
  start_node 1 "$NODE_NAME"
  ((nodes >= 2)) && start_node 2 "$NODE2_NAME"
  [[ $NESTED == 1 ]] && start_node 3 "$VM_NAME" && start_node 4 "$VM2_NAME"
  start_scheduler "$kp"
  wait_for kubelet-1 60 env KUBECONFIG="$STACK_DIR/kubeconfig" kubectl get node "$NODE_NAME"
  ((nodes >= 2)) && wait_for kubelet-2 60 env KUBECONFIG="$STACK_DIR/kubeconfig" kubectl get node "$NODE2_NAME"
  [[ $NESTED == 1 ]] && wait_for kubelet-3 60 env KUBECONFIG="$STACK_DIR/kubeconfig" kubectl get node "$VM_NAME" &&
    wait_for kubelet-4 60 env KUBECONFIG="$STACK_DIR/kubeconfig" kubectl get node "$VM2_NAME"
  install_raven_node "$nodes"
}

# start_scheduler PORT: kube-scheduler, its health on PORT.
start_scheduler() {
  start kube-scheduler "$NODE_BINS/kube-scheduler" --kubeconfig="$STACK_DIR/kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port="$1"
  wait_for kube-scheduler 60 curl -sf -k "https://127.0.0.1:$1/healthz"
}

# start_hollow_nodes PORT: for a stack without the node side (STACK_CNI=0: the control-plane benchmark),
# kube-scheduler and the first node as a Node object that no kubelet runs, with room for the benchmark's pods
# (its cold start holds a thousand). Pods are bound to it and never run: what Raven does for them is all control
# plane. Nothing marks the node unreachable (no node-lifecycle controller on such a stack).
start_hollow_nodes() {
  local kp=$1
  start_scheduler "$kp"
  KUBECONFIG=$STACK_DIR/kubeconfig kubectl apply -f - >>"$STACK_DIR/logs/install.log" <<N
apiVersion: v1
kind: Node
metadata:
  name: $NODE_NAME
  labels: {kubernetes.io/hostname: $NODE_NAME, kubernetes.io/os: linux, raven.io/hollow: "true"}
N
  local room='{"pods": "5000", "cpu": "64", "memory": "512Gi"}'
  KUBECONFIG=$STACK_DIR/kubeconfig kubectl patch node "$NODE_NAME" --subresource=status --type=merge \
    -p "{\"status\": {\"capacity\": $room, \"allocatable\": $room}}" >>"$STACK_DIR/logs/install.log"
}

# raven_node_args chassis|nested: raven-node's args on this machine's nodes, as YAML list items (each node's paths
# under its directory): a chassis node's checks its ovn-controller and plugs into br-int; a nested node's plugs
# into the VM's br-vm and has no ovn-controller.
raven_node_args() {
  local n='$(NODE_NAME)' kind bridge=br-int a
  kind="--ovn-rundir=$STACK_DIR/nodes/$n/ovn"
  [[ $1 == nested ]] && kind=--nested bridge=br-vm
  for a in "--node-name=$n" "--socket=$STACK_DIR/nodes/$n/raven/cni.sock" "--ovs-db=unix:$STACK_DIR/nodes/$n/ovs/db.sock" \
    "--ovs-rundir=$STACK_DIR/nodes/$n/ovs" "$kind" "--datapath-netns=$STACK_DIR/nodes/$n/datapath-netns" "--bridge=$bridge" \
    --ready-timeout=2m --install-cni-plugin=/usr/local/bin/raven-cni "--cni-bin-dir=$STACK_DIR/nodes/$n/cni/bin" \
    "--cni-conf-dir=$STACK_DIR/nodes/$n/cni/net.d" '--metrics-addr=$(HOST_IP):9476'; do
    printf '            - %s\n' "$a"
  done
}

# install_raven_node: deploy/node through the local overlay, then waits until raven-node is Ready on every node
# and the nodes are Ready (raven-node installs the CNI config the kubelet waits for).
install_raven_node() {
  local nodes=$1 o=$STACK_DIR/deploy/node
  mkdir -p "$o"
  cat >"$o/kustomization.yaml" <<K
# The local stack's overlay of deploy/node: what an operator changes for this machine, nothing else.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$o" "$REPO/deploy/node")
$([[ $NESTED == 1 ]] && echo "  - nested.yaml")
images:
  - name: ghcr.io/raven-net/raven-node
    newTag: "$IMAGES_VERSION"
patches:
  - path: daemonset.yaml
K
  [[ $NESTED == 1 ]] && nested_daemonset >"$o/nested.yaml"
  cat >"$o/daemonset.yaml" <<P
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: raven-node
  namespace: raven-system
spec:
  template:
    spec:
      # Not on nested nodes: raven-node-nested serves them.
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions: [{key: raven.io/nested, operator: DoesNotExist}]
      containers:
        - name: raven-node
          args:
$(raven_node_args chassis)
          env:
            # No kube-proxy here: the API server is reached where it listens.
            - {name: KUBERNETES_SERVICE_HOST, value: "127.0.0.1"}
            - {name: KUBERNETES_SERVICE_PORT, value: "$API_PORT"}
          # The base's host paths are the standard ones; this machine keeps them per node.
          volumeMounts:
            - \$patch: replace
            - {name: tmp, mountPath: /tmp}
            - {name: stack-nodes, mountPath: $STACK_DIR/nodes, mountPropagation: HostToContainer}
            - {name: stack-ovs, mountPath: $OVS_RUNDIR}
            - {name: stack-ovn, mountPath: $OVN_RUNDIR, readOnly: true}
            - {name: stack-ovs2, mountPath: $OVS2_RUNDIR}
            - {name: stack-ovn2, mountPath: $OVN2_RUNDIR, readOnly: true}
      volumes:
        - \$patch: replace
        - {name: tmp, emptyDir: {}}
        - {name: stack-nodes, hostPath: {path: $STACK_DIR/nodes, type: Directory}}
        - {name: stack-ovs, hostPath: {path: $OVS_RUNDIR, type: Directory}}
        - {name: stack-ovn, hostPath: {path: $OVN_RUNDIR, type: Directory}}
        - {name: stack-ovs2, hostPath: {path: $OVS2_RUNDIR, type: DirectoryOrCreate}}
        - {name: stack-ovn2, hostPath: {path: $OVN2_RUNDIR, type: DirectoryOrCreate}}
P
  log "installing raven-node (deploy/node, image tag $IMAGES_VERSION) and waiting for it on $nodes node(s)"
  KUBECONFIG=$STACK_DIR/kubeconfig kubectl apply -k "$o" >>"$STACK_DIR/logs/install.log" 2>&1 ||
    { tail -20 "$STACK_DIR/logs/install.log" >&2; die "installing raven-node failed"; }
  local deadline=$((SECONDS + 180)) ready
  until ready=$(KUBECONFIG=$STACK_DIR/kubeconfig kubectl -n raven-system get ds raven-node -o jsonpath='{.status.numberReady}' 2>/dev/null) &&
    [[ ${ready:-0} == "$nodes" ]] && { [[ $NESTED != 1 ]] ||
      [[ $(KUBECONFIG=$STACK_DIR/kubeconfig kubectl -n raven-system get ds raven-node-nested -o jsonpath='{.status.numberReady}' 2>/dev/null) == 2 ]]; }; do
    if ((SECONDS > deadline)); then
      KUBECONFIG=$STACK_DIR/kubeconfig kubectl -n raven-system get pods -o wide >&2 || true
      die "raven-node not Ready on $nodes node(s) after 180 s (logs: kubectl -n raven-system logs ds/raven-node)"
    fi
    sleep 1
  done
  KUBECONFIG=$STACK_DIR/kubeconfig kubectl wait --for=condition=Ready node --all --timeout=60s >/dev/null
}

# nested_daemonset: raven-node for the nested node (hack/stack-vm.sh): --nested, the VM's bridge br-vm, its
# Open vSwitch's socket, and the VM's namespace for the pods' host ends; no ovn-controller to check.
nested_daemonset() {
  cat <<D
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: raven-node-nested
  namespace: raven-system
spec:
  selector:
    matchLabels: {app.kubernetes.io/name: raven-node-nested}
  template:
    metadata:
      labels: {app.kubernetes.io/name: raven-node-nested}
    spec:
      serviceAccountName: raven-node
      priorityClassName: system-node-critical
      hostNetwork: true
      dnsPolicy: ClusterFirstWithHostNet
      nodeSelector: {raven.io/nested: "true"}
      tolerations: [{operator: Exists}]
      terminationGracePeriodSeconds: 10
      containers:
        - name: raven-node
          image: ghcr.io/raven-net/raven-node:$IMAGES_VERSION
          args:
$(raven_node_args nested)
          env:
            - name: NODE_NAME
              valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
            - name: HOST_IP
              valueFrom: {fieldRef: {fieldPath: status.hostIP}}
            - {name: KUBERNETES_SERVICE_HOST, value: "127.0.0.1"}
            - {name: KUBERNETES_SERVICE_PORT, value: "$API_PORT"}
          ports:
            - {name: metrics, containerPort: 9476}
          readinessProbe:
            httpGet: {path: /healthz, port: metrics}
            periodSeconds: 10
          securityContext: {runAsUser: 0, privileged: true, readOnlyRootFilesystem: true}
          volumeMounts:
            - {name: tmp, mountPath: /tmp}
            - {name: stack-nodes, mountPath: $STACK_DIR/nodes, mountPropagation: HostToContainer}
            - {name: stack-ovs3, mountPath: $OVS3_RUNDIR}
            - {name: stack-ovs4, mountPath: $OVS4_RUNDIR}
      volumes:
        - {name: tmp, emptyDir: {}}
        - {name: stack-nodes, hostPath: {path: $STACK_DIR/nodes, type: Directory}}
        - {name: stack-ovs3, hostPath: {path: $OVS3_RUNDIR, type: DirectoryOrCreate}}
        - {name: stack-ovs4, hostPath: {path: $OVS4_RUNDIR, type: DirectoryOrCreate}}
D
}

# stop_nodes: the kubelets first (they would restart what goes), then every container (their processes are in
# the nodes' cgroups), containerd and its shims, the mounts under the nodes' directory (the pods' network
# namespaces and volumes, the kubelets' bind mounts), the cgroups, and the node addresses.
stop_nodes() {
  [[ -d $STACK_DIR/nodes ]] || return 0
  terminate kubelet-1 kubelet-2 kubelet-3 kubelet-4 kube-scheduler
  remove_cgroups
  terminate containerd-1 containerd-2 containerd-3 containerd-4 registry
  pkill -KILL -f "containerd-shim-runc-v2 -namespace k8s.io -address $STACK_DIR/nodes/" 2>/dev/null || true
  local m
  for _ in 1 2 3; do
    while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(findmnt -rn -o TARGET | grep -F "$STACK_DIR/nodes" | sort -r)
  done
  remove_cgroups
  if [[ -f $STACK_DIR/lo-addrs ]]; then
    while read -r m; do ip addr del "$m" dev lo 2>/dev/null || true; done <"$STACK_DIR/lo-addrs"
  fi
  local left
  left=$(findmnt -rn -o TARGET | grep -cF "$STACK_DIR/nodes" || true)
  ((left == 0)) || log "WARNING: $left mounts left under $STACK_DIR/nodes"
  left=$(find /sys/fs/cgroup/*/ -maxdepth 1 -type d -name "raven-$(stack_tag)-n*" 2>/dev/null | wc -l)
  ((left == 0)) || log "WARNING: $left cgroups left (/sys/fs/cgroup/*/raven-$(stack_tag)-n*)"
}

# raven_overlay DIR: writes into DIR the local stack's overlay of the whole of deploy/, the one an operator
# writes for a cluster (docs/operations.md, "Install"). It changes what an operator changes: the image tags,
# raven.yaml (the stack's, read in the cluster: the Secret's clouds.yaml, leader election in raven-system), one
# replica for the one node labelled control-plane (node-1; both nodes' kubelets are in the root namespace, where
# the cloud's services listen), a toleration of the second node's taint, and the API server's address (no
# kube-proxy here); raven-node keeps its overlay's patch.
# RAVEN_INSTALL_CONFIG names another raven.yaml to start from than the stack's (the e2e suite's, with short resync
# and grace periods). The clouds.yaml Secret is not in it: the operator makes that (install_raven does).
raven_overlay() {
  local o=$1 server host port
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  host=${server#https://}; port=${host##*:}; host=${host%:*}
  mkdir -p "$o"
  cp "$STACK_DIR/deploy/node/daemonset.yaml" "$o/node.yaml"
  # The nested node's raven-node (hack/stack-vm.sh) is part of what is installed, and removed, with the rest.
  local nested=""
  if [[ -f $STACK_DIR/deploy/node/nested.yaml ]]; then
    cp "$STACK_DIR/deploy/node/nested.yaml" "$o/nested.yaml"
    nested="  - nested.yaml"
  fi
  sed -e '/^kubeconfig:/d' -e '/^metricsAddr:/d' -e '/^healthAddr:/d' \
    -e 's|^\( *cloudsFile:\).*|\1 /etc/openstack/clouds.yaml|' "${RAVEN_INSTALL_CONFIG:-$RAVEN_CONFIG}" >"$o/raven.yaml"
  grep -q '^leaderElection:' "$o/raven.yaml" ||
    printf 'leaderElection:\n  enabled: true\n  namespace: raven-system\n' >>"$o/raven.yaml"
  cat >"$o/kustomization.yaml" <<K
# The local stack's overlay of deploy/: what an operator changes for this machine, nothing else.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$o" "$REPO/deploy")
$nested
images:
  - {name: ghcr.io/raven-net/raven, newTag: "$STACK_IMAGES_VERSION"}
  - {name: ghcr.io/raven-net/raven-node, newTag: "$STACK_IMAGES_VERSION"}
configMapGenerator:
  - {name: raven-config, namespace: raven-system, behavior: replace, files: [raven.yaml]}
generatorOptions:
  disableNameSuffixHash: true
patches:
  - path: node.yaml
  - path: deployment.yaml
K
  cat >"$o/deployment.yaml" <<P
apiVersion: apps/v1
kind: Deployment
metadata:
  name: raven
  namespace: raven-system
spec:
  replicas: 1
  template:
    spec:
      containers:
        - name: raven
          env:
            - {name: KUBERNETES_SERVICE_HOST, value: "$host"}
            - {name: KUBERNETES_SERVICE_PORT, value: "$port"}
      # The base's toleration, and the stack's taint of its second node, where a second replica may run once
      # that node is labelled control-plane too (the failover test).
      tolerations:
        - {key: node-role.kubernetes.io/control-plane, effect: NoSchedule}
        - {key: raven.io/second-node, effect: NoSchedule}
P
}

# install_raven: Raven itself from deploy/, as an operator installs it (docs/operations.md, "Install"): the
# clouds.yaml Secret from the stack's clouds.yaml, then the overlay raven_overlay writes in $STACK_DIR/deploy/raven.
# Applied again with a changed raven.yaml, it rolls Raven's pods, as docs/operations.md tells an operator to.
# Waits until the Deployment is Available.
install_raven() {
  [[ -f $STACK_DIR/env ]] || die "the stack is not running (hack/stack.sh up)"
  # shellcheck disable=SC1091
  . "$STACK_DIR/env"
  [[ ${STACK_NODE_RUNTIME:-} == kubelet ]] || die "Raven runs in the cluster only on real nodes (STACK_CNI=1)"
  local o=$STACK_DIR/deploy/raven before after
  raven_overlay "$o"
  log "installing Raven from deploy/ (overlay $o, image tag $STACK_IMAGES_VERSION) on $STACK_NODE_NAME, labelled control-plane"
  kubectl label node "$STACK_NODE_NAME" node-role.kubernetes.io/control-plane= --overwrite >/dev/null
  kubectl get namespace raven-system >/dev/null 2>&1 || kubectl create namespace raven-system >/dev/null
  kubectl -n raven-system create secret generic raven-clouds --from-file=clouds.yaml="$OS_CLIENT_CONFIG_FILE" \
    --dry-run=client -o yaml | kubectl apply -f - >>"$STACK_DIR/logs/install.log"
  before=$(kubectl -n raven-system get configmap raven-config -o jsonpath='{.data.raven\.yaml}' 2>/dev/null || true)
  kubectl apply -k "$o" >>"$STACK_DIR/logs/install.log" 2>&1 || { tail -20 "$STACK_DIR/logs/install.log" >&2; die "installing Raven failed"; }
  after=$(kubectl -n raven-system get configmap raven-config -o jsonpath='{.data.raven\.yaml}')
  if [[ -n $before && $before != "$after" && $(kubectl -n raven-system get deployment raven -o jsonpath='{.spec.replicas}') != 0 ]]; then
    log "raven.yaml changed: rolling Raven's pods (kubectl -n raven-system rollout restart deployment/raven)"
    kubectl -n raven-system rollout restart deployment/raven >/dev/null
  fi
  kubectl -n raven-system rollout status deployment/raven --timeout=3m >&2 ||
    die "Raven's Deployment did not become Available (kubectl -n raven-system describe deployment raven)"
}

# uninstall_raven: what install_raven made, raven-node's objects apart (deploy/node is the stack's); waits until
# Raven's pods are gone, so that no two Ravens write.
uninstall_raven() {
  [[ -f $STACK_DIR/env ]] || return 0
  # shellcheck disable=SC1091
  . "$STACK_DIR/env"
  local x
  for x in deployment/raven configmap/raven-config secret/raven-clouds serviceaccount/raven \
    role/raven-leader-election rolebinding/raven-leader-election; do
    kubectl -n raven-system delete "$x" --ignore-not-found --wait=true --timeout=60s >/dev/null
  done
  kubectl delete clusterrolebinding/raven clusterrole/raven --ignore-not-found >/dev/null
  kubectl label node "$STACK_NODE_NAME" node-role.kubernetes.io/control-plane- >/dev/null 2>&1 || true
  kubectl -n raven-system wait --for=delete pod -l app.kubernetes.io/name=raven --timeout=60s >/dev/null 2>&1 || true
}
