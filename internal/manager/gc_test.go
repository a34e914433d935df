package manager

import "testing"

func TestGCPercentYieldsToGOGC(t *testing.T) {
	for _, tc := range []struct {
		gogc string
		set  bool
		want int
	}{
		{"", false, GCPercent},
		{"", true, GCPercent},
		{"100", true, 0},
		{"off", true, 0},
	} {
		if got := gcPercent(tc.gogc, tc.set); got != tc.want {
			t.Errorf("gcPercent(%q, %v) = %d, want %d", tc.gogc, tc.set, got, tc.want)
		}
	}
}
