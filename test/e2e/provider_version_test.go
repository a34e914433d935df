//go:build e2e

package e2e

import "testing"

func TestProviderAsksPerListener(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		version string
		want    bool
	}{
		{"3.0.0-1", false},
		{"4.0.0-1", true},
		{"8.0.0-1", true},
		{"9.0.0-2", true},
		{"10.0.0-1", false},
		{"11.0.0-1", false},
		{"", false},
		{"garbage", false},
	} {
		if got := providerAsksPerListener(tc.version); got != tc.want {
			t.Errorf("providerAsksPerListener(%q) = %v, want %v", tc.version, got, tc.want)
		}
	}
}
