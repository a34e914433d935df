package openstack

import (
	"context"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/monitors"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// octavia implements LoadBalancing with gophercloud.
type octavia struct {
	c *gophercloud.ServiceClient
}

// NewLoadBalancing wraps a gophercloud load-balancer service client.
func NewLoadBalancing(c *gophercloud.ServiceClient) LoadBalancing { return &octavia{c: c} }

type slicePage interface {
	ExtractIntoSlicePtr(v any, label string) error
}

func labelled(label string) func(pagination.Page, any) error {
	return func(p pagination.Page, v any) error { return p.(slicePage).ExtractIntoSlicePtr(v, label) }
}

func (o *octavia) ListLoadBalancers(ctx context.Context, tags []string) ([]LoadBalancer, error) {
	return allPages[LoadBalancer](ctx, "octavia loadbalancer list",
		loadbalancers.List(o.c, loadbalancers.ListOpts{Limit: PageSize, Tags: tags}), labelled("loadbalancers"))
}

func (o *octavia) GetLoadBalancer(ctx context.Context, id string) (*LoadBalancer, error) {
	var r struct {
		LB *LoadBalancer `json:"loadbalancer"`
	}
	err := loadbalancers.Get(ctx, o.c, id).ExtractInto(&r)
	return r.LB, wrap("octavia loadbalancer get", err)
}

func (o *octavia) CreateLoadBalancer(ctx context.Context, s LoadBalancerSpec) (*LoadBalancer, error) {
	var r struct {
		LB *LoadBalancer `json:"loadbalancer"`
	}
	opts := loadbalancers.CreateOpts{
		Name: s.Name, Description: s.Description, VipPortID: s.VipPortID, VipSubnetID: s.VipSubnetID,
		VipAddress: s.VipAddress, Provider: s.Provider, Tags: s.Tags,
	}
	for _, g := range s.Listeners {
		pool := poolCreateOpts(g.Pool)
		for _, m := range g.Members {
			pool.Members = append(pool.Members, pools.CreateMemberOpts{Name: m.Name, Address: m.Address,
				ProtocolPort: m.ProtocolPort, SubnetID: m.SubnetID})
		}
		opts.Listeners = append(opts.Listeners, listeners.CreateOpts{Name: g.Listener.Name,
			Protocol: listeners.Protocol(g.Listener.Protocol), ProtocolPort: g.Listener.ProtocolPort, Tags: g.Listener.Tags,
			DefaultPool: &pool})
	}
	err := loadbalancers.Create(ctx, o.c, opts).ExtractInto(&r)
	return r.LB, wrap("octavia loadbalancer create", err)
}

// poolCreateOpts is a pool create request; ListenerID is left out when empty (a pool created with its listener).
func poolCreateOpts(s PoolSpec) pools.CreateOpts {
	opts := pools.CreateOpts{
		ListenerID: s.ListenerID, Name: s.Name, Protocol: pools.Protocol(s.Protocol),
		LBMethod: pools.LBMethod(s.LBAlgorithm), Tags: s.Tags,
	}
	if s.SourceIP {
		opts.Persistence = &pools.SessionPersistence{Type: "SOURCE_IP"}
	}
	return opts
}

func (o *octavia) DeleteLoadBalancer(ctx context.Context, id string) error {
	return wrap("octavia loadbalancer delete", loadbalancers.Delete(ctx, o.c, id, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr())
}

func (o *octavia) ListListeners(ctx context.Context, lbID string) ([]Listener, error) {
	return allPages[Listener](ctx, "octavia listener list",
		listeners.List(o.c, listeners.ListOpts{Limit: PageSize, LoadbalancerID: lbID}), labelled("listeners"))
}

func (o *octavia) ListTaggedListeners(ctx context.Context, tags []string) ([]Listener, error) {
	return allPages[Listener](ctx, "octavia listener list",
		listeners.List(o.c, listeners.ListOpts{Limit: PageSize, Tags: tags}), labelled("listeners"))
}

func (o *octavia) CreateListener(ctx context.Context, s ListenerSpec) (*Listener, error) {
	var r struct {
		L *Listener `json:"listener"`
	}
	err := listeners.Create(ctx, o.c, listeners.CreateOpts{
		LoadbalancerID: s.LoadBalancerID, Name: s.Name, Protocol: listeners.Protocol(s.Protocol),
		ProtocolPort: s.ProtocolPort, Tags: s.Tags,
	}).ExtractInto(&r)
	return r.L, wrap("octavia listener create", err)
}

func (o *octavia) DeleteListener(ctx context.Context, id string) error {
	return wrap("octavia listener delete", listeners.Delete(ctx, o.c, id).ExtractErr())
}

func (o *octavia) ListPools(ctx context.Context, lbID string) ([]Pool, error) {
	return listPools(ctx, o.c, pools.ListOpts{Limit: PageSize, LoadbalancerID: lbID})
}

func (o *octavia) ListTaggedPools(ctx context.Context, tags []string) ([]Pool, error) {
	return listPools(ctx, o.c, pools.ListOpts{Limit: PageSize, Tags: tags})
}

// listPools lists pools, each with its listener's ID (ListenerID).
func listPools(ctx context.Context, c *gophercloud.ServiceClient, opts pools.ListOpts) ([]Pool, error) {
	out, err := allPages[Pool](ctx, "octavia pool list", pools.List(c, opts), labelled("pools"))
	for i := range out {
		if len(out[i].Listeners) > 0 {
			out[i].ListenerID = out[i].Listeners[0].ID
		}
	}
	return out, err
}

func (o *octavia) CreatePool(ctx context.Context, s PoolSpec) (*Pool, error) {
	var r struct {
		P *Pool `json:"pool"`
	}
	if err := pools.Create(ctx, o.c, poolCreateOpts(s)).ExtractInto(&r); err != nil {
		return nil, wrap("octavia pool create", err)
	}
	r.P.ListenerID = s.ListenerID
	return r.P, nil
}

func (o *octavia) DeletePool(ctx context.Context, id string) error {
	return wrap("octavia pool delete", pools.Delete(ctx, o.c, id).ExtractErr())
}

func (o *octavia) LoadBalancerStatus(ctx context.Context, lbID string) (StatusTree, error) {
	var r struct {
		Statuses struct {
			LoadBalancer struct {
				Listeners []struct {
					ID    string `json:"id"`
					Pools []struct {
						ID      string         `json:"id"`
						Members []Member       `json:"members"`
						Monitor *MonitorStatus `json:"health_monitor"`
					} `json:"pools"`
				} `json:"listeners"`
			} `json:"loadbalancer"`
		} `json:"statuses"`
	}
	if err := loadbalancers.GetStatuses(ctx, o.c, lbID).ExtractInto(&r); err != nil {
		return StatusTree{}, wrap("octavia loadbalancer_status get", err)
	}
	out := StatusTree{Members: map[string][]Member{}, Monitors: map[string]MonitorStatus{}}
	for _, l := range r.Statuses.LoadBalancer.Listeners {
		out.Listeners = append(out.Listeners, l.ID)
		for _, p := range l.Pools {
			out.Members[p.ID] = p.Members
			if p.Monitor != nil {
				out.Monitors[p.ID] = *p.Monitor
			}
		}
	}
	return out, nil
}

func (o *octavia) CreateMonitor(ctx context.Context, s MonitorSpec) error {
	_, err := monitors.Create(ctx, o.c, monitors.CreateOpts{PoolID: s.PoolID, Name: s.Name, Type: s.Type, Delay: s.Delay,
		Timeout: s.Timeout, MaxRetries: s.MaxRetries, MaxRetriesDown: s.MaxRetriesDown, Tags: s.Tags}).Extract()
	return wrap("octavia healthmonitor create", err)
}

func (o *octavia) DeleteMonitor(ctx context.Context, id string) error {
	return wrap("octavia healthmonitor delete", monitors.Delete(ctx, o.c, id).ExtractErr())
}

func (o *octavia) ListMembers(ctx context.Context, poolID string) ([]Member, error) {
	return allPages[Member](ctx, "octavia member list",
		pools.ListMembers(o.c, poolID, pools.ListMembersOpts{Limit: PageSize}), labelled("members"))
}

func (o *octavia) CreateMember(ctx context.Context, poolID string, m MemberSpec) error {
	opts := pools.CreateMemberOpts{Name: m.Name, Address: m.Address, ProtocolPort: m.ProtocolPort, SubnetID: m.SubnetID}
	_, err := pools.CreateMember(ctx, o.c, poolID, opts).Extract()
	return wrap("octavia member create", err)
}

func (o *octavia) DeleteMember(ctx context.Context, poolID, memberID string) error {
	return wrap("octavia member delete", pools.DeleteMember(ctx, o.c, poolID, memberID).ExtractErr())
}

func (o *octavia) ReplaceMembers(ctx context.Context, poolID string, members []MemberSpec) error {
	opts := make([]pools.BatchUpdateMemberOpts, 0, len(members))
	for _, m := range members {
		o := pools.BatchUpdateMemberOpts{Address: m.Address, ProtocolPort: m.ProtocolPort, Name: &m.Name}
		if m.SubnetID != "" {
			o.SubnetID = &m.SubnetID
		}
		opts = append(opts, o)
	}
	return wrap("octavia member batch_update", pools.BatchUpdateMembers(ctx, o.c, poolID, opts).ExtractErr())
}
