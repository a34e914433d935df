package manager

import "testing"

func TestGCPercentYieldsToGOGC(t *testing.T) {
	for _, tc := range []struct {
		gogc string
		want int
	}{
		{"", GCPercent},
		{"100", 0},
		{"off", 0},
	} {
		if got := gcPercent(tc.gogc); got != tc.want {
			t.Errorf("gcPercent(%q) = %d, want %d", tc.gogc, got, tc.want)
		}
	}
}
