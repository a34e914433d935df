package sim_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/sim"
)

func TestListsComeInPages(t *testing.T) {
	for _, tc := range []struct {
		ports, pages int
	}{
		{0, 1},
		{openstack.PortPageSize - 1, 1},
		{openstack.PortPageSize, 1},
		{openstack.PortPageSize + 1, 2},
		{2*openstack.PortPageSize + 50, 3},
	} {
		t.Run(fmt.Sprint(tc.ports), func(t *testing.T) {
			e := start(t, sim.Model{})
			net, _ := e.namespace(t, "big", "10.0.0.0/16")
			made := e.ports(t, net.ID, tc.ports, "raven.cluster=c")
			e.s.Reset()
			for _, f := range []openstack.Filter{{NetworkID: net.ID}, {Tags: []string{"raven.cluster=c"}}} {
				got := must(e.net.ListPorts(t.Context(), f))(t)
				if len(got) != tc.ports {
					t.Fatalf("%+v: listed %d ports, want %d", f, len(got), tc.ports)
				}
				if !slices.IsSortedFunc(got, func(a, b openstack.Port) int { return compare(a.ID, b.ID) }) {
					t.Fatalf("%+v: the ports are not in ID order", f)
				}
				if !slices.Equal(ids(got, portID), ids(made, portID)) {
					t.Fatalf("%+v: the listed ports are not the ports made (none twice)", f)
				}
			}
			st := e.s.Stats()
			if st.Totals.ListCalls != 2 || st.Totals.ListPages != int64(2*tc.pages) || st.Ops["neutron port list"].Items != int64(2*tc.ports) {
				t.Fatalf("2 lists in %d pages (%d ports), want 2 in %d (%d)", st.Totals.ListPages, st.Ops["neutron port list"].Items, 2*tc.pages, 2*tc.ports)
			}
		})
	}
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestPageLinks follows the next links by hand: each holds the query with the marker of the page's last object,
// and the last page has none, on both services.
func TestPageLinks(t *testing.T) {
	e := start(t, sim.Model{})
	net, _ := e.namespace(t, "ns", "10.1.0.0/24")
	e.ports(t, net.ID, 5)
	for i := range 5 {
		e.service(t, fmt.Sprintf("lb-%d", i), "raven.cluster=c")
	}
	for _, tc := range []struct {
		first, key string
		pages, all int
	}{
		{e.neutronURL + "/v2.0/ports?limit=2&network_id=" + net.ID, "ports", 3, 5},
		{e.octURL + "/v2/lbaas/loadbalancers?limit=2&tags=raven.cluster%3Dc", "loadbalancers", 3, 5},
		{e.octURL + "/v2.0/lbaas/listeners?limit=4", "listeners", 3, 10},
		{e.neutronURL + "/v2.0/networks", "networks", 1, 2},
	} {
		t.Run(tc.key, func(t *testing.T) {
			pages, seen, next := 0, []string{}, tc.first
			for next != "" {
				status, body := raw(t, http.MethodGet, next, "")
				if status != http.StatusOK {
					t.Fatalf("GET %s: %d %v", next, status, body)
				}
				pages++
				for _, x := range body[tc.key].([]any) {
					seen = append(seen, x.(map[string]any)["id"].(string))
				}
				next = nextLink(t, body[tc.key+"_links"], tc.first)
			}
			if pages != tc.pages || len(seen) != tc.all || !slices.IsSorted(seen) || len(slices.Compact(slices.Clone(seen))) != tc.all {
				t.Fatalf("%d pages, ids %v; want %d pages of %d ids in order", pages, seen, tc.pages, tc.all)
			}
		})
	}
}

// nextLink is the href of the next link, "" when there is none; it keeps the first URL's filters.
func nextLink(t *testing.T, links any, first string) string {
	t.Helper()
	if links == nil {
		return ""
	}
	l := links.([]any)[0].(map[string]any)
	if l["rel"] != "next" {
		t.Fatalf("link %v", l)
	}
	href := l["href"].(string)
	u, f := must(url.Parse(href))(t), must(url.Parse(first))(t)
	for k, v := range f.Query() {
		if !slices.Equal(u.Query()[k], v) {
			t.Fatalf("next link %s lost %s=%v", href, k, v)
		}
	}
	if u.Query().Get("marker") == "" {
		t.Fatalf("next link %s has no marker", href)
	}
	return href
}
