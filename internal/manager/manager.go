package manager

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/controller"
	"github.com/raven-net/raven/internal/controller/namespace"
	"github.com/raven-net/raven/internal/controller/networkpolicy"
	"github.com/raven-net/raven/internal/controller/orphan"
	"github.com/raven-net/raven/internal/controller/pod"
	"github.com/raven-net/raven/internal/controller/service"
	"github.com/raven-net/raven/internal/metrics"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/octavia"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/slim"
)

// Run connects to both APIs and runs Raven until ctx ends.
func Run(ctx context.Context, o config.Options) error {
	log := klog.FromContext(ctx)
	configured := o.ClusterID
	restCfg, _, err := connect(ctx, &o)
	if err != nil {
		return err
	}
	m := metrics.New(nil)
	clients, err := openstack.NewClients(ctx, o.OpenStack.CloudsFile, o.OpenStack.Cloud, m)
	if err != nil {
		return err
	}
	if err := refuseEarlierDefault(ctx, clients.Networking, configured, o.ClusterID); err != nil {
		return err
	}
	mgr, err := newManager(restCfg, o, log)
	if err != nil {
		return err
	}

	gate := controller.NewGate()
	nm := neutronManager(o, clients)
	if nm.P != nil {
		nm.P.Nodes = nodeNames(mgr.GetClient())
	}
	sweeper, err := addControllers(ctx, mgr, o, clients, nm, gate, m)
	if err != nil {
		return err
	}
	if err := addSweeperAndChecks(mgr, sweeper, clients); err != nil {
		return err
	}
	log.Info("Starting Raven", "cluster", o.ClusterID, "cloud", o.OpenStack.Cloud,
		"namespaces", o.Controllers.Namespaces, "pods", o.Controllers.Pods, "services", o.Controllers.Services,
		"leaderElection", o.LeaderElection.Enabled)
	return mgr.Start(ctx)
}

// newManager builds the controller-runtime manager: its scheme, slim caches, probes and leader election.
func newManager(restCfg *rest.Config, o config.Options, log klog.Logger) (ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	// One table for the transforms: pods and EndpointSlices repeat the same namespaces.
	shared := &slim.Table{}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  scheme,
		Logger:                  log,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.HealthAddr,
		PprofBindAddress:        o.PprofAddr,
		GracefulShutdownTimeout: ptr(4 * time.Second),
		Cache: cache.Options{
			// Raven never reads managedFields; dropping them keeps the caches small.
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Pod{}:                {Transform: shared.Pod},
				&corev1.Node{}:               {Transform: slim.Node},
				&discoveryv1.EndpointSlice{}: {Transform: shared.EndpointSlice},
			},
		},
		LeaderElection:                o.LeaderElection.Enabled,
		LeaderElectionID:              "raven-" + o.ClusterID,
		LeaderElectionNamespace:       o.LeaderElection.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.LeaderElection.LeaseDuration.Duration,
		RenewDeadline:                 &o.LeaderElection.RenewDeadline.Duration,
		RetryPeriod:                   &o.LeaderElection.RetryPeriod.Duration,
	})
	if err != nil {
		return nil, fmt.Errorf("building the manager: %w", err)
	}
	return mgr, nil
}

// neutronManager builds the Neutron layer: the index, the port batcher and, when enabled, the port pools
// with their gauges.
func neutronManager(o config.Options, clients *openstack.Clients) *neutron.Manager {
	nm := &neutron.Manager{N: clients.Networking, C: &neutron.Cluster{ID: o.ClusterID}, X: neutron.NewIndex()}
	nm.B = &neutron.Batcher{N: clients.Networking, Max: neutron.BulkMax, InFlight: neutron.BulkInFlight, Created: func(p openstack.Port) { nm.X.PutPort(o.ClusterID, p) }}
	if o.Pools.Enabled {
		nm.P = &neutron.Pools{M: nm, Cfg: neutron.PoolConfig{MinFree: o.Pools.MinFree, Batch: o.Pools.Batch, Max: o.Pools.Max, Recycle: o.Pools.Recycle,
			IdleAfter: o.Pools.IdleAfter.Duration, PerNode: o.Pools.PerNode, Budget: o.Pools.Budget}}
		crmetrics.Registry.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "raven_port_pool_free_ports", Help: "Ready ports waiting in the pools, all namespaces."},
				func() float64 { return float64(nm.X.FreeTotal()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "raven_port_pool_refills_in_progress", Help: "Namespace pools being refilled now."},
				func() float64 { return float64(nm.P.Refilling()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "raven_port_pool_budget_starved_total",
				Help: "Pool refills cut short or refused because the free ports of all pools reached pools.budget."},
				func() float64 { return float64(nm.P.Starved()) }))
	}
	// Always: a Raven whose nested node selector was removed must still take its pods' subports off their
	// trunks to delete them. Without a worker subnet it attaches nothing, and finds only the trunks it
	// attached to since it started.
	nm.T = &neutron.Trunks{N: clients.Networking, WorkerSubnetID: o.Nested.WorkerSubnetID}
	return nm
}

// nestedNodes is what the pod controller knows of nested nodes: nil when there are none.
func nestedNodes(o config.Nested) (*pod.NestedNodes, error) {
	if o.WorkerSubnetID == "" {
		return nil, nil
	}
	if o.NodeSelector == "" {
		return &pod.NestedNodes{}, nil
	}
	sel, err := labels.Parse(o.NodeSelector)
	if err != nil {
		return nil, fmt.Errorf("nested.nodeSelector: %w", err)
	}
	return &pod.NestedNodes{Selector: sel}, nil
}

// addControllers sets up the enabled reconcilers with mgr and returns the orphan sweeper, which knows
// their repair channels.
func addControllers(ctx context.Context, mgr ctrl.Manager, o config.Options, clients *openstack.Clients, nm *neutron.Manager,
	gate *controller.Gate, m *metrics.Metrics) (*orphan.Sweeper, error) {
	recorder := mgr.GetEventRecorder("raven")
	// The service controller records the members it reads and the floating IPs it made; the pod controller keeps a
	// member's port until then, and the NetworkPolicy controller judges Services by them.
	backends := &octavia.Backends{}
	// A controller that is switched off has no repair channel: the resync skips its repairs instead of
	// blocking on a channel nobody reads.
	var podRepairs, nsRepairs chan event.GenericEvent
	if o.Controllers.Pods {
		podRepairs = make(chan event.GenericEvent, 1024)
	}
	if o.Controllers.Namespaces {
		nsRepairs = make(chan event.GenericEvent, 256)
	}
	scope, err := controller.NewScope(o.Namespaces)
	if err != nil {
		return nil, err
	}
	sweeper := &orphan.Sweeper{
		Client: mgr.GetClient(), Neutron: nm, Options: o, WithServices: o.Controllers.Services, Gate: gate, PodGate: controller.NewGate(), Metrics: m,
		PodRepairs: podRepairs, NamespaceRepairs: nsRepairs,
		CacheSynced: mgr.GetCache().WaitForCacheSync, APIReader: mgr.GetAPIReader(), Backends: backends,
		Pods: cachedPods(mgr.GetCache()), Parked: &controller.Parked{},
	}
	if o.Controllers.Namespaces {
		workers := min(o.Workers, 8)
		r := &namespace.Reconciler{Client: mgr.GetClient(), Neutron: nm, Gate: gate, Recorder: recorder, Scope: scope,
			Teardowns: make(chan struct{}, max(1, workers/2))}
		if err := r.SetupWithManager(mgr, workers, nsRepairs); err != nil {
			return nil, err
		}
	}
	if o.Controllers.Pods {
		if err := pod.WatchPods(ctx, mgr); err != nil {
			return nil, err
		}
		policies, err := addPolicyController(mgr, o, nm, gate, recorder, backends)
		if err != nil {
			return nil, err
		}
		nested, err := nestedNodes(o.Nested)
		if err != nil {
			return nil, err
		}
		r := &pod.Reconciler{Client: mgr.GetClient(), Neutron: nm, Gate: sweeper.PodGate, Parked: sweeper.Parked, Recorder: recorder, Metrics: m,
			Grace: o.OrphanGracePeriod.Duration, Scope: scope, Policies: policies, Backends: backends, Nested: nested}
		if err := r.SetupWithManager(mgr, o.Workers, podRepairs); err != nil {
			return nil, err
		}
	} else {
		// The sweep still needs the pod cache to know which ports are orphans.
		if err := pod.WatchPods(ctx, mgr); err != nil {
			return nil, err
		}
	}
	if o.Controllers.Services {
		svcRepairs := make(chan event.GenericEvent, 256)
		prov, err := configuredProvider(o.Octavia)
		if err != nil {
			return nil, err
		}
		deletes := &octavia.Deletes{}
		// Services are served once their own ports are listed, while the pods' ports still are.
		sweeper.ServiceGate = controller.NewGate()
		r := &service.Reconciler{Client: mgr.GetClient(), Neutron: nm, LB: clients.LoadBalancing, Provider: prov, Class: o.Octavia.LoadBalancerClass,
			Gate: sweeper.ServiceGate, Recorder: recorder, Backends: backends, Deletes: deletes}
		if err := r.SetupWithManager(mgr, min(o.Workers, 8), svcRepairs); err != nil {
			return nil, err
		}
		sweeper.Extra = append(sweeper.Extra, service.Sweep(mgr.GetClient(), nm, clients.LoadBalancing, prov, deletes, svcRepairs,
			o.OrphanGracePeriod.Duration, func(kind string) { m.Swept.WithLabelValues(kind).Inc() }))
	}
	return sweeper, nil
}

// addPolicyController adds the NetworkPolicy controller when it is on; its State gives the pod controller a
// new pod's groups (nil when it is off). lbs is what the Service controller saw its load balancers serve.
func addPolicyController(mgr ctrl.Manager, o config.Options, nm *neutron.Manager, gate *controller.Gate, recorder events.EventRecorder,
	lbs *octavia.Backends) (pod.Groups, error) {
	if !o.Controllers.NetworkPolicies {
		return nil, nil
	}
	state := &networkpolicy.State{NodeCIDRs: o.Neutron.PodIngressCIDRs}
	serviceCIDR := ""
	if o.Controllers.Services {
		serviceCIDR = o.Neutron.ServiceSubnetCIDR
	}
	np := &networkpolicy.Reconciler{Client: mgr.GetClient(), Neutron: nm, State: state, Gate: gate, Recorder: recorder,
		ServiceCIDR: serviceCIDR, NodeCIDRs: o.Neutron.PodIngressCIDRs, Resync: o.ResyncPeriod.Duration, SpareGroups: spareGroups, LoadBalancers: lbs}
	return state, np.SetupWithManager(mgr)
}

// spareGroups is how many empty policy groups wait for new policies: a policy with a peer takes two.
const spareGroups = 4

// addSweeperAndChecks adds the sweeper and the health and readiness checks to mgr.
func addSweeperAndChecks(mgr ctrl.Manager, sweeper *orphan.Sweeper, clients *openstack.Clients) error {
	if err := mgr.Add(sweeper); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("caches", cacheCheck(mgr.GetCache())); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("openstack", openstackCheck(clients.Networking)); err != nil {
		return err
	}
	return nil
}

// connect builds the Kubernetes client configuration and a clientset, and settles o.ClusterID (the kube-system
// namespace's UID when none is configured).
func connect(ctx context.Context, o *config.Options) (*rest.Config, kubernetes.Interface, error) {
	restCfg, err := restConfig(o.Kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, nil, err
	}
	if o.ClusterID, err = clusterID(ctx, kube.CoreV1().Namespaces(), o.ClusterID); err != nil {
		return nil, nil, err
	}
	return restCfg, kube, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	// Bursts of pods need many patches at once; the default 5 QPS would be the bottleneck.
	cfg.QPS, cfg.Burst = 200, 400
	cfg.UserAgent = "raven"
	return cfg, nil
}

func cacheCheck(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	}
}

// openstackCheck asks Neutron a cheap question at most every 5 s and remembers the answer.
func openstackCheck(n openstack.Networking) healthz.Checker {
	var mu sync.Mutex
	var last time.Time
	var lastErr error
	return func(req *http.Request) error {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < 5*time.Second {
			return lastErr
		}
		ctx, cancel := context.WithTimeout(req.Context(), 3*time.Second)
		defer cancel()
		_, lastErr = n.Capabilities(ctx)
		last = time.Now()
		if lastErr != nil {
			lastErr = fmt.Errorf("neutron does not answer: %w", lastErr)
		}
		return lastErr
	}
}

func ptr[T any](v T) *T { return &v }

// nodeNames lists the names of the cluster's nodes from the cache (the slim nodes NetworkPolicy already
// watches for their addresses, not a second listing from the API server at each resync), for the pools: the
// pool of a node that is gone is emptied (neutron.Pools.Nodes).
func nodeNames(r client.Reader) func(ctx context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		var nodes corev1.NodeList
		if err := r.List(ctx, &nodes); err != nil {
			return nil, err
		}
		names := make([]string, 0, len(nodes.Items))
		for _, n := range nodes.Items {
			names = append(names, n.Name)
		}
		return names, nil
	}
}

// cachedPods walks the pod informer's store: the cache's own objects, read only, without the list of copies a
// client List makes. An informer without a store (none is known) falls back to a List without copies.
func cachedPods(c cache.Cache) func(ctx context.Context, fn func(*corev1.Pod)) error {
	return func(ctx context.Context, fn func(*corev1.Pod)) error {
		inf, err := c.GetInformer(ctx, &corev1.Pod{})
		if err != nil {
			return err
		}
		if st, ok := inf.(interface{ GetStore() toolscache.Store }); ok {
			for _, o := range st.GetStore().List() {
				if p, ok := o.(*corev1.Pod); ok {
					fn(p)
				}
			}
			return nil
		}
		return orphan.EachListedPod(ctx, c, fn)
	}
}

// configuredProvider is the Octavia provider the configuration names, with its health monitors and delete order.
func configuredProvider(o config.Octavia) (octavia.Provider, error) {
	prov, err := octavia.ProviderNamed(o.Provider)
	if err != nil {
		return prov, err
	}
	if o.DeleteMembersFirst != nil {
		prov.MembersFirst = *o.DeleteMembersFirst
	}
	if hm := o.HealthMonitor; hm.Enabled {
		prov.Monitor = &octavia.Monitor{Delay: hm.DelaySeconds, UDPConnectDelay: hm.UDPConnectDelaySeconds, Timeout: hm.TimeoutSeconds, MaxRetries: hm.MaxRetries, MaxRetriesDown: hm.MaxRetriesDown}
	}
	return prov, nil
}
