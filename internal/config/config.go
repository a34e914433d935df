package config

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Options is Raven's whole configuration. The YAML file uses the JSON names below.
type Options struct {
	// ClusterID is written into the tags of every OpenStack object Raven creates. Two clusters that
	// share a Neutron must use different IDs. Empty: the UID of the cluster's kube-system namespace, which
	// no two clusters share (a cluster built anew gets a new one).
	ClusterID string `json:"clusterID,omitempty"`
	// Kubeconfig is the kubeconfig file; empty means in-cluster configuration.
	Kubeconfig string `json:"kubeconfig,omitempty"`

	OpenStack OpenStack `json:"openstack"`
	Neutron   Neutron   `json:"neutron"`
	Octavia   Octavia   `json:"octavia"`

	// Controllers switches the watchers on and off (seed 000: the watchers are chosen in the configuration).
	Controllers Controllers `json:"controllers"`

	// Workers is the number of objects each controller reconciles at once.
	Workers int `json:"workers"`
	// ResyncPeriod is how often Raven lists its OpenStack objects to repair out-of-band changes and sweep orphans.
	ResyncPeriod Duration `json:"resyncPeriod"`
	// PortAuditPeriod is how often a resync lists every port of the cluster. The resyncs between list the namespace
	// networks, their subnets and the router's interfaces, not the ports, so that their calls grow with namespaces
	// rather than pods: Raven's own writes keep its view of the ports, and raven-node reports a running pod's port
	// deleted out of band within seconds. What else happens to ports out of band (a port made with the cluster's
	// tags, tags moved, a pending pod's port deleted) waits for this listing. 0: every resync lists every port.
	PortAuditPeriod Duration `json:"portAuditPeriod"`
	// OrphanGracePeriod protects just-created objects from the sweep.
	OrphanGracePeriod Duration `json:"orphanGracePeriod"`

	// Pools keep ready ports per namespace, so that a new pod does not wait for Neutron.
	Pools Pools `json:"pools"`
	// Namespaces chooses the namespaces Raven serves.
	Namespaces Namespaces `json:"namespaces"`
	// Nested serves nodes that are Nova VMs: their pods' ports are VLAN subports of the VMs' trunks.
	Nested Nested `json:"nested"`

	MetricsAddr string `json:"metricsAddr"`
	HealthAddr  string `json:"healthAddr"`
	// PprofAddr serves Go's /debug/pprof profiles there; empty (the default) serves none.
	PprofAddr string `json:"pprofAddr"`

	LeaderElection LeaderElection `json:"leaderElection"`
}

// OpenStack says where the credentials are.
type OpenStack struct {
	// CloudsFile is the clouds.yaml path (default: $OS_CLIENT_CONFIG_FILE).
	CloudsFile string `json:"cloudsFile"`
	// Cloud is the entry of clouds.yaml to use (default: $OS_CLOUD).
	Cloud string `json:"cloud"`
}

// Neutron describes the cluster's networks.
type Neutron struct {
	// ExternalNetwork is the name or ID of the provider network that routers and floating IPs use.
	ExternalNetwork string `json:"externalNetwork"`
	// ExternalSubnetCIDR bounds the addresses a Service's externalIPs may turn into floating IPs
	// (cluster_external_subnet in seed 004).
	ExternalSubnetCIDR string `json:"externalSubnetCIDR"`
	// PodSubnetPoolID uses an existing subnet pool; otherwise Raven ensures one with PodSubnetPoolCIDR.
	PodSubnetPoolID       string `json:"podSubnetPoolID,omitempty"`
	PodSubnetPoolCIDR     string `json:"podSubnetPoolCIDR"`
	PodSubnetPrefixLength int    `json:"podSubnetPrefixLength"`
	// RouterID uses an existing router; otherwise Raven ensures one with its gateway on ExternalNetwork.
	RouterID string `json:"routerID,omitempty"`
	// ServiceSubnetCIDR is the Neutron subnet for load balancer VIPs. It must contain the cluster's
	// service-cluster-ip-range in its lower half: Raven puts the gateway and Neutron's own allocations in
	// the upper half, so that they never take a clusterIP.
	ServiceSubnetCIDR string `json:"serviceSubnetCIDR"`
	// PodSecurityGroups are the security group IDs every pod port gets, as they are. When empty, Raven
	// manages one cluster pod group itself: ingress from its own members (pods reach pods), from the
	// service subnet (load balancers, hairpin traffic) and from PodIngressCIDRs; egress to anywhere.
	PodSecurityGroups []string `json:"podSecurityGroups,omitempty"`
	// PodIngressCIDRs are further sources the managed pod group admits (the nodes, for health checks).
	PodIngressCIDRs []string `json:"podIngressCIDRs,omitempty"`
	// TagPortsOnCreate says whether Neutron takes tags in a port create request: "auto" (default) asks for
	// the tag-ports-during-bulk-creation extension; "true" trusts the configuration of a Neutron that has the
	// extension driver but does not list it (ML2/OVN hides aliases it does not know); "false" tags afterwards.
	TagPortsOnCreate string `json:"tagPortsOnCreate,omitempty"`
}

// Octavia chooses how Services become load balancers.
type Octavia struct {
	// Provider is the Octavia provider driver of every load balancer: "ovn" (OVN load balancers: the VIP port
	// is the provider's, pools balance by source IP and port, a load balancer is created with its listeners,
	// pools and members in one request) or "amphora" (Raven makes the VIP port, round robin or source IP,
	// built one listener and pool at a time). Changing it rebuilds every Service's load balancer.
	Provider string `json:"provider"`
	// HealthMonitor gives every pool a health monitor (TCP, UDP-CONNECT; SCTP on amphora), so that a
	// backend that stops answering leaves the rotation even while its pod is Ready.
	HealthMonitor HealthMonitor `json:"healthMonitor"`
	// DeleteMembersFirst removes the members of a load balancer's monitored pools before deleting it (see
	// octavia.Provider.MembersFirst). Unset: the provider's default, off. Set it on ovn-octavia-provider 3.0.0
	// (OpenStack Zed), whose agent could stall for minutes on a verdict for a deleted listener.
	DeleteMembersFirst *bool `json:"deleteMembersFirst,omitempty"`
	// LoadBalancerClass is the spec.loadBalancerClass Raven implements: a type LoadBalancer Service with no class
	// or this one gets Raven's floating IP and load balancer status; one of another class is left to that class's
	// controller (Raven serves its clusterIP, as for any Service).
	LoadBalancerClass string `json:"loadBalancerClass"`
}

// DefaultLoadBalancerClass is the loadBalancerClass Raven serves unless configured otherwise.
const DefaultLoadBalancerClass = "raven.io/octavia"

// HealthMonitor is how pools probe their members, in whole seconds as Octavia takes them.
type HealthMonitor struct {
	Enabled bool `json:"enabled"`
	// DelaySeconds between probes; TimeoutSeconds (at most DelaySeconds) for one probe's answer.
	DelaySeconds   int `json:"delaySeconds"`
	TimeoutSeconds int `json:"timeoutSeconds"`
	// MaxRetriesDown failed probes take a member out; MaxRetries good ones bring it back (1–10 each).
	MaxRetries     int `json:"maxRetries"`
	MaxRetriesDown int `json:"maxRetriesDown"`
	// UDPConnectDelaySeconds is the delay of UDP-CONNECT monitors: Octavia refuses one shorter than its
	// [api_settings] udp_connect_min_interval_health_monitor (3 s unless the cloud changed it).
	UDPConnectDelaySeconds int `json:"udpConnectDelaySeconds"`
}

// Pools sizes the per-namespace port pools (Cilium-style watermarks).
type Pools struct {
	Enabled bool `json:"enabled"`
	// MinFree: a pool with fewer free ports is refilled.
	MinFree int `json:"minFree"`
	// Batch: ports created by one bulk request.
	Batch int `json:"batch"`
	// Max: free ports a pool holds at most.
	Max int `json:"max"`
	// Recycle gives the port of a deleted or finished pod back to its namespace's pool (while it has room)
	// instead of deleting it. Off by default: the port then outlives its pod, under the pool's name.
	Recycle bool `json:"recycle"`
	// IdleAfter: a namespace where no pod took a port for this long has its free ports deleted. A pool
	// fills only once pods are being created in its namespace.
	IdleAfter Duration `json:"idleAfter"`
	// PerNode keeps a pool per node × namespace with ports bound to the node in advance: a pod takes one
	// without a request to Neutron (the claim is written in the background). Without it, pools are per namespace and unbound, and a take
	// binds the port (one port update, as costly as a create under ML2/OVN).
	PerNode bool `json:"perNode"`
	// Budget caps the free ports of all pools together, cluster-wide (0: no cap): what the cluster keeps idle in
	// Neutron stays bounded whatever its nodes × namespaces.
	Budget int `json:"budget"`
}

// Namespaces chooses the namespaces Raven gives networks to; every other one is served.
type Namespaces struct {
	// Exclude names namespaces that get no network; their pods get no port, and a Warning event says why.
	Exclude []string `json:"exclude,omitempty"`
	// ExcludeSelector is a label selector ("raven.openstack.org/network=none"); the namespaces it matches
	// are excluded too.
	ExcludeSelector string `json:"excludeSelector,omitempty"`
}

// Nested configures nested nodes: Kubernetes nodes that are Nova VMs (VLAN-aware, each VM port the parent of
// a trunk), whose pods' ports are subports of that trunk instead of ports bound to the node.
type Nested struct {
	// WorkerSubnetID is the Neutron subnet of the node VMs' ports; a node's InternalIP on it finds its VM's
	// port. Empty: no node is nested.
	WorkerSubnetID string `json:"workerSubnetID,omitempty"`
	// NodeSelector is a label selector of the nested nodes ("node.kubernetes.io/instance-type"); empty:
	// every node is, once WorkerSubnetID is set.
	NodeSelector string `json:"nodeSelector,omitempty"`
}

// Controllers lists the watchers.
type Controllers struct {
	Namespaces bool `json:"namespaces"`
	Pods       bool `json:"pods"`
	Services   bool `json:"services"`
	// NetworkPolicies turns NetworkPolicies into security groups on the pods' ports (needs Pods).
	NetworkPolicies bool `json:"networkPolicies"`
}

// LeaderElection configures the single-writer lease.
type LeaderElection struct {
	Enabled       bool     `json:"enabled"`
	Namespace     string   `json:"namespace"`
	LeaseDuration Duration `json:"leaseDuration"`
	RenewDeadline Duration `json:"renewDeadline"`
	RetryPeriod   Duration `json:"retryPeriod"`
}

// Duration is a time.Duration written as "30s" in YAML.
type Duration struct{ time.Duration }

// UnmarshalJSON reads "30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) >= 2 && s[0] == '"' {
		s = s[1 : len(s)-1]
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %s: %w", string(b), err)
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes "30s".
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// Default returns the options Raven runs with when nothing is configured.
func Default() Options {
	return Options{
		Neutron: Neutron{
			ExternalNetwork:       "public",
			PodSubnetPoolCIDR:     "10.244.0.0/16",
			PodSubnetPrefixLength: 24,
		},
		Octavia: Octavia{Provider: "amphora", LoadBalancerClass: DefaultLoadBalancerClass,
			HealthMonitor: HealthMonitor{Enabled: true, DelaySeconds: 2, TimeoutSeconds: 1, MaxRetries: 1, MaxRetriesDown: 2, UDPConnectDelaySeconds: 3}},
		Controllers:       Controllers{Namespaces: true, Pods: true, Services: true, NetworkPolicies: true},
		Pools:             Pools{Enabled: true, MinFree: 5, Batch: 10, Max: 50, IdleAfter: Duration{10 * time.Minute}, Budget: 1000},
		Workers:           16,
		ResyncPeriod:      Duration{5 * time.Minute},
		PortAuditPeriod:   Duration{30 * time.Minute},
		OrphanGracePeriod: Duration{2 * time.Minute},
		MetricsAddr:       ":8080",
		HealthAddr:        ":8081",
		LeaderElection: LeaderElection{
			Enabled:       false,
			Namespace:     "kube-system",
			LeaseDuration: Duration{15 * time.Second},
			RenewDeadline: Duration{10 * time.Second},
			RetryPeriod:   Duration{2 * time.Second},
		},
	}
}

// Load reads the YAML file at path over the defaults. Unknown fields are an error, so typos show.
func Load(path string) (Options, error) {
	o := Default()
	if path == "" {
		return o, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return o, fmt.Errorf("reading config: %w", err)
	}
	if err := yaml.UnmarshalStrict(raw, &o); err != nil {
		return o, fmt.Errorf("config %s: %w", path, err)
	}
	return o, nil
}

// Flags are the command-line overrides; only flags given on the command line win over the file.
type Flags struct {
	ConfigFile string
	fs         *flag.FlagSet
	o          Options
}

// BindFlags registers Raven's flags on fs.
func BindFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	fs.StringVar(&f.ConfigFile, "config", os.Getenv("RAVEN_CONFIG"), "YAML configuration file (default $RAVEN_CONFIG)")
	fs.StringVar(&f.o.ClusterID, "cluster-id", "", "cluster ID written into every OpenStack tag (empty: the kube-system namespace's UID)")
	fs.StringVar(&f.o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, or $KUBECONFIG)")
	fs.StringVar(&f.o.OpenStack.CloudsFile, "clouds-file", "", "clouds.yaml path (default $OS_CLIENT_CONFIG_FILE)")
	fs.StringVar(&f.o.OpenStack.Cloud, "cloud", "", "cloud entry in clouds.yaml (default $OS_CLOUD)")
	fs.StringVar(&f.o.MetricsAddr, "metrics-bind-address", "", "address of /metrics (\"0\" turns it off)")
	fs.StringVar(&f.o.HealthAddr, "health-probe-bind-address", "", "address of /healthz and /readyz")
	fs.BoolVar(&f.o.LeaderElection.Enabled, "leader-elect", false, "run as one of several replicas, only the lease holder writes")
	fs.StringVar(&f.o.LeaderElection.Namespace, "leader-election-namespace", "", "namespace of the leader election Lease")
	fs.IntVar(&f.o.Workers, "workers", 0, "objects each controller reconciles at once")
	fs.BoolVar(&f.o.Pools.Enabled, "port-pools", true, "keep ready ports per namespace (pools.enabled)")
	fs.DurationVar(&f.o.ResyncPeriod.Duration, "resync-period", 0, "how often OpenStack is listed to repair drift and sweep orphans")
	fs.DurationVar(&f.o.PortAuditPeriod.Duration, "port-audit-period", 0, "how often a resync lists every port, not only the namespace networks (0: every resync)")
	fs.DurationVar(&f.o.OrphanGracePeriod.Duration, "orphan-grace-period", 0, "age an ownerless object must reach before the sweep deletes it")
	return f
}

// Options loads the file and applies the flags that were set.
func (f *Flags) Options() (Options, error) {
	o, err := Load(f.ConfigFile)
	if err != nil {
		return o, err
	}
	f.applySet(&o)
	applyEnv(&o)
	return o, o.Validate()
}

// applySet copies into o the flags given on the command line; they win over the file.
func (f *Flags) applySet(o *Options) {
	f.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "cluster-id":
			o.ClusterID = f.o.ClusterID
		case "kubeconfig":
			o.Kubeconfig = f.o.Kubeconfig
		case "clouds-file":
			o.OpenStack.CloudsFile = f.o.OpenStack.CloudsFile
		case "cloud":
			o.OpenStack.Cloud = f.o.OpenStack.Cloud
		case "metrics-bind-address":
			o.MetricsAddr = f.o.MetricsAddr
		case "health-probe-bind-address":
			o.HealthAddr = f.o.HealthAddr
		case "leader-elect":
			o.LeaderElection.Enabled = f.o.LeaderElection.Enabled
		case "leader-election-namespace":
			o.LeaderElection.Namespace = f.o.LeaderElection.Namespace
		case "workers":
			o.Workers = f.o.Workers
		case "port-pools":
			o.Pools.Enabled = f.o.Pools.Enabled
		case "resync-period":
			o.ResyncPeriod = f.o.ResyncPeriod
		case "port-audit-period":
			o.PortAuditPeriod = f.o.PortAuditPeriod
		case "orphan-grace-period":
			o.OrphanGracePeriod = f.o.OrphanGracePeriod
		}
	})
}

// applyEnv fills what neither the file nor the flags set from the usual environment variables.
func applyEnv(o *Options) {
	if o.OpenStack.CloudsFile == "" {
		o.OpenStack.CloudsFile = os.Getenv("OS_CLIENT_CONFIG_FILE")
	}
	if o.OpenStack.Cloud == "" {
		o.OpenStack.Cloud = os.Getenv("OS_CLOUD")
	}
	if o.Kubeconfig == "" {
		o.Kubeconfig = os.Getenv("KUBECONFIG")
	}
}

// octaviaErrors are the problems of the octavia section.
func (o Options) octaviaErrors() []error {
	var errs []error
	if o.Octavia.Provider != "amphora" && o.Octavia.Provider != "ovn" {
		errs = append(errs, fmt.Errorf("octavia.provider %q must be amphora or ovn", o.Octavia.Provider))
	}
	hm := o.Octavia.HealthMonitor
	inRange := func(v, lo, hi int) bool { return v >= lo && v <= hi }
	valid := inRange(hm.TimeoutSeconds, 1, min(hm.DelaySeconds, hm.UDPConnectDelaySeconds)) && inRange(hm.MaxRetries, 1, 10) && inRange(hm.MaxRetriesDown, 1, 10)
	if hm.Enabled && !valid {
		errs = append(errs, fmt.Errorf("octavia.healthMonitor: need 1 ≤ timeoutSeconds ≤ delaySeconds, udpConnectDelaySeconds and maxRetries, maxRetriesDown in 1–10 (got %+v)", hm))
	}
	if msgs := validation.IsQualifiedName(o.Octavia.LoadBalancerClass); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("octavia.loadBalancerClass %q must be a loadBalancerClass as Kubernetes takes it (such as %s): %s",
			o.Octavia.LoadBalancerClass, DefaultLoadBalancerClass, strings.Join(msgs, "; ")))
	}
	return errs
}

// Validate reports every problem at once.
func (o Options) Validate() error {
	var errs []error
	if len(o.ClusterID) > 64 {
		errs = append(errs, errors.New("clusterID must be at most 64 characters"))
	}
	if o.OpenStack.CloudsFile == "" || o.OpenStack.Cloud == "" {
		errs = append(errs, errors.New("openstack.cloudsFile and openstack.cloud (or $OS_CLIENT_CONFIG_FILE and $OS_CLOUD) must be set"))
	}
	errs = append(errs, o.neutronErrors()...)
	errs = append(errs, o.octaviaErrors()...)
	if o.Pools.Enabled && (o.Pools.MinFree < 0 || o.Pools.Batch < 1 || o.Pools.Max < o.Pools.MinFree || o.Pools.Budget < 0) {
		errs = append(errs, fmt.Errorf("pools: need 0 ≤ minFree ≤ max, batch ≥ 1 and budget ≥ 0 (got %+v)", o.Pools))
	}
	if _, err := labels.Parse(o.Namespaces.ExcludeSelector); err != nil {
		errs = append(errs, fmt.Errorf("namespaces.excludeSelector: %w", err))
	}
	if _, err := labels.Parse(o.Nested.NodeSelector); err != nil {
		errs = append(errs, fmt.Errorf("nested.nodeSelector: %w", err))
	}
	if o.Nested.NodeSelector != "" && o.Nested.WorkerSubnetID == "" {
		errs = append(errs, errors.New("nested.nodeSelector needs nested.workerSubnetID (the subnet of the node VMs' ports)"))
	}
	errs = append(errs, o.workErrors()...)
	return errors.Join(errs...)
}

// workErrors lists the problems of the workers and the resync's periods.
func (o Options) workErrors() []error {
	var errs []error
	if o.Workers < 1 {
		errs = append(errs, errors.New("workers must be at least 1"))
	}
	if o.ResyncPeriod.Duration < time.Second {
		errs = append(errs, errors.New("resyncPeriod must be at least 1s"))
	}
	if o.PortAuditPeriod.Duration < 0 {
		errs = append(errs, errors.New("portAuditPeriod must not be negative (0 lists every port at every resync)"))
	}
	return errs
}

// neutronErrors lists the problems of the neutron section, in the order Validate reports them.
func (o Options) neutronErrors() []error {
	var errs []error
	if o.Neutron.PodSubnetPoolID == "" {
		if _, err := netip.ParsePrefix(o.Neutron.PodSubnetPoolCIDR); err != nil {
			errs = append(errs, fmt.Errorf("neutron.podSubnetPoolCIDR: %w", err))
		}
	}
	if o.Neutron.PodSubnetPrefixLength < 8 || o.Neutron.PodSubnetPrefixLength > 30 {
		errs = append(errs, fmt.Errorf("neutron.podSubnetPrefixLength %d must be between 8 and 30", o.Neutron.PodSubnetPrefixLength))
	}
	switch o.Neutron.TagPortsOnCreate {
	case "", "auto", "true", "false":
	default:
		errs = append(errs, fmt.Errorf("neutron.tagPortsOnCreate %q must be auto, true or false", o.Neutron.TagPortsOnCreate))
	}
	for _, c := range o.Neutron.PodIngressCIDRs {
		if _, err := netip.ParsePrefix(c); err != nil {
			errs = append(errs, fmt.Errorf("neutron.podIngressCIDRs: %w", err))
		}
	}
	if o.Neutron.ExternalSubnetCIDR != "" {
		if _, err := netip.ParsePrefix(o.Neutron.ExternalSubnetCIDR); err != nil {
			errs = append(errs, fmt.Errorf("neutron.externalSubnetCIDR: %w", err))
		}
	}
	if o.Controllers.Services {
		if p, err := netip.ParsePrefix(o.Neutron.ServiceSubnetCIDR); err != nil {
			errs = append(errs, fmt.Errorf("neutron.serviceSubnetCIDR (needed by the service controller): %w", err))
		} else if p.Bits() > 29 {
			errs = append(errs, fmt.Errorf("neutron.serviceSubnetCIDR %s is too small", p))
		}
	}
	return errs
}
