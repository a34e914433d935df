package openstack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/common/extensions"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/attributestags"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/external"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/rules"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/subnetpools"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// neutron implements Networking with gophercloud. Results are decoded straight into Raven's types,
// whose JSON tags follow Neutron's API.
type neutron struct {
	c *gophercloud.ServiceClient
	// project is the project of Raven's token ("" without Keystone).
	project string
}

// NewNetworking wraps a gophercloud network service client that belongs to no project (Neutron without
// Keystone).
func NewNetworking(c *gophercloud.ServiceClient) Networking { return &neutron{c: c} }

// NewProjectNetworking wraps a gophercloud network service client whose token is scoped to project.
func NewProjectNetworking(c *gophercloud.ServiceClient, project string) Networking {
	return &neutron{c: c, project: project}
}

func (n *neutron) ProjectID() string { return n.project }

func tagsQuery(tags []string) string { return strings.Join(tags, ",") }

// body is a request body that gophercloud's *OptsBuilder interfaces accept as is.
type body map[string]any

func (b body) ToPortCreateMap() (map[string]any, error)       { return b, nil }
func (b body) ToNetworkCreateMap() (map[string]any, error)    { return b, nil }
func (b body) ToSubnetCreateMap() (map[string]any, error)     { return b, nil }
func (b body) ToSubnetPoolCreateMap() (map[string]any, error) { return b, nil }
func (b body) ToRouterCreateMap() (map[string]any, error)     { return b, nil }
func (b body) ToFloatingIPCreateMap() (map[string]any, error) { return b, nil }

// update is a request body for gophercloud's Update calls, which also read headers from a struct.
type update struct{ body body }

func (u update) ToPortUpdateMap() (map[string]any, error)       { return u.body, nil }
func (u update) ToFloatingIPUpdateMap() (map[string]any, error) { return u.body, nil }

func (n *neutron) Capabilities(ctx context.Context) (Capabilities, error) {
	var caps Capabilities
	_, err := extensions.Get(ctx, n.c, "tag-ports-during-bulk-creation").Extract()
	switch {
	case err == nil:
		caps.TagsOnPortCreate = true
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
	default:
		return caps, wrap("neutron extensions get", err)
	}
	return caps, nil
}

// PageSize is the number of objects Raven asks for in one page of a list: a cluster's tens of thousands of
// ports come in pages, never in one response that the server must build and Raven decode whole.
const PageSize = 1000

// PortPageSize is the page of a port list. Neutron spends most of a port list on each port (1.67 ms a port on
// the calibrated ML2/OVN stack, bench/results/scale/calibration.md), and a page holds one of its API workers
// that long: pages of 1,000 held one for 1.7 s, and a resync's listing at 50,000 pods pushed a pod's port
// create behind it (the churn p99 of 1.8 s in the scale run of 2026-11-29 13:37 UTC). Pages of 200 hold a
// worker for about 0.35 s, for 18 ms more per page.
const PortPageSize = 200

// PortListFields are the attributes a port listing asks Neutron for: those of Port that Raven reads. Neutron
// loads, checks and encodes only what a listing asks for, so whole ports (more attributes on the 2025.1 ML2/OVN
// stack) cost it more: 986 against 905 ms for 521 ports (bench/results/scale/calibration-fields). A port read
// alone (GetPort) still comes whole.
var PortListFields = []string{"id", "name", "network_id", "project_id", "mac_address", "fixed_ips", "status",
	"admin_state_up", "device_owner", "device_id", "security_groups", "tags", "description", "created_at",
	"updated_at", "binding:host_id", "binding:vif_type", "binding:vif_details"}

func allPages[T any](ctx context.Context, op string, pager pagination.Pager, extract func(pagination.Page, any) error) ([]T, error) {
	var out []T
	err := pager.EachPage(ctx, func(_ context.Context, page pagination.Page) (bool, error) {
		var items []T
		if err := extract(page, &items); err != nil {
			return false, err
		}
		out = append(out, items...)
		return true, nil
	})
	return out, wrap(op, err)
}

func (n *neutron) ListNetworks(ctx context.Context, f Filter) ([]Network, error) {
	var opts networks.ListOptsBuilder = networks.ListOpts{Limit: PageSize, ProjectID: f.ProjectID, Name: f.Name, Description: f.Description, Tags: tagsQuery(f.Tags)}
	if f.External {
		opts = external.ListOptsExt{ListOptsBuilder: opts, External: &f.External}
	}
	q, err := opts.ToNetworkListQuery()
	if err != nil {
		return nil, wrap("neutron network list", err)
	}
	return listOnce[Network](ctx, "neutron network list", n.c, n.c.ServiceURL("networks")+q, "networks")
}

func (n *neutron) GetNetwork(ctx context.Context, id string) (*Network, error) {
	out := new(Network)
	err := networks.Get(ctx, n.c, id).ExtractInto(out)
	return out, wrap("neutron network get", err)
}

func (n *neutron) CreateNetwork(ctx context.Context, s NetworkSpec) (*Network, error) {
	out := new(Network)
	b := body{"network": map[string]any{"name": s.Name, "description": s.Description, "admin_state_up": true}}
	if err := networks.Create(ctx, n.c, b).ExtractInto(out); err != nil {
		return nil, wrap("neutron network create", err)
	}
	return out, nil
}

func (n *neutron) DeleteNetwork(ctx context.Context, id string) error {
	return wrap("neutron network delete", networks.Delete(ctx, n.c, id).ExtractErr())
}

func (n *neutron) ListSubnets(ctx context.Context, f Filter) ([]Subnet, error) {
	q, err := subnets.ListOpts{Limit: PageSize, NetworkID: f.NetworkID, ProjectID: f.ProjectID, Name: f.Name, Description: f.Description, Tags: tagsQuery(f.Tags)}.ToSubnetListQuery()
	if err != nil {
		return nil, wrap("neutron subnet list", err)
	}
	return listOnce[Subnet](ctx, "neutron subnet list", n.c, n.c.ServiceURL("subnets")+q, "subnets")
}

func (n *neutron) CreateSubnet(ctx context.Context, s SubnetSpec) (*Subnet, error) {
	m := map[string]any{"network_id": s.NetworkID, "ip_version": 4, "name": s.Name, "description": s.Description, "enable_dhcp": s.EnableDHCP}
	if s.CIDR != "" {
		m["cidr"] = s.CIDR
	}
	if s.SubnetPoolID != "" {
		m["subnetpool_id"] = s.SubnetPoolID
		if s.PrefixLength > 0 {
			m["prefixlen"] = s.PrefixLength
		}
	}
	if s.GatewayIP != "" {
		m["gateway_ip"] = s.GatewayIP
	}
	if len(s.AllocationPools) > 0 {
		m["allocation_pools"] = s.AllocationPools
	}
	var r struct {
		Subnet *Subnet `json:"subnet"`
	}
	if err := subnets.Create(ctx, n.c, body{"subnet": m}).ExtractInto(&r); err != nil {
		return nil, wrap("neutron subnet create", err)
	}
	return r.Subnet, nil
}

func (n *neutron) DeleteSubnet(ctx context.Context, id string) error {
	return wrap("neutron subnet delete", subnets.Delete(ctx, n.c, id).ExtractErr())
}

func (n *neutron) ListSubnetPools(ctx context.Context, f Filter) ([]SubnetPool, error) {
	return allPages[SubnetPool](ctx, "neutron subnetpool list",
		subnetpools.List(n.c, subnetpools.ListOpts{Limit: PageSize, ID: f.ID, ProjectID: f.ProjectID, Name: f.Name, Description: f.Description, Tags: tagsQuery(f.Tags)}), labelled("subnetpools"))
}

func (n *neutron) CreateSubnetPool(ctx context.Context, s SubnetPoolSpec) (*SubnetPool, error) {
	var r struct {
		SubnetPool *SubnetPool `json:"subnetpool"`
	}
	b := body{"subnetpool": map[string]any{"name": s.Name, "description": s.Description, "prefixes": s.Prefixes,
		"default_prefixlen": s.PrefixLength}}
	if err := subnetpools.Create(ctx, n.c, b).ExtractInto(&r); err != nil {
		return nil, wrap("neutron subnetpool create", err)
	}
	return r.SubnetPool, nil
}

func (n *neutron) DeleteSubnetPool(ctx context.Context, id string) error {
	return wrap("neutron subnetpool delete", subnetpools.Delete(ctx, n.c, id).ExtractErr())
}

// routerJSON carries the gateway the way Neutron encodes it.
type routerJSON struct {
	Router
	Gateway *struct {
		NetworkID string `json:"network_id"`
	} `json:"external_gateway_info"`
}

func (r routerJSON) router() Router {
	out := r.Router
	if r.Gateway != nil {
		out.GatewayNetworkID = r.Gateway.NetworkID
	}
	return out
}

func (n *neutron) ListRouters(ctx context.Context, f Filter) ([]Router, error) {
	raw, err := allPages[routerJSON](ctx, "neutron router list",
		routers.List(n.c, routers.ListOpts{Limit: PageSize, ProjectID: f.ProjectID, Name: f.Name, Description: f.Description, Tags: tagsQuery(f.Tags)}), routers.ExtractRoutersInto)
	out := make([]Router, 0, len(raw))
	for _, r := range raw {
		out = append(out, r.router())
	}
	return out, err
}

func (n *neutron) CreateRouter(ctx context.Context, s RouterSpec) (*Router, error) {
	m := map[string]any{"name": s.Name, "description": s.Description}
	if s.GatewayNetworkID != "" {
		m["external_gateway_info"] = map[string]any{"network_id": s.GatewayNetworkID}
	}
	var r struct {
		Router routerJSON `json:"router"`
	}
	if err := routers.Create(ctx, n.c, body{"router": m}).ExtractInto(&r); err != nil {
		return nil, wrap("neutron router create", err)
	}
	out := r.Router.router()
	return &out, nil
}

func (n *neutron) DeleteRouter(ctx context.Context, id string) error {
	return wrap("neutron router delete", routers.Delete(ctx, n.c, id).ExtractErr())
}

func (n *neutron) AddRouterInterface(ctx context.Context, routerID, subnetID string) error {
	_, err := routers.AddInterface(ctx, n.c, routerID, routers.AddInterfaceOpts{SubnetID: subnetID}).Extract()
	return wrap("neutron router add_interface", err)
}

func (n *neutron) RemoveRouterInterface(ctx context.Context, routerID, subnetID string) error {
	_, err := routers.RemoveInterface(ctx, n.c, routerID, routers.RemoveInterfaceOpts{SubnetID: subnetID}).Extract()
	return wrap("neutron router remove_interface", err)
}

func (n *neutron) ListPorts(ctx context.Context, f Filter) ([]Port, error) {
	var out []Port
	err := n.EachPortPage(ctx, f, func(page []Port) { out = append(out, page...) })
	return out, err
}

func (n *neutron) EachPortPage(ctx context.Context, f Filter, fn func([]Port)) error {
	q, err := ports.ListOpts{Limit: PortPageSize, NetworkID: f.NetworkID, ProjectID: f.ProjectID, DeviceID: f.DeviceID, DeviceOwner: f.DeviceOwner, Name: f.Name,
		Description: f.Description, Tags: tagsQuery(f.Tags), NotTagsAny: tagsQuery(f.NotTagsAny)}.ToPortListQuery()
	if err != nil {
		return wrap("neutron port list", err)
	}
	q += "&" + url.Values{"fields": PortListFields}.Encode()
	if f.NetworkIDs == nil {
		return pagesOnce(ctx, "neutron port list", n.c, n.c.ServiceURL("ports")+q, "ports", fn)
	}
	// Neutron keeps the ports on any of a repeated filter's values; a few at a time keep the URL short.
	for ids := range slices.Chunk(f.NetworkIDs, IDsPerQuery) {
		nq := q + "&" + url.Values{"network_id": ids}.Encode()
		if err := pagesOnce(ctx, "neutron port list", n.c, n.c.ServiceURL("ports")+nq, "ports", fn); err != nil {
			return err
		}
	}
	return nil
}

// IDsPerQuery is how many values of one filter a list request carries (network_id, port_id): 100 UUIDs keep
// its URL under 5 kB, within what every web server in front of Neutron takes.
const IDsPerQuery = 100

// listOnce reads every page of a list as pagesOnce does, into one slice: the namespace networks and their
// subnets, one of each per namespace, are listed at every resync.
func listOnce[T any](ctx context.Context, op string, c *gophercloud.ServiceClient, url, label string) ([]T, error) {
	var out []T
	err := pagesOnce(ctx, op, c, url, label, func(page []T) { out = append(out, page...) })
	return out, err
}

// pagesOnce follows a list's pages from url as gophercloud's pager does, by each page's "next" link, but
// decodes each page once, straight into T, and hands it to fn. The pager decodes a page into generic maps,
// then again for its emptiness check and again for the caller: for a cluster's ports, listed whole at every
// resync, that was most of the listing's CPU.
func pagesOnce[T any](ctx context.Context, op string, c *gophercloud.ServiceClient, url, label string, fn func([]T)) error {
	for url != "" {
		var page map[string]json.RawMessage
		if _, err := c.Get(ctx, url, &page, &gophercloud.RequestOpts{OkCodes: []int{http.StatusOK}}); err != nil {
			return wrap(op, err)
		}
		var items []T
		if raw, ok := page[label]; ok {
			if err := json.Unmarshal(raw, &items); err != nil {
				return wrap(op, err)
			}
		}
		fn(items)
		url = ""
		var links []struct{ Href, Rel string }
		if raw, ok := page[label+"_links"]; ok && len(items) > 0 {
			if err := json.Unmarshal(raw, &links); err != nil {
				return wrap(op, err)
			}
		}
		for _, l := range links {
			if l.Rel == "next" {
				url = l.Href
			}
		}
	}
	return nil
}

func (n *neutron) GetPort(ctx context.Context, id string) (*Port, error) {
	out := new(Port)
	err := ports.Get(ctx, n.c, id).ExtractInto(out)
	return out, wrap("neutron port get", err)
}

func portBody(s PortSpec) map[string]any {
	m := map[string]any{
		"network_id":   s.NetworkID,
		"name":         s.Name,
		"device_owner": s.DeviceOwner,
		"device_id":    s.DeviceID,
		"description":  s.Description,
	}
	if s.SubnetID != "" || s.IPAddress != "" {
		ip := map[string]any{}
		if s.SubnetID != "" {
			ip["subnet_id"] = s.SubnetID
		}
		if s.IPAddress != "" {
			ip["ip_address"] = s.IPAddress
		}
		m["fixed_ips"] = []any{ip}
	}
	if len(s.Tags) > 0 {
		m["tags"] = s.Tags
	}
	if s.HostID != "" {
		m["binding:host_id"] = s.HostID
	}
	if s.MACAddress != "" {
		m["mac_address"] = s.MACAddress
	}
	if s.SecurityGroups != nil {
		m["security_groups"] = s.SecurityGroups
	}
	return m
}

func (n *neutron) CreatePort(ctx context.Context, s PortSpec) (*Port, error) {
	out := new(Port)
	if err := ports.Create(ctx, n.c, body{"port": portBody(s)}).ExtractInto(out); err != nil {
		return nil, wrap("neutron port create", err)
	}
	return out, nil
}

func (n *neutron) CreatePorts(ctx context.Context, specs []PortSpec) ([]Port, error) {
	items := make([]map[string]any, 0, len(specs))
	for _, s := range specs {
		items = append(items, portBody(s))
	}
	var r struct {
		Ports []Port `json:"ports"`
	}
	_, err := n.c.Post(ctx, n.c.ServiceURL("ports"), map[string]any{"ports": items}, &r, &gophercloud.RequestOpts{OkCodes: []int{201}})
	if err != nil {
		return nil, wrap("neutron port bulk_create", err)
	}
	return r.Ports, nil
}

func (n *neutron) UpdatePort(ctx context.Context, id string, u PortUpdate) (*Port, error) {
	m := map[string]any{}
	if u.Name != nil {
		m["name"] = *u.Name
	}
	if u.DeviceID != nil {
		m["device_id"] = *u.DeviceID
	}
	if u.HostID != nil {
		m["binding:host_id"] = *u.HostID
	}
	if u.SecurityGroups != nil {
		m["security_groups"] = *u.SecurityGroups
	}
	out := new(Port)
	if err := ports.Update(ctx, n.c, id, update{body{"port": m}}).ExtractInto(out); err != nil {
		return nil, wrap("neutron port update", err)
	}
	return out, nil
}

func (n *neutron) DeletePort(ctx context.Context, id string) error {
	return wrap("neutron port delete", ports.Delete(ctx, n.c, id).ExtractErr())
}

func (n *neutron) ListFloatingIPs(ctx context.Context, f Filter) ([]FloatingIP, error) {
	return allPages[FloatingIP](ctx, "neutron floatingip list",
		floatingips.List(n.c, floatingips.ListOpts{Limit: PageSize, ProjectID: f.ProjectID, Description: f.Description, Tags: tagsQuery(f.Tags)}), floatingips.ExtractFloatingIPsInto)
}

func (n *neutron) CreateFloatingIP(ctx context.Context, s FloatingIPSpec) (*FloatingIP, error) {
	m := map[string]any{"floating_network_id": s.FloatingNetworkID, "description": s.Description}
	if s.FloatingIP != "" {
		m["floating_ip_address"] = s.FloatingIP
	}
	if s.PortID != "" {
		m["port_id"] = s.PortID
	}
	out := new(FloatingIP)
	if err := floatingips.Create(ctx, n.c, body{"floatingip": m}).ExtractInto(out); err != nil {
		return nil, wrap("neutron floatingip create", err)
	}
	return out, nil
}

func (n *neutron) UpdateFloatingIPPort(ctx context.Context, id, portID string) (*FloatingIP, error) {
	var port any
	if portID != "" {
		port = portID
	}
	out := new(FloatingIP)
	err := floatingips.Update(ctx, n.c, id, update{body{"floatingip": map[string]any{"port_id": port}}}).ExtractInto(out)
	return out, wrap("neutron floatingip update", err)
}

func (n *neutron) DeleteFloatingIP(ctx context.Context, id string) error {
	return wrap("neutron floatingip delete", floatingips.Delete(ctx, n.c, id).ExtractErr())
}

func (n *neutron) ListSecurityGroups(ctx context.Context, f Filter) ([]SecurityGroup, error) {
	return allPages[SecurityGroup](ctx, "neutron security_group list",
		groups.List(n.c, groups.ListOpts{Limit: PageSize, ProjectID: f.ProjectID, Name: f.Name, Description: f.Description, Tags: tagsQuery(f.Tags)}), labelled("security_groups"))
}

func (b body) ToSecGroupCreateMap() (map[string]any, error)     { return b, nil }
func (b body) ToSecGroupRuleCreateMap() (map[string]any, error) { return b, nil }

func (n *neutron) CreateSecurityGroup(ctx context.Context, s SecurityGroupSpec) (*SecurityGroup, error) {
	var r struct {
		Group *SecurityGroup `json:"security_group"`
	}
	b := body{"security_group": map[string]any{"name": s.Name, "description": s.Description}}
	if err := groups.Create(ctx, n.c, b).ExtractInto(&r); err != nil {
		return nil, wrap("neutron security_group create", err)
	}
	return r.Group, nil
}

func (n *neutron) UpdateSecurityGroup(ctx context.Context, id string, s SecurityGroupSpec) error {
	_, err := groups.Update(ctx, n.c, id, groups.UpdateOpts{Name: s.Name, Description: &s.Description}).Extract()
	return wrap("neutron security_group update", err)
}

func (n *neutron) DeleteSecurityGroup(ctx context.Context, id string) error {
	return wrap("neutron security_group delete", groups.Delete(ctx, n.c, id).ExtractErr())
}

// ruleBody is a rule as Neutron's create takes it: empty fields left out, a port range only when set.
func ruleBody(rule SecurityGroupRule) map[string]any {
	m := map[string]any{"security_group_id": rule.SecurityGroupID, "direction": rule.Direction, "ethertype": rule.EtherType}
	for k, v := range map[string]string{"protocol": rule.Protocol, "remote_ip_prefix": rule.RemoteIPPrefix,
		"remote_group_id": rule.RemoteGroupID, "description": rule.Description} {
		if v != "" {
			m[k] = v
		}
	}
	if rule.PortRangeMin > 0 {
		m["port_range_min"], m["port_range_max"] = rule.PortRangeMin, rule.PortRangeMax
	}
	return m
}

func (n *neutron) CreateSecurityGroupRule(ctx context.Context, rule SecurityGroupRule) (*SecurityGroupRule, error) {
	var r struct {
		Rule *SecurityGroupRule `json:"security_group_rule"`
	}
	if err := rules.Create(ctx, n.c, body{"security_group_rule": ruleBody(rule)}).ExtractInto(&r); err != nil {
		return nil, wrap("neutron security_group_rule create", err)
	}
	return r.Rule, nil
}

func (n *neutron) CreateSecurityGroupRules(ctx context.Context, rs []SecurityGroupRule) ([]SecurityGroupRule, error) {
	list := make([]map[string]any, 0, len(rs))
	for _, rule := range rs {
		list = append(list, ruleBody(rule))
	}
	var r struct {
		Rules []SecurityGroupRule `json:"security_group_rules"`
	}
	if err := rules.Create(ctx, n.c, body{"security_group_rules": list}).ExtractInto(&r); err != nil {
		return nil, wrap("neutron security_group_rule bulk_create", err)
	}
	return r.Rules, nil
}

func (n *neutron) DeleteSecurityGroupRule(ctx context.Context, id string) error {
	return wrap("neutron security_group_rule delete", rules.Delete(ctx, n.c, id).ExtractErr())
}

func (n *neutron) ReplaceTags(ctx context.Context, r Resource, id string, tags []string) error {
	if len(tags) == 0 {
		return nil
	}
	_, err := attributestags.ReplaceAll(ctx, n.c, string(r), id, attributestags.ReplaceAllOpts{Tags: tags}).Extract()
	if err != nil {
		return wrap(fmt.Sprintf("neutron %s tag", strings.TrimSuffix(string(r), "s")), err)
	}
	return nil
}
