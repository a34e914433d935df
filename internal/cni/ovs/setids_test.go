package ovs

import (
	"reflect"
	"testing"
)

func TestSetExternalIDsIsOneTransaction(t *testing.T) {
	r := &recorder{}
	v := &VSCtl{DB: "unix:/tmp/db.sock", Bridge: "br-int", Run: r.run}
	err := v.SetExternalIDs(t.Context(), "tapX", map[string]string{"iface-id": "p2", "attached-mac": "fa:16:3e:00:00:01"}, "ovn-installed")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ovs-vsctl", "--timeout=10", "--db=unix:/tmp/db.sock", "--no-wait", "--", "set", "Interface", "tapX",
		`external_ids:attached-mac="fa:16:3e:00:00:01"`, `external_ids:iface-id="p2"`,
		"--", "remove", "Interface", "tapX", "external_ids", `"ovn-installed"`}
	if len(r.calls) != 1 || !reflect.DeepEqual(r.calls[0], want) {
		t.Errorf("calls = %q, want one call %q", r.calls, want)
	}
}
