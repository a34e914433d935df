package openstack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
)

// pagedPorts serves n ports in pages of the requested limit, as Neutron does, and records each page's limit.
func pagedPorts(t *testing.T, n int, limits *[]string) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("marker") == "" && (q.Get("network_id") != "n" || q.Get("tags") != "a,b") {
			t.Errorf("the first page's query %q lost the filter", r.URL.RawQuery)
		}
		if q.Get("marker") == "" && !slices.Equal(q["fields"], PortListFields) {
			t.Errorf("the first page asked for the fields %q, want %q", q["fields"], PortListFields)
		}
		*limits = append(*limits, q.Get("limit"))
		limit, err := strconv.Atoi(q.Get("limit"))
		if err != nil || limit <= 0 {
			limit = n
		}
		start := 0
		if m := q.Get("marker"); m != "" {
			start, _ = strconv.Atoi(m)
			start++
		}
		end := min(start+limit, n)
		page := map[string]any{}
		items := make([]map[string]any, 0, end-start)
		for i := start; i < end; i++ {
			items = append(items, map[string]any{"id": fmt.Sprintf("%06d", i)})
		}
		page["ports"] = items
		if end < n {
			page["ports_links"] = []map[string]string{{"rel": "next",
				"href": fmt.Sprintf("http://%s/v2.0/ports?limit=%d&marker=%06d", r.Host, limit, end-1)}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(page)
	}))
}

func TestListsComeInPages(t *testing.T) {
	for _, tc := range []struct {
		ports, pages int
	}{
		{0, 1},
		{PortPageSize - 1, 1},
		{PortPageSize, 1},
		{2*PortPageSize + 50, 3},
	} {
		t.Run(strconv.Itoa(tc.ports), func(t *testing.T) {
			var limits []string
			srv := pagedPorts(t, tc.ports, &limits)
			defer srv.Close()
			c := &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()},
				Endpoint: srv.URL + "/", ResourceBase: srv.URL + "/v2.0/"}
			got, err := NewNetworking(c).ListPorts(t.Context(), Filter{NetworkID: "n", Tags: []string{"a", "b"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.ports {
				t.Fatalf("listed %d ports, want %d", len(got), tc.ports)
			}
			seen := map[string]bool{}
			for _, p := range got {
				if seen[p.ID] {
					t.Fatalf("port %s listed twice", p.ID)
				}
				seen[p.ID] = true
			}
			for _, l := range limits {
				if l != strconv.Itoa(PortPageSize) {
					t.Fatalf("a page asked for limit=%q, want %d", l, PortPageSize)
				}
			}
			if tc.ports > 0 && len(limits) < tc.pages {
				t.Fatalf("%d requests, want at least %d pages", len(limits), tc.pages)
			}
		})
	}
}

func TestAPageThatIsNotJSONFailsTheList(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ports": [{"id": 1}]}`))
	}))
	defer srv.Close()
	c := &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()},
		Endpoint: srv.URL + "/", ResourceBase: srv.URL + "/v2.0/"}
	if got, err := NewNetworking(c).ListPorts(t.Context(), Filter{}); err == nil {
		t.Fatalf("a port whose id is a number was listed: %+v", got)
	}
}

// TestEachPortPageHandsOverEachPage checks that a listing reaches its caller page by page, each page once, in
// order, and never more than a page at a time.
func TestEachPortPageHandsOverEachPage(t *testing.T) {
	var limits []string
	const n = 2*PortPageSize + 50
	srv := pagedPorts(t, n, &limits)
	defer srv.Close()
	c := &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()},
		Endpoint: srv.URL + "/", ResourceBase: srv.URL + "/v2.0/"}
	var sizes []int
	next := 0
	err := NewNetworking(c).EachPortPage(t.Context(), Filter{NetworkID: "n", Tags: []string{"a", "b"}}, func(page []Port) {
		sizes = append(sizes, len(page))
		for _, p := range page {
			if want := fmt.Sprintf("%06d", next); p.ID != want {
				t.Fatalf("port %s handed over where %s was due", p.ID, want)
			}
			next++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{PortPageSize, PortPageSize, 50}; !slices.Equal(sizes, want) {
		t.Fatalf("pages of %v ports, want %v", sizes, want)
	}
}

// TestPortListFieldsAreAttributesOfPort checks that a listing asks Neutron only for attributes Port decodes, and
// for every one Raven reads from a listing: an attribute missing here comes back empty from every listed port.
func TestPortListFieldsAreAttributesOfPort(t *testing.T) {
	tags := map[string]bool{}
	typ := reflect.TypeFor[Port]()
	for i := range typ.NumField() {
		if tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); tag != "" && tag != "-" {
			tags[tag] = true
		}
	}
	for _, f := range PortListFields {
		if !tags[f] {
			t.Errorf("PortListFields asks for %q, which Port does not decode", f)
		}
	}
	// Read from listings by the index, the pod annotation and the sweepers; only these are left out (the binding
	// profile is read from one port's GET, a subport's parent in Trunks.Detach).
	for tag := range tags {
		if !slices.Contains(PortListFields, tag) && tag != "allowed_address_pairs" && tag != "revision_number" && tag != "binding:profile" {
			t.Errorf("Port decodes %q, which a listing does not ask for", tag)
		}
	}
}

// TestNetworksAndSubnetsComeInPages checks that the namespace networks and subnets are read page by page, by
// each page's next link, keeping the list's filter, each object once.
func TestNetworksAndSubnetsComeInPages(t *testing.T) {
	list := map[string]func(Networking) (int, error){
		"networks": func(n Networking) (int, error) {
			got, err := n.ListNetworks(t.Context(), Filter{Tags: []string{"a", "b"}})
			return len(got), err
		},
		"subnets": func(n Networking) (int, error) {
			got, err := n.ListSubnets(t.Context(), Filter{Tags: []string{"a", "b"}})
			return len(got), err
		},
	}
	for label, count := range list {
		for _, n := range []int{0, PageSize, 2*PageSize + 1} {
			t.Run(fmt.Sprintf("%s/%d", label, n), func(t *testing.T) {
				requests := 0
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					requests++
					q := r.URL.Query()
					if !strings.HasSuffix(r.URL.Path, "/"+label) || q.Get("tags") != "a,b" || q.Get("limit") != strconv.Itoa(PageSize) {
						t.Errorf("request %s?%s: want /%s with tags=a,b and limit=%d", r.URL.Path, r.URL.RawQuery, label, PageSize)
					}
					start := 0
					if m := q.Get("marker"); m != "" {
						start, _ = strconv.Atoi(m)
						start++
					}
					end := min(start+PageSize, n)
					items := make([]map[string]any, 0, end-start)
					for i := start; i < end; i++ {
						items = append(items, map[string]any{"id": fmt.Sprintf("%06d", i)})
					}
					page := map[string]any{label: items}
					if end < n {
						page[label+"_links"] = []map[string]string{{"rel": "next",
							"href": fmt.Sprintf("http://%s/v2.0/%s?limit=%d&tags=a%%2Cb&marker=%06d", r.Host, label, PageSize, end-1)}}
					}
					w.Header().Set("Content-Type", "application/json")
					_ = json.NewEncoder(w).Encode(page)
				}))
				defer srv.Close()
				c := &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()},
					Endpoint: srv.URL + "/", ResourceBase: srv.URL + "/v2.0/"}
				got, err := count(NewNetworking(c))
				if err != nil {
					t.Fatal(err)
				}
				if got != n {
					t.Errorf("listed %d %s, want %d", got, label, n)
				}
				if want := max(1, (n+PageSize-1)/PageSize); requests != want {
					t.Errorf("%d requests, want %d pages", requests, want)
				}
			})
		}
	}
}
