package sim_test

import (
	"strings"
	"testing"

	"github.com/raven-net/raven/internal/openstack/sim"
)

// TestErrorAnswers checks the status and body of refusals: Neutron's NeutronError, Octavia's faultstring.
func TestErrorAnswers(t *testing.T) {
	e := start(t, sim.Model{})
	net, _ := e.namespace(t, "ns", "10.1.0.0/24")
	e.ports(t, net.ID, 1)
	none := "00000000-0000-4000-8000-000000000000"
	for _, tc := range []struct {
		name, method, url, body string
		status                  int
		// key is the error body's message key; typ, when set, Neutron's error type.
		key, typ, text string
	}{
		{"unknown port", "GET", e.neutronURL + "/v2.0/ports/" + none, "", 404, "NeutronError", "HTTPNotFound", "port not found"},
		{"network in use", "DELETE", e.neutronURL + "/v2.0/networks/" + net.ID, "", 409, "NeutronError", "NetworkInUse", "ports still in use"},
		{"unknown filter", "GET", e.neutronURL + "/v2.0/ports?mac_address=x", "", 400, "NeutronError", "HTTPBadRequest", "mac_address"},
		{"empty filter", "GET", e.neutronURL + "/v2.0/ports?device_id=", "", 400, "NeutronError", "", "non-empty"},
		{"bad limit", "GET", e.neutronURL + "/v2.0/networks?limit=x", "", 400, "NeutronError", "", "limit"},
		{"not JSON", "POST", e.neutronURL + "/v2.0/ports", "{", 400, "NeutronError", "", "JSON"},
		{"unknown attribute", "POST", e.neutronURL + "/v2.0/networks", `{"network": {"name": "x", "mtu": 9000}}`, 400, "NeutronError", "", "mtu"},
		{"a single and a bulk", "POST", e.neutronURL + "/v2.0/ports", `{"port": {}, "ports": []}`, 400, "NeutronError", "", "one of"},
		{"a wrong body key", "POST", e.neutronURL + "/v2.0/networks", `{"net": {}}`, 400, "NeutronError", "", "net"},
		{"a tag with a comma", "PUT", e.neutronURL + "/v2.0/networks/" + net.ID + "/tags", `{"tags": ["a,b"]}`, 400, "NeutronError", "", "a,b"},
		{"IPv6", "POST", e.neutronURL + "/v2.0/subnets", `{"subnet": {"network_id": "` + net.ID + `", "ip_version": 6, "cidr": "fd00::/64"}}`, 400, "NeutronError", "", "ip_version"},
		{"unknown resource", "GET", e.neutronURL + "/v2.0/qos/policies", "", 404, "NeutronError", "", "could not be found"},
		{"unknown method", "PATCH", e.neutronURL + "/v2.0/ports", "", 405, "NeutronError", "", "does not serve"},
		{"unknown load balancer", "GET", e.octURL + "/v2/lbaas/loadbalancers/" + none, "", 404, "faultstring", "", "not found"},
		{"Octavia's unknown filter", "GET", e.octURL + "/v2/lbaas/listeners?name=x", "", 400, "faultstring", "", "name"},
		{"a listener on nothing", "POST", e.octURL + "/v2/lbaas/listeners", `{"listener": {"loadbalancer_id": "` + none + `", "protocol": "TCP", "protocol_port": 80}}`, 404, "faultstring", "", "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := raw(t, tc.method, tc.url, tc.body)
			if status != tc.status {
				t.Fatalf("%d %v, want %d", status, body, tc.status)
			}
			msg := ""
			if tc.key == "NeutronError" {
				ne, _ := body["NeutronError"].(map[string]any)
				if ne == nil || (tc.typ != "" && ne["type"] != tc.typ) {
					t.Fatalf("body %v, want a NeutronError of type %q", body, tc.typ)
				}
				msg, _ = ne["message"].(string)
			} else {
				msg, _ = body["faultstring"].(string)
			}
			if !strings.Contains(msg, tc.text) {
				t.Fatalf("message %q, want it to say %q", msg, tc.text)
			}
		})
	}
}
