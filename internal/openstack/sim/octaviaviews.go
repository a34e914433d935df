package sim

import (
	"net/http"
	"time"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
)

// The views render the fake's load balancers as Octavia does: children as lists of {"id": …}, unset IDs as
// null, timestamps to the second without a zone.

// octaviaFault is Octavia's error body.
func octaviaFault(status int, msg string) any {
	code := "Client"
	if status >= http.StatusInternalServerError {
		code = "Server"
	}
	return map[string]any{"faultcode": code, "faultstring": msg, "debuginfo": nil}
}

func octaviaTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format("2006-01-02T15:04:05")
	return &s
}

type idRef struct {
	ID string `json:"id"`
}

func refs(ids ...string) []idRef {
	out := make([]idRef, 0, len(ids))
	for _, id := range ids {
		if id != "" {
			out = append(out, idRef{id})
		}
	}
	return out
}

type lbView struct {
	ID                 string   `json:"id"`
	Name               string   `json:"name"`
	Description        string   `json:"description"`
	VipAddress         string   `json:"vip_address"`
	VipPortID          string   `json:"vip_port_id"`
	VipSubnetID        *string  `json:"vip_subnet_id"`
	ProvisioningStatus string   `json:"provisioning_status"`
	OperatingStatus    string   `json:"operating_status"`
	Provider           string   `json:"provider"`
	AdminStateUp       bool     `json:"admin_state_up"`
	ProjectID          string   `json:"project_id"`
	Listeners          []idRef  `json:"listeners"`
	Pools              []idRef  `json:"pools"`
	Tags               []string `json:"tags"`
	CreatedAt          *string  `json:"created_at"`
	UpdatedAt          *string  `json:"updated_at"`
}

func lbOut(st fake.LoadBalancerState) lbView {
	lb := st.LoadBalancer
	v := lbView{ID: lb.ID, Name: lb.Name, Description: lb.Description, VipAddress: lb.VipAddress, VipPortID: lb.VipPortID,
		VipSubnetID: nullable(lb.VipSubnetID), ProvisioningStatus: lb.ProvisioningStatus, OperatingStatus: lb.OperatingStatus,
		Provider: lb.Provider, AdminStateUp: true, Listeners: []idRef{}, Pools: []idRef{}, Tags: orEmpty(lb.Tags),
		CreatedAt: octaviaTime(lb.CreatedAt.Time), UpdatedAt: octaviaTime(lb.UpdatedAt.Time)}
	for _, l := range st.Listeners {
		v.Listeners = append(v.Listeners, idRef{l.ID})
	}
	for _, p := range st.Pools {
		v.Pools = append(v.Pools, idRef{p.ID})
	}
	return v
}

type listenerView struct {
	ID                 string            `json:"id"`
	Name               string            `json:"name"`
	Description        string            `json:"description"`
	Protocol           string            `json:"protocol"`
	ProtocolPort       int               `json:"protocol_port"`
	DefaultPoolID      *string           `json:"default_pool_id"`
	ProvisioningStatus string            `json:"provisioning_status"`
	OperatingStatus    string            `json:"operating_status"`
	AdminStateUp       bool              `json:"admin_state_up"`
	ConnectionLimit    int               `json:"connection_limit"`
	LoadBalancers      []idRef           `json:"loadbalancers"`
	L7Policies         []idRef           `json:"l7policies"`
	InsertHeaders      map[string]string `json:"insert_headers"`
	Tags               []string          `json:"tags"`
}

func listenerOut(l openstack.Listener, lbID string) listenerView {
	return listenerView{ID: l.ID, Name: l.Name, Protocol: l.Protocol, ProtocolPort: l.ProtocolPort, DefaultPoolID: nullable(l.DefaultPoolID),
		ProvisioningStatus: l.ProvisioningStatus, OperatingStatus: operating(l.ProvisioningStatus), AdminStateUp: true, ConnectionLimit: -1,
		LoadBalancers: refs(lbID), L7Policies: []idRef{}, InsertHeaders: map[string]string{}, Tags: orEmpty(l.Tags)}
}

// operating is the operating status of a child in this provisioning status.
func operating(provisioning string) string {
	if provisioning == "ACTIVE" {
		return "ONLINE"
	}
	return "OFFLINE"
}

type poolView struct {
	ID                 string                        `json:"id"`
	Name               string                        `json:"name"`
	Description        string                        `json:"description"`
	Protocol           string                        `json:"protocol"`
	LBAlgorithm        string                        `json:"lb_algorithm"`
	SessionPersistence *openstack.SessionPersistence `json:"session_persistence"`
	HealthMonitorID    *string                       `json:"healthmonitor_id"`
	ProvisioningStatus string                        `json:"provisioning_status"`
	OperatingStatus    string                        `json:"operating_status"`
	AdminStateUp       bool                          `json:"admin_state_up"`
	Listeners          []idRef                       `json:"listeners"`
	LoadBalancers      []idRef                       `json:"loadbalancers"`
	Members            []idRef                       `json:"members"`
	Tags               []string                      `json:"tags"`
}

func poolOut(p openstack.Pool, lbID string, members []openstack.Member) poolView {
	v := poolView{ID: p.ID, Name: p.Name, Protocol: p.Protocol, LBAlgorithm: p.LBAlgorithm, SessionPersistence: p.SessionPersistence,
		HealthMonitorID: nullable(p.MonitorID), ProvisioningStatus: p.ProvisioningStatus, OperatingStatus: operating(p.ProvisioningStatus),
		AdminStateUp: true, Listeners: []idRef{}, LoadBalancers: refs(lbID), Members: []idRef{}, Tags: orEmpty(p.Tags)}
	for _, l := range p.Listeners {
		v.Listeners = append(v.Listeners, idRef{l.ID})
	}
	for _, m := range members {
		v.Members = append(v.Members, idRef{m.ID})
	}
	return v
}

type memberView struct {
	ID                 string   `json:"id"`
	Name               string   `json:"name"`
	Address            string   `json:"address"`
	ProtocolPort       int      `json:"protocol_port"`
	SubnetID           *string  `json:"subnet_id"`
	ProvisioningStatus string   `json:"provisioning_status"`
	OperatingStatus    string   `json:"operating_status"`
	AdminStateUp       bool     `json:"admin_state_up"`
	Weight             int      `json:"weight"`
	Backup             bool     `json:"backup"`
	MonitorAddress     *string  `json:"monitor_address"`
	MonitorPort        *int     `json:"monitor_port"`
	Tags               []string `json:"tags"`
}

func memberOut(m openstack.Member) memberView {
	return memberView{ID: m.ID, Name: m.Name, Address: m.Address, ProtocolPort: m.ProtocolPort, SubnetID: nullable(m.SubnetID),
		ProvisioningStatus: m.ProvisioningStatus, OperatingStatus: "NO_MONITOR", AdminStateUp: true, Weight: 1, Tags: []string{}}
}

type monitorView struct {
	ID                 string   `json:"id"`
	Name               string   `json:"name"`
	Type               string   `json:"type"`
	Delay              int      `json:"delay"`
	Timeout            int      `json:"timeout"`
	MaxRetries         int      `json:"max_retries"`
	MaxRetriesDown     int      `json:"max_retries_down"`
	ProvisioningStatus string   `json:"provisioning_status"`
	OperatingStatus    string   `json:"operating_status"`
	AdminStateUp       bool     `json:"admin_state_up"`
	Pools              []idRef  `json:"pools"`
	Tags               []string `json:"tags"`
}

// statusTree is the body of GET /loadbalancers/{id}/status.
type statusTree struct {
	Statuses struct {
		LoadBalancer statusLB `json:"loadbalancer"`
	} `json:"statuses"`
}

type statusLB struct {
	ID                 string           `json:"id"`
	Name               string           `json:"name"`
	ProvisioningStatus string           `json:"provisioning_status"`
	OperatingStatus    string           `json:"operating_status"`
	Listeners          []statusListener `json:"listeners"`
}

type statusListener struct {
	ID                 string       `json:"id"`
	Name               string       `json:"name"`
	ProvisioningStatus string       `json:"provisioning_status"`
	OperatingStatus    string       `json:"operating_status"`
	Pools              []statusPool `json:"pools"`
}

type statusPool struct {
	ID                 string         `json:"id"`
	Name               string         `json:"name"`
	ProvisioningStatus string         `json:"provisioning_status"`
	OperatingStatus    string         `json:"operating_status"`
	Members            []statusMember `json:"members"`
	HealthMonitor      *statusMonitor `json:"health_monitor,omitempty"`
}

type statusMember struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Address            string `json:"address"`
	ProtocolPort       int    `json:"protocol_port"`
	ProvisioningStatus string `json:"provisioning_status"`
	OperatingStatus    string `json:"operating_status"`
}

type statusMonitor struct {
	ID                 string `json:"id"`
	Type               string `json:"type"`
	ProvisioningStatus string `json:"provisioning_status"`
	OperatingStatus    string `json:"operating_status"`
}

// statusOut is a load balancer's status tree: its listeners, the pool of each, the pool's members and health
// monitor, with the members and monitors tree gives (the fake's LoadBalancerStatus).
func statusOut(st fake.LoadBalancerState, tree openstack.StatusTree) statusTree {
	var out statusTree
	lb := statusLB{ID: st.ID, Name: st.Name, ProvisioningStatus: st.ProvisioningStatus, OperatingStatus: st.OperatingStatus, Listeners: []statusListener{}}
	for _, l := range st.Listeners {
		sl := statusListener{ID: l.ID, Name: l.Name, ProvisioningStatus: l.ProvisioningStatus, OperatingStatus: operating(l.ProvisioningStatus), Pools: []statusPool{}}
		for _, p := range st.Pools {
			if p.ListenerID == l.ID {
				sl.Pools = append(sl.Pools, statusPoolOut(p, tree))
			}
		}
		lb.Listeners = append(lb.Listeners, sl)
	}
	out.Statuses.LoadBalancer = lb
	return out
}

func statusPoolOut(p openstack.Pool, tree openstack.StatusTree) statusPool {
	sp := statusPool{ID: p.ID, Name: p.Name, ProvisioningStatus: p.ProvisioningStatus, OperatingStatus: operating(p.ProvisioningStatus), Members: []statusMember{}}
	for _, m := range tree.Members[p.ID] {
		sp.Members = append(sp.Members, statusMember{ID: m.ID, Name: m.Name, Address: m.Address, ProtocolPort: m.ProtocolPort,
			ProvisioningStatus: m.ProvisioningStatus, OperatingStatus: "NO_MONITOR"})
	}
	if hm, ok := tree.Monitors[p.ID]; ok {
		sp.HealthMonitor = &statusMonitor{ID: hm.ID, Type: hm.Type, ProvisioningStatus: hm.ProvisioningStatus, OperatingStatus: hm.OperatingStatus}
	}
	return sp
}
