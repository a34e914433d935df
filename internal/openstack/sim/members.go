package sim

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/raven-net/raven/internal/openstack"
)

func (s *Sim) listMembers(c *call) (reply, error) {
	q, err := parseQuery(c.query)
	if err != nil {
		return reply{}, err
	}
	ms, err := s.LoadBalancing.ListMembers(c.r.Context(), c.ids[0])
	if err != nil {
		return reply{}, err
	}
	id := func(m openstack.Member) string { return m.ID }
	page, more := pageSlice(ms, id, q.Query)
	return c.page("members", views(page, memberOut), len(page), more, lastID(page, id)), nil
}

func (s *Sim) createMember(c *call) (reply, error) {
	var in memberIn
	if err := c.decode("member", &in); err != nil {
		return reply{}, err
	}
	c.items = 1
	ctx, pool := c.r.Context(), c.ids[0]
	if err := s.LoadBalancing.CreateMember(ctx, pool, in.spec()); err != nil {
		return reply{}, err
	}
	ms, err := s.LoadBalancing.ListMembers(ctx, pool)
	if err != nil {
		return reply{}, err
	}
	for _, m := range ms {
		if m.Address == in.Address && m.ProtocolPort == in.ProtocolPort {
			return created(map[string]any{"member": memberOut(m)}), nil
		}
	}
	return reply{}, fmt.Errorf("member %s:%d not found after its create", in.Address, in.ProtocolPort)
}

// replaceMembers is the batch update: the pool's members become the body's.
func (s *Sim) replaceMembers(c *call) (reply, error) {
	m, err := c.fields("members")
	if err != nil {
		return reply{}, err
	}
	var ins []json.RawMessage
	if err := json.Unmarshal(m["members"], &ins); err != nil {
		return reply{}, bad("Invalid input: members must be a list")
	}
	specs := make([]openstack.MemberSpec, 0, len(ins))
	for _, raw := range ins {
		var in memberIn
		if err := strict(raw, &in); err != nil {
			return reply{}, err
		}
		specs = append(specs, in.spec())
	}
	c.items = len(specs)
	if err := s.LoadBalancing.ReplaceMembers(c.r.Context(), c.ids[0], specs); err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusAccepted}, nil
}

func (s *Sim) deleteMember(c *call) (reply, error) {
	return noContent(), s.LoadBalancing.DeleteMember(c.r.Context(), c.ids[0], c.ids[1])
}

type monitorIn struct {
	PoolID         string   `json:"pool_id"`
	Name           string   `json:"name"`
	Type           string   `json:"type"`
	Delay          int      `json:"delay"`
	Timeout        int      `json:"timeout"`
	MaxRetries     int      `json:"max_retries"`
	MaxRetriesDown int      `json:"max_retries_down"`
	Tags           []string `json:"tags"`
	AdminStateUp   *bool    `json:"admin_state_up"`
}

func (s *Sim) createMonitor(c *call) (reply, error) {
	var in monitorIn
	if err := c.decode("healthmonitor", &in); err != nil {
		return reply{}, err
	}
	if in.MaxRetriesDown == 0 {
		in.MaxRetriesDown = 3 // Octavia's default
	}
	c.items = 1
	err := s.LoadBalancing.CreateMonitor(c.r.Context(), openstack.MonitorSpec{PoolID: in.PoolID, Name: in.Name, Type: in.Type, Delay: in.Delay,
		Timeout: in.Timeout, MaxRetries: in.MaxRetries, MaxRetriesDown: in.MaxRetriesDown, Tags: in.Tags})
	if err != nil {
		return reply{}, err
	}
	v := monitorView{Name: in.Name, Type: in.Type, Delay: in.Delay, Timeout: in.Timeout, MaxRetries: in.MaxRetries, MaxRetriesDown: in.MaxRetriesDown,
		AdminStateUp: true, Pools: refs(in.PoolID), Tags: orEmpty(in.Tags)}
	lbID, _ := s.LoadBalancing.Owner(in.PoolID)
	st, _ := s.LoadBalancing.LoadBalancer(lbID)
	if hm, ok := st.Monitors[in.PoolID]; ok {
		v.ID, v.ProvisioningStatus, v.OperatingStatus = hm.ID, hm.ProvisioningStatus, hm.OperatingStatus
	}
	return created(map[string]any{"healthmonitor": v}), nil
}

func (s *Sim) deleteMonitor(c *call) (reply, error) {
	return noContent(), s.LoadBalancing.DeleteMonitor(c.r.Context(), c.ids[0])
}
