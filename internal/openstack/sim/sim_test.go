package sim_test

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/sim"
)

// env is a Sim behind two HTTP servers, and Raven's real clients for them.
type env struct {
	s                  *sim.Sim
	net                openstack.Networking
	lb                 openstack.LoadBalancing
	nc, oc             *gophercloud.ServiceClient
	neutronURL, octURL string
	ext                *openstack.Network
}

func start(t testing.TB, m sim.Model) *env {
	t.Helper()
	s := sim.New(m)
	ns, os := httptest.NewServer(s.Neutron()), httptest.NewServer(s.Octavia())
	t.Cleanup(ns.Close)
	t.Cleanup(os.Close)
	ext, err := s.AddExternalNetwork(t.Context(), "public", "172.24.4.0/24")
	if err != nil {
		t.Fatal(err)
	}
	// As internal/openstack's noauthClients makes them: both services under <endpoint>/v2.0/.
	mk := func(srv *httptest.Server) *gophercloud.ServiceClient {
		endpoint := srv.URL + "/"
		return &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()},
			Endpoint: endpoint, ResourceBase: endpoint + "v2.0/"}
	}
	e := &env{s: s, nc: mk(ns), oc: mk(os), neutronURL: ns.URL, octURL: os.URL, ext: ext}
	e.net, e.lb = openstack.NewNetworking(e.nc), openstack.NewLoadBalancing(e.oc)
	return e
}

// namespace is a network with a /24 subnet.
func (e *env) namespace(t *testing.T, name, cidr string) (*openstack.Network, *openstack.Subnet) {
	t.Helper()
	ctx := t.Context()
	n, err := e.net.CreateNetwork(ctx, openstack.NetworkSpec{Name: name, Description: "ns " + name})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := e.net.CreateSubnet(ctx, openstack.SubnetSpec{Name: name, NetworkID: n.ID, CIDR: cidr, EnableDHCP: true})
	if err != nil {
		t.Fatal(err)
	}
	return n, sub
}

// ports makes count ports on the network in bulks of up to 500, tagged with tags.
func (e *env) ports(t *testing.T, network string, count int, tags ...string) []openstack.Port {
	t.Helper()
	var out []openstack.Port
	for len(out) < count {
		specs := make([]openstack.PortSpec, min(500, count-len(out)))
		for i := range specs {
			specs[i] = openstack.PortSpec{NetworkID: network, Name: fmt.Sprintf("p-%d", len(out)+i), Tags: tags}
		}
		ps, err := e.net.CreatePorts(t.Context(), specs)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ps...)
	}
	return out
}

// raw sends a request to a service and returns the status and the decoded body.
func raw(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, url, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode, m
}

func ids[T any](items []T, id func(T) string) []string {
	out := make([]string, 0, len(items))
	for _, x := range items {
		out = append(out, id(x))
	}
	slices.Sort(out)
	return out
}

func portID(p openstack.Port) string { return p.ID }

// must is v, once the test has checked err: must(call())(t).
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func wantKind(t *testing.T, what string, err error, kind openstack.Kind) {
	t.Helper()
	if got := openstack.KindOf(err); got != kind {
		t.Fatalf("%s: %v (%s), want %s", what, err, got, kind)
	}
}

func TestCapabilities(t *testing.T) {
	for _, tc := range []struct {
		name string
		tags bool
	}{{"with tag-ports-during-bulk-creation", true}, {"without", false}} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, sim.Model{})
			e.s.Networking.Lock()
			e.s.Networking.Caps.TagsOnPortCreate = tc.tags
			e.s.Networking.Unlock()
			caps := must(e.net.Capabilities(t.Context()))(t)
			if caps.TagsOnPortCreate != tc.tags {
				t.Fatalf("TagsOnPortCreate %v, want %v", caps.TagsOnPortCreate, tc.tags)
			}
		})
	}
}

// expect fails the test when got is not want.
func expect[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: %+v, want %+v", what, got, want)
	}
}

// steps runs calls that must succeed, in order.
func steps(t *testing.T, calls ...func() error) {
	t.Helper()
	for _, call := range calls {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNetworksAndSubnets(t *testing.T) {
	e := start(t, sim.Model{})
	ctx := t.Context()
	net, sub := e.namespace(t, "ns-a", "10.1.0.0/24")
	got := must(e.net.GetNetwork(ctx, net.ID))(t)
	expect(t, "network", []any{got.Name, got.Subnets}, []any{"ns-a", []string{sub.ID}})
	_, err := e.net.GetNetwork(ctx, "public") // a name is no ID: Raven's findNetwork then lists by name
	wantKind(t, "get by name", err, openstack.KindNotFound)
	found := must(e.net.ListNetworks(ctx, openstack.Filter{Name: "public"}))(t)
	expect(t, "networks named public", ids(found, networkID), []string{e.ext.ID})
	pool := must(e.net.CreateSubnetPool(ctx, openstack.SubnetPoolSpec{Name: "pods", Prefixes: []string{"10.128.0.0/16"}, PrefixLength: 24}))(t)
	pools := must(e.net.ListSubnetPools(ctx, openstack.Filter{Name: "pods"}))(t)
	expect(t, "subnet pools", pools, []openstack.SubnetPool{{ID: pool.ID, Name: "pods", Prefixes: []string{"10.128.0.0/16"}, Tags: []string{}}})
	fromPool := must(e.net.CreateSubnet(ctx, openstack.SubnetSpec{NetworkID: net.ID, SubnetPoolID: pool.ID, PrefixLength: 24}))(t)
	expect(t, "subnet from the pool", []string{fromPool.CIDR, fromPool.SubnetPoolID}, []string{"10.128.0.0/24", pool.ID})
	subs := must(e.net.ListSubnets(ctx, openstack.Filter{NetworkID: net.ID}))(t)
	expect(t, "subnets of the network", ids(subs, func(s openstack.Subnet) string { return s.ID }), ids([]string{sub.ID, fromPool.ID}, same))
	wantKind(t, "pool delete while used", e.net.DeleteSubnetPool(ctx, pool.ID), openstack.KindConflict)
	steps(t, func() error { return e.net.DeleteSubnet(ctx, fromPool.ID) },
		func() error { return e.net.DeleteSubnetPool(ctx, pool.ID) },
		func() error { return e.net.DeleteNetwork(ctx, net.ID) })
	_, err = e.net.GetNetwork(ctx, net.ID)
	wantKind(t, "deleted network", err, openstack.KindNotFound)
	expect(t, "subnets left", len(must(e.net.ListSubnets(ctx, openstack.Filter{}))(t)), 1)
}

func networkID(n openstack.Network) string { return n.ID }

func same(s string) string { return s }

func TestRouters(t *testing.T) {
	e := start(t, sim.Model{})
	ctx := t.Context()
	_, sub := e.namespace(t, "ns-a", "10.1.0.0/24")
	router := must(e.net.CreateRouter(ctx, openstack.RouterSpec{Name: "r", GatewayNetworkID: e.ext.ID}))(t)
	expect(t, "router gateway", router.GatewayNetworkID, e.ext.ID)
	// The list's routers carry the gateway too, though Raven's ListRouters does not read it (gophercloud fills
	// only the embedded Router of each element).
	rs := must(e.net.ListRouters(ctx, openstack.Filter{Name: "r"}))(t)
	expect(t, "routers named r", ids(rs, func(r openstack.Router) string { return r.ID }), []string{router.ID})
	_, body := raw(t, http.MethodGet, e.neutronURL+"/v2.0/routers?name=r", "")
	gw := body["routers"].([]any)[0].(map[string]any)["external_gateway_info"].(map[string]any)
	expect(t, "listed gateway", gw["network_id"], any(e.ext.ID))
	steps(t, func() error { return e.net.AddRouterInterface(ctx, router.ID, sub.ID) })
	wantKind(t, "second interface", e.net.AddRouterInterface(ctx, router.ID, sub.ID), openstack.KindBadRequest)
	ifs := must(e.net.ListPorts(ctx, openstack.Filter{DeviceID: router.ID}))(t)
	expect(t, "router ports", []any{len(ifs), ifs[0].FixedIPs[0].SubnetID, ifs[0].DeviceOwner}, []any{1, sub.ID, "network:router_interface"})
	wantKind(t, "subnet delete with an interface", e.net.DeleteSubnet(ctx, sub.ID), openstack.KindConflict)
	steps(t, func() error { return e.net.RemoveRouterInterface(ctx, router.ID, sub.ID) },
		func() error { return e.net.DeleteRouter(ctx, router.ID) })
	wantKind(t, "interface removed twice", e.net.RemoveRouterInterface(ctx, router.ID, sub.ID), openstack.KindNotFound)
}

// TestAListCarriesOnlyTheFieldsAskedFor checks that a list with fields answers with those attributes of each
// object and keeps them in its next link, as Neutron does.
func TestAListCarriesOnlyTheFieldsAskedFor(t *testing.T) {
	e := start(t, sim.Model{})
	net, _ := e.namespace(t, "ns", "10.1.0.0/24")
	e.ports(t, net.ID, 3, "a")
	status, body := raw(t, "GET", e.neutronURL+"/v2.0/ports?limit=2&fields=id&fields=tags", "")
	if status != 200 {
		t.Fatalf("%d %v", status, body)
	}
	items, _ := body["ports"].([]any)
	if len(items) != 2 {
		t.Fatalf("first page %v, want 2 ports", body)
	}
	for _, it := range items {
		if keys := slices.Sorted(maps.Keys(it.(map[string]any))); !slices.Equal(keys, []string{"id", "tags"}) {
			t.Fatalf("a port listed with fields id and tags carries %v", keys)
		}
	}
	links, _ := body["ports_links"].([]any)
	if len(links) != 1 || !strings.Contains(links[0].(map[string]any)["href"].(string), "fields=id&fields=tags") {
		t.Fatalf("next link %v lost the fields", links)
	}
	if status, body := raw(t, "GET", e.neutronURL+"/v2.0/ports?fields=", ""); status != 400 {
		t.Fatalf("an empty field: %d %v, want 400", status, body)
	}
}

// TestRavensPortListingReadsWhatItUses checks that Raven's port listing, which asks for
// openstack.PortListFields, still reads each port whole enough to find its tags, address and network.
func TestRavensPortListingReadsWhatItUses(t *testing.T) {
	e := start(t, sim.Model{})
	net, _ := e.namespace(t, "ns", "10.1.0.0/24")
	made := e.ports(t, net.ID, 3, "a")
	listed, err := e.net.ListPorts(t.Context(), openstack.Filter{NetworkID: net.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != len(made) {
		t.Fatalf("listed %d ports, want %d", len(listed), len(made))
	}
	for i, p := range listed {
		m := made[i]
		if p.ID != m.ID || !slices.Equal(p.Tags, m.Tags) || p.MACAddress != m.MACAddress || len(p.FixedIPs) != 1 ||
			p.FixedIPs[0] != m.FixedIPs[0] || p.NetworkID != net.ID || p.CreatedAt.IsZero() {
			t.Fatalf("listed %+v, made %+v", p, m)
		}
	}
}
