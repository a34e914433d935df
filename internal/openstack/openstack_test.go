package openstack

import (
	"errors"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
)

func TestOperation(t *testing.T) {
	id := "7d7cc334-bcde-4c94-b684-c184e3d1b46d"
	cases := []struct{ method, path, want string }{
		{"POST", "/v2.0/ports", "neutron port create"},
		{"GET", "/v2.0/ports", "neutron port list"},
		{"GET", "/v2.0/ports/" + id, "neutron port get"},
		{"DELETE", "/v2.0/ports/" + id, "neutron port delete"},
		{"PUT", "/v2.0/ports/" + id + "/tags", "neutron tag replace"},
		{"PUT", "/v2.0/routers/" + id + "/add_router_interface", "neutron router add_interface"},
		{"PUT", "/v2/lbaas/pools/" + id + "/members", "octavia member batch_update"},
		{"POST", "/v2/lbaas/loadbalancers", "octavia loadbalancer create"},
		{"GET", "/v2.0/lbaas/listeners", "octavia listener list"},
		{"GET", "/v2/lbaas/loadbalancers/" + id + "/status", "octavia loadbalancer_status get"},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			if got := Operation(tc.method, tc.path, ""); got != tc.want {
				t.Fatalf("Operation = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWrapClassifies(t *testing.T) {
	code := func(status int, body string) error {
		return gophercloud.ErrUnexpectedResponseCode{Actual: status, Body: []byte(body)}
	}
	cases := []struct {
		name string
		err  error
		want Kind
	}{
		{"404 is NotFound", code(404, `{"NeutronError": {"type": "PortNotFound", "message": "Port x could not be found."}}`), KindNotFound},
		{"a port quota is QuotaExceeded", code(409, `{"NeutronError": {"type": "OverQuota", "message": "Quota exceeded for resources: ['port']."}}`), KindQuota},
		{"no address left is AddressesExhausted", code(409, `{"NeutronError": {"type": "IpAddressGenerationFailure", "message": "No more IP addresses available on network x."}}`), KindExhausted},
		{"an exhausted subnet pool is AddressesExhausted", code(400, `{"NeutronError": {"type": "SubnetAllocationError", "message": "Insufficient prefix space to allocate subnet size /24"}}`), KindExhausted},
		{"a full subnet pool answered with a 500 is AddressesExhausted", code(500, `{"NeutronError": {"type": "SubnetAllocationError", "message": "Failed to allocate subnet: Insufficient prefix space to allocate subnet size /16."}}`), KindExhausted},
		{"Octavia's pending lock is Immutable", code(409, `{"faultcode": "Client", "faultstring": "Load Balancer x is immutable and cannot be updated."}`), KindImmutable},
		{"Octavia 16's pending lock on a delete is Immutable", code(409, `{"faultcode": "Client", "faultstring": "Invalid state PENDING_UPDATE of loadbalancer resource x", "debuginfo": null}`), KindImmutable},
		{"a 503 is ServerError", code(503, ``), KindServer},
		{"Octavia's listener quota is QuotaExceeded", code(403, `{"faultcode": "Client", "faultstring": "Quota has been met for resources: Listener"}`), KindQuota},
		{"a provider without the option is Unsupported", code(501, `{"faultcode": "Server", "faultstring": "Provider 'ovn' does not support a requested option: SCTP"}`), KindUnsupported},
		{"a refused connection is Unavailable", errors.New("dial tcp 127.0.0.1:9696: connect: connection refused"), KindUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := KindOf(wrap("op", tc.err)); got != tc.want {
				t.Fatalf("KindOf = %s, want %s", got, tc.want)
			}
		})
	}
	if wrap("op", nil) != nil {
		t.Fatal("wrap(nil) must be nil")
	}
}

func TestDetailDropsSQL(t *testing.T) {
	body := `{"faultcode": "Server", "faultstring": "(sqlite3.OperationalError) database is locked\n[SQL: UPDATE listener SET updated_at=? WHERE listener.id = ?]\n[parameters: ('x', 'y')]\n(Background on this error at: https://sqlalche.me/e/14/e3q8)", "debuginfo": null}`
	if got, want := detail([]byte(body)), "(sqlite3.OperationalError) database is locked"; got != want {
		t.Fatalf("detail = %q, want %q", got, want)
	}
	if got, want := detail([]byte(`{"NeutronError": {"type": "PortNotFound", "message": "Port x could not be found.", "detail": ""}}`)), "Port x could not be found."; got != want {
		t.Fatalf("detail = %q, want %q", got, want)
	}
}

func TestRejected(t *testing.T) {
	for kind, want := range map[Kind]bool{KindBadRequest: true, KindQuota: true, KindUnsupported: true,
		KindServer: false, KindUnavailable: false, KindImmutable: false, KindNotFound: false} {
		if got := Rejected(NewError("op", kind, 0, "x")); got != want {
			t.Errorf("Rejected(%s) = %v, want %v", kind, got, want)
		}
	}
	if Rejected(errors.New("plain")) {
		t.Error("an unclassified error is not a rejection")
	}
}

func TestTimeReadsOctaviaAndNeutronStamps(t *testing.T) {
	for _, s := range []string{`"2026-11-25T23:13:41.555174"`, `"2026-11-25T23:13:41Z"`, `"2026-11-25T23:13:41+00:00"`} {
		var v Time
		if err := v.UnmarshalJSON([]byte(s)); err != nil || v.Year() != 2026 || v.Location() != time.UTC {
			t.Fatalf("%s: %v %v", s, v, err)
		}
	}
	var v Time
	if err := v.UnmarshalJSON([]byte(`"yesterday"`)); err == nil {
		t.Fatal("an unreadable stamp must be an error")
	}
}
