package orphan

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/controller"
	"github.com/raven-net/raven/internal/metrics"
	"github.com/raven-net/raven/internal/neutron"
	"github.com/raven-net/raven/internal/ownership"
	"github.com/raven-net/raven/pkg/annotations"
)

// Sweeper is a leader-only runnable.
type Sweeper struct {
	Client  client.Reader
	Neutron *neutron.Manager
	Options config.Options
	// WithServices asks for the service network.
	WithServices bool
	Gate         *controller.Gate
	Metrics      *metrics.Metrics
	// PodRepairs and NamespaceRepairs take objects whose OpenStack side must be rebuilt.
	PodRepairs       chan<- event.GenericEvent
	NamespaceRepairs chan<- event.GenericEvent
	// Extra runs after each resync with the same clock (the service sweep hooks in here).
	Extra []func(ctx context.Context, now time.Time) error
	// CacheSynced blocks until the informer caches are filled.
	CacheSynced func(ctx context.Context) bool
}

// annotatedPorts are the ports the annotations of pods that have not finished name, by port ID, with their pods
// as owners.
func (s *Sweeper) annotatedPorts(ctx context.Context) (map[string]neutron.Annotation, error) {
	var pods corev1.PodList
	if err := s.Client.List(ctx, &pods); err != nil {
		return nil, err
	}
	out := map[string]neutron.Annotation{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue // a finished pod's port may be back in the pool (pools.recycle)
		}
		var port annotations.Port
		if ok, err := annotations.Decode(p.Annotations, annotations.PodPort, &port); !ok || err != nil || port.ID == "" {
			continue
		}
		owner := ownership.Owner{Cluster: s.Options.ClusterID, Kind: ownership.KindPod, UID: string(p.UID), Name: p.Namespace + "/" + p.Name}
		out[port.ID] = neutron.Annotation{Owner: owner, Name: p.Name}
	}
	return out, nil
}

// NeedLeaderElection returns true: only the leader writes.
func (s *Sweeper) NeedLeaderElection() bool { return true }

// Start ensures the cluster objects, loads the index, opens the gate and then resyncs periodically.
func (s *Sweeper) Start(ctx context.Context) error {
	log := klog.FromContext(ctx).WithName("resync")
	ctx = klog.NewContext(ctx, log)
	if s.CacheSynced != nil && !s.CacheSynced(ctx) {
		return ctx.Err()
	}
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 30 * time.Second}
	// First the cluster objects and the namespace networks (a few calls): enough to serve new work at once,
	// even when Neutron is slow and the cluster has many ports.
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		c, err := neutron.EnsureCluster(ctx, s.Neutron.N, s.Options.ClusterID, s.Options.Neutron, s.WithServices)
		if err != nil {
			log.Error(err, "Ensuring the cluster's Neutron objects; will retry")
			return false, nil
		}
		*s.Neutron.C = *c
		snap, err := neutron.ListNetworks(ctx, s.Neutron.N, s.Neutron.C)
		if err != nil {
			log.Error(err, "Loading the cluster's Neutron networks; will retry")
			return false, nil
		}
		s.Neutron.X.Replace(s.Options.ClusterID, snap)
		return true, nil
	})
	if err != nil {
		return nil // context ended
	}
	log.Info("Neutron ready for new work", "router", s.Neutron.C.RouterID, "subnetPool", s.Neutron.C.SubnetPoolID,
		"networks", len(s.Neutron.X.Networks()), "tagsOnPortCreate", s.Neutron.C.Caps.TagsOnPortCreate)
	s.Gate.Open()
	if s.Metrics != nil {
		s.Metrics.Writing.Set(1)
	}
	// Then every port: until they are in, a pod's own ports are looked up by its UID (neutron.EnsurePort).
	err = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		if _, err := s.Neutron.AdoptMarked(ctx); err != nil {
			log.Error(err, "Tagging ports that lost their tags; will retry")
			return false, nil
		}
		snap, err := neutron.List(ctx, s.Neutron.N, s.Neutron.C)
		if err != nil {
			log.Error(err, "Loading the cluster's Neutron ports; will retry")
			return false, nil
		}
		// Pool ports claimed in memory only, whose tags the last run never wrote, are their pods' by the
		// pods' annotations: they must not go back to the pool.
		if snap.Annotated, err = s.annotatedPorts(ctx); err != nil {
			log.Error(err, "Reading the pods' port annotations; will retry")
			return false, nil
		}
		s.Neutron.X.Replace(s.Options.ClusterID, snap)
		return true, nil
	})
	if err != nil {
		return nil
	}
	if p := s.Neutron.P; p != nil {
		p.Start(ctx, 4)
		p.Offer(s.Neutron.X.Claims())
	}
	log.Info("Neutron view loaded", "networks", len(s.Neutron.X.Networks()), "ports", len(s.Neutron.X.PortsOfKind(ownership.KindPod)))
	// The first sweep runs right away: a pod deleted while Raven was stopped loses its port now.
	first := true
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		err := s.Resync(ctx, time.Now(), !first)
		if err != nil {
			log.Error(err, "Resync failed; will retry at the next period")
		}
		if s.Metrics != nil {
			result := "ok"
			if err != nil {
				result = "error"
			}
			s.Metrics.Resyncs.WithLabelValues(result).Inc()
		}
		first = false
	}, s.Options.ResyncPeriod.Duration)
	return nil
}

// Resync refreshes the index from Neutron (unless reload is false), repairs and sweeps.
func (s *Sweeper) Resync(ctx context.Context, now time.Time, reload bool) error {
	if reload {
		if _, err := s.Neutron.AdoptMarked(ctx); err != nil {
			return err
		}
		snap, err := neutron.List(ctx, s.Neutron.N, s.Neutron.C)
		if err != nil {
			return err
		}
		s.Neutron.X.Replace(s.Options.ClusterID, snap)
		if p := s.Neutron.P; p != nil {
			// Claims Neutron records whose tags never followed: offered again on every resync.
			p.Offer(s.Neutron.X.Claims())
			p.Tend(ctx, s.Neutron.X.Networks(), now)
		}
	}
	errs := []error{s.sweepPods(ctx, now), s.sweepNamespaces(ctx, now)}
	for _, f := range s.Extra {
		errs = append(errs, f(ctx, now))
	}
	return errors.Join(errs...)
}

func (s *Sweeper) old(created, now time.Time) bool {
	return now.Sub(created) >= s.Options.OrphanGracePeriod.Duration
}

func (s *Sweeper) sweepPods(ctx context.Context, now time.Time) error {
	log := klog.FromContext(ctx)
	// The ports are read before the pods: a pod is in the cache before it can take a port (a pool port, or a
	// recycled one, whose creation time says nothing of when it was taken), so every owner of a port read
	// here is in the pod list below if it still exists.
	candidates := s.Neutron.X.PortsOfKind(ownership.KindPod)
	var pods corev1.PodList
	if err := s.Client.List(ctx, &pods); err != nil {
		return err
	}
	live := make(map[string]bool, len(pods.Items))
	for i := range pods.Items {
		p := &pods.Items[i]
		live[string(p.UID)] = true
		// A pod whose annotated port is gone from Neutron (deleted out of band) goes back to its reconciler.
		// So does a pod with two ports (a create that finished after a crashed Raven's successor listed).
		var ann annotations.Port
		ports := s.Neutron.X.PortsOf(string(p.UID))
		if ok, _ := annotations.Decode(p.Annotations, annotations.PodPort, &ann); ok && !hasPort(ports, ann.ID) || len(ports) > 1 {
			if !controller.Send(ctx, s.PodRepairs, p) {
				return ctx.Err()
			}
		}
	}
	// Deletes run a few at a time: a deleted namespace can leave hundreds of ports behind.
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 4)
	)
	for _, port := range candidates {
		o, _ := ownership.Parse(port.Tags)
		if live[o.UID] || !s.old(port.CreatedAt, now) {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			n, err := s.Neutron.ReleasePorts(ctx, o.UID)
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			if n > 0 { // 0: another worker had it in hand
				log.Info("Released orphan port", "port", port.ID, "owner", o.Name, "podUID", o.UID)
				s.swept("port")
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (s *Sweeper) sweepNamespaces(ctx context.Context, now time.Time) error {
	log := klog.FromContext(ctx)
	var nss corev1.NamespaceList
	if err := s.Client.List(ctx, &nss); err != nil {
		return err
	}
	live := make(map[string]bool, len(nss.Items))
	for i := range nss.Items {
		ns := &nss.Items[i]
		live[string(ns.UID)] = true
		if _, annotated := ns.Annotations[annotations.NamespaceNetwork]; annotated && ns.DeletionTimestamp.IsZero() {
			if nn := s.Neutron.X.Network(string(ns.UID)); nn == nil || nn.Subnet == nil {
				if !controller.Send(ctx, s.NamespaceRepairs, ns) {
					return ctx.Err()
				}
			}
		}
	}
	var errs []error
	for _, nn := range s.Neutron.X.Networks() {
		if live[nn.NamespaceUID] || !s.old(nn.Network.CreatedAt, now) {
			continue
		}
		if err := s.Neutron.DeleteNamespace(ctx, nn.NamespaceUID); err != nil {
			if !errors.Is(err, neutron.ErrPortsRemain) {
				errs = append(errs, err)
			}
			continue
		}
		log.Info("Deleted orphan namespace network", "network", nn.Network.ID, "namespace", nn.Namespace)
		s.swept("network")
	}
	return errors.Join(errs...)
}

func (s *Sweeper) swept(kind string) {
	if s.Metrics != nil {
		s.Metrics.Swept.WithLabelValues(kind).Inc()
	}
}

func hasPort(ports []neutron.Port, id string) bool {
	for _, p := range ports {
		if p.ID == id {
			return true
		}
	}
	return false
}
