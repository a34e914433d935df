package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/raven-net/raven/internal/cni/ovs"
	"github.com/raven-net/raven/internal/cni/server"
)

// Run installs the plugin when asked, then serves CNI requests until ctx ends.
func Run(ctx context.Context, o *Options) error {
	logger := klog.FromContext(ctx).WithValues("node", o.NodeName)
	ctx = klog.NewContext(ctx, logger)

	cs, err := clientset(o.Kubeconfig)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", o.NodeName).String()
		}))
	inf := factory.Core().V1().Pods().Informer()
	pods, err := server.NewPods(inf)
	if err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "raven-node", Host: o.NodeName})

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	dp := newDatapath(ctx, o)
	srv := server.New(server.Config{
		Node: o.NodeName, ReadyTimeout: o.ReadyTimeout, Pods: pods, OVS: dp.ovs, Plumber: dp.plumber, Health: dp.status,
		Recorder: recorder, Metrics: server.NewMetrics(reg), Monitor: dp.monitor, PodsAPI: cs.CoreV1(), Nested: o.Nested,
		VLANUplink: o.VLANUplink,
		Lookup: func(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
			pod, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return pod, err
		},
	})

	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("the pod cache of node %s did not sync", o.NodeName)
	}
	if err := dp.health(ctx); err != nil {
		// Not fatal: STATUS reports it to the runtime, and ADD fails with the reason until it is mended.
		logger.Error(err, "The node's datapath is not ready; pods cannot be plugged until it is", "datapath", dp.name)
	}
	if dp.sweep != nil {
		dp.sweep(ctx) // before the socket answers: no ADD is in flight
	}
	if !o.Nested {
		// Running pods whose port the controller changes follow it (their ADD is long over).
		go srv.Follow(ctx)
		// A running pod whose interface loses its OVN binding (its port deleted in Neutron) has its port checked
		// now, not at the controller's next resync. Both read ovn-installed, which only a chassis has.
		go srv.WatchBindings(ctx)
	}
	l, err := server.Listen(o.Socket)
	if err != nil {
		return err
	}
	// The conflist comes last: a runtime that finds it finds the socket answering.
	if o.InstallPlugin != "" {
		if err := Install(o.InstallPlugin, o.CNIBinDir, o.CNIConfDir, o.Socket, o.CNIConflist); err != nil {
			_ = l.Close()
			return err
		}
		logger.Info("Installed the CNI plugin", "binDir", o.CNIBinDir, "confDir", o.CNIConfDir, "conflist", ConflistName)
		warnShadowingConfigs(ctx, recorder, o.NodeName, o.CNIConfDir)
	}
	if o.MetricsAddr != "" {
		go serveMetrics(ctx, o.MetricsAddr, reg, dp.health, o.Socket)
	}
	logger.Info("raven-node ready", "socket", o.Socket, "datapath", dp.name, "readyTimeout", o.ReadyTimeout)
	return srv.Serve(ctx, l)
}

// datapath is what raven-node plugs pods with: the node's Open vSwitch bridge and veths, or, on the kernel-VLAN
// path, VLAN links on the VM's NIC alone.
type datapath struct {
	// name is the bridge, or the uplink, for the logs.
	name    string
	ovs     ovs.Client  // nil on the kernel-VLAN path
	monitor ovs.Monitor // nil on the kernel-VLAN path
	plumber server.Plumber
	// status is STATUS's check: what an ADD needs (the OVS database and its bridge, or the VLAN uplink).
	status func(ctx context.Context) error
	// health is /healthz's (raven-node's readiness): status's, and on the bridge the daemons' control sockets.
	health func(ctx context.Context) error
	// sweep, when set, removes what a raven-node killed in an ADD left.
	sweep func(ctx context.Context)
}

// newDatapath builds the datapath the options name; the OVS monitor runs until ctx ends.
func newDatapath(ctx context.Context, o *Options) datapath {
	if o.VLANUplink != "" {
		v := server.VLAN{Uplink: o.VLANUplink}
		return datapath{name: "vlan-uplink " + o.VLANUplink, plumber: v, status: v.Health, health: v.Health, sweep: v.Sweep}
	}
	watch := &ovs.Watch{DB: o.OVSDB}
	go watch.Run(ctx)
	vsctl := &ovs.VSCtl{DB: o.OVSDB, Bridge: o.Bridge, OVSRunDir: o.OVSRunDir, OVNRunDir: o.OVNRunDir, Watch: watch}
	return datapath{name: "bridge " + o.Bridge, ovs: vsctl, monitor: watch, plumber: server.Netlink{DatapathNetns: o.DatapathNetns},
		status: vsctl.Health, health: func(ctx context.Context) error {
			if err := vsctl.Health(ctx); err != nil {
				return err
			}
			return vsctl.Daemons(ctx)
		}}
}

func clientset(kubeconfig string) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("loading the Kubernetes client configuration: %w", err)
	}
	cfg.UserAgent = "raven-node"
	return kubernetes.NewForConfig(cfg)
}

// serveMetrics serves /metrics, /healthz answering 200 while the datapath's health does (OVS, or the VLAN
// uplink), and /livez answering 200 while the CNI socket does.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, health func(context.Context) error, socket string) {
	mux := http.NewServeMux()
	mux.Handle("/livez", livez(socket))
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := health(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		klog.FromContext(ctx).Error(err, "Serving metrics", "addr", addr)
	}
}

// livez answers 200 while raven-node's CNI socket answers an HTTP request, whatever the answer: what the
// kubelet's every ADD and DEL needs from this process. OVS being down is /healthz's business, not a reason to
// restart raven-node.
func livez(socket string) http.HandlerFunc {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
	return func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://raven-node/", nil)
		if err == nil {
			var resp *http.Response
			if resp, err = client.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}
		if err != nil {
			http.Error(w, fmt.Sprintf("the CNI socket %s does not answer: %v", socket, err), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}
}
