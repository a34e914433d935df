package annotations

import (
	"strings"
	"testing"
)

// wholePort is a port annotation as the controller writes it.
func wholePort(t *testing.T) string {
	t.Helper()
	whole, err := Encode(Port{ID: "p1", Name: "raven-ns", NetworkID: "n1", MACAddress: "fa:16:3e:00:00:01",
		FixedIPs: []FixedIP{{SubnetID: "s1", IPAddress: "10.0.0.5"}}, SecurityGroups: []string{"g1", "g2"},
		HostID: "node-1", VIFType: "ovs", VIFDetails: map[string]any{"port_filter": true}, MTU: 1442, PodUID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	return whole
}

// TestCompactPort checks that the compact value is small, decodes to what the controller reads, and leaves
// other values alone.
func TestCompactPort(t *testing.T) {
	whole := wholePort(t)
	compact := CompactPort(whole)
	if len(compact)*2 > len(whole) {
		t.Errorf("the compact value is %d bytes of the whole's %d: %s", len(compact), len(whole), compact)
	}
	var got Port
	if ok, err := Decode(map[string]string{PodPort: compact}, PodPort, &got); !ok || err != nil {
		t.Fatalf("the compact value does not decode: %v", err)
	}
	if got.ID != "p1" || got.NetworkID != "n1" || got.MACAddress != "fa:16:3e:00:00:01" || len(got.FixedIPs) != 1 || got.FixedIPs[0].IPAddress != "10.0.0.5" {
		t.Errorf("the compact value decodes to %+v", got)
	}
	if CompactPort(compact) != compact {
		t.Error("a compact value is compacted again")
	}
	for _, v := range []string{"", "{", `["x"]`, `{"name":"no id"}`} {
		if CompactPort(v) != v {
			t.Errorf("%q, not a port annotation, was changed to %q", v, CompactPort(v))
		}
	}
}

// TestSame checks that a compact value is the whole value it came from, and no other.
func TestSame(t *testing.T) {
	whole := wholePort(t)
	compact := CompactPort(whole)
	other := strings.Replace(whole, `"g2"`, `"g3"`, 1) // another group: the same fields the compact form keeps
	cases := []struct {
		name      string
		cur, want string
		same      bool
	}{
		{"the whole value is itself", whole, whole, true},
		{"the compact value is the whole one", compact, whole, true},
		{"a compact value is not another whole value with the same addresses", compact, other, false},
		{"a whole value is not another", whole, other, false},
		{"a value that only opens like a compact one is not the whole one", compactPrefix + `x"}`, whole, false},
		{"an empty value is not a port", "", whole, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Same(tc.cur, tc.want); got != tc.same {
				t.Errorf("Same = %v, want %v", got, tc.same)
			}
			if got := len(Changes(map[string]string{PodPort: tc.cur}, map[string]*string{PodPort: &tc.want})) == 0; got != tc.same {
				t.Errorf("Changes finds nothing to write: %v, want %v", got, tc.same)
			}
		})
	}
}
