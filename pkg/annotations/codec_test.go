package annotations

import (
	"reflect"
	"testing"
)

func ptr(s string) *string { return &s }

func TestDecode(t *testing.T) {
	cases := []struct {
		name    string
		annos   map[string]string
		wantOK  bool
		wantErr bool
		want    Port
	}{
		{"a missing annotation is not an error", map[string]string{}, false, false, Port{}},
		{"a valid port decodes", map[string]string{PodPort: `{"id":"p1","mac_address":"fa:16:3e:00:00:01","fixed_ips":[{"subnet_id":"s","ip_address":"10.0.0.5"}]}`},
			true, false, Port{ID: "p1", MACAddress: "fa:16:3e:00:00:01", FixedIPs: []FixedIP{{SubnetID: "s", IPAddress: "10.0.0.5"}}}},
		{"a malformed value is an error naming the key", map[string]string{PodPort: `{"id":`}, true, true, Port{}},
		{"a value of the wrong shape is an error", map[string]string{PodPort: `["x"]`}, true, true, Port{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got Port
			ok, err := Decode(tc.annos, PodPort, &got)
			if ok != tc.wantOK || (err != nil) != tc.wantErr {
				t.Fatalf("Decode = %v, %v; want ok=%v err=%v", ok, err, tc.wantOK, tc.wantErr)
			}
			if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestChanges(t *testing.T) {
	cases := []struct {
		name  string
		annos map[string]string
		want  map[string]*string
		out   map[string]any
	}{
		{"equal values need no write", map[string]string{"a": "1"}, map[string]*string{"a": ptr("1")}, map[string]any{}},
		{"a new value is written", map[string]string{}, map[string]*string{"a": ptr("1")}, map[string]any{"a": "1"}},
		{"a changed value is written", map[string]string{"a": "0"}, map[string]*string{"a": ptr("1")}, map[string]any{"a": "1"}},
		{"nil removes a present key", map[string]string{"a": "0"}, map[string]*string{"a": nil}, map[string]any{"a": nil}},
		{"nil on an absent key is nothing", map[string]string{}, map[string]*string{"a": nil}, map[string]any{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Changes(tc.annos, tc.want); !reflect.DeepEqual(got, tc.out) {
				t.Fatalf("Changes = %v, want %v", got, tc.out)
			}
		})
	}
}

func FuzzDecodePort(f *testing.F) {
	f.Add(`{"id":"p1","fixed_ips":[{"subnet_id":"s","ip_address":"10.0.0.5"}]}`)
	f.Add(`{"id":`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, raw string) {
		var p Port
		ok, err := Decode(map[string]string{PodPort: raw}, PodPort, &p)
		if !ok {
			t.Fatal("a present annotation must report ok")
		}
		if err == nil {
			// Whatever decodes must encode again.
			if _, err := Encode(p); err != nil {
				t.Fatalf("decoded value does not encode: %v", err)
			}
		}
	})
}
