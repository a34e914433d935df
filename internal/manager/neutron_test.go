package manager

import (
	"testing"

	"github.com/raven-net/raven/internal/config"
	"github.com/raven-net/raven/internal/openstack"
	"github.com/raven-net/raven/internal/openstack/fake"
)

// Raven takes ports off trunks before deleting them with or without nested nodes configured (a Raven whose
// nested: was removed releases the subports it made); it attaches only with a worker subnet.
func TestNeutronManagerTrunks(t *testing.T) {
	for _, subnet := range []string{"", "workers"} {
		o := config.Default()
		o.Pools.Enabled = false
		o.Nested.WorkerSubnetID = subnet
		nm := neutronManager(o, &openstack.Clients{Networking: fake.NewNeutron()})
		if nm.T == nil {
			t.Fatalf("workerSubnetID %q: no trunk handling, so a subport could never be deleted", subnet)
		}
		if nm.T.WorkerSubnetID != subnet {
			t.Errorf("worker subnet %q, want %q", nm.T.WorkerSubnetID, subnet)
		}
	}
}
