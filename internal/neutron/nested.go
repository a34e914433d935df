package neutron

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/raven-net/raven/internal/openstack"
)

// MaxVLAN is the highest segmentation ID a trunk's VLAN subport can have (802.1Q: 1–4094).
const MaxVLAN = 4094

// ErrTrunkFull says a trunk carries a subport on every VLAN ID: its node can run no more pods.
var ErrTrunkFull = errors.New("the node VM's trunk has a subport on every VLAN ID (1-4094)")

// VMNode is a nested node: a Kubernetes node that is a Nova VM, whose pods' ports are VLAN subports of its
// VM port's trunk. Address is the node's address on the worker subnet, which finds that port.
type VMNode struct {
	Name, Address string
}

// Trunks attaches pods' ports to the trunks of nested nodes' VMs, each port on a segmentation ID of its own
// on its trunk (IDs are per trunk, not per cluster: every VM can run 4094 pods). Neutron holds the truth: a
// trunk's IDs in use are read from it the first time the trunk is used after a start, and a refused ID (409:
// taken meanwhile, by a replica that led before) makes them read again, so that no ID goes to two ports.
//
// The trunk Raven knows for a node name is the one its VM's port was found by at the node's address then: a
// Node whose InternalIP is another now (its VM replaced under the same name) has its VM's port looked up
// again, so that no pod's port goes on the trunk of a VM that is not its node. Forget drops a deleted Node's.
type Trunks struct {
	N openstack.Networking
	// WorkerSubnetID is the subnet of the node VMs' ports.
	WorkerSubnetID string

	mu    sync.Mutex
	nodes map[string]*vmTrunk // by node name
}

// vmTrunk is one node VM's trunk and the segmentation IDs its subports use.
type vmTrunk struct {
	// mu is held while the trunk's subports are read or changed, Neutron's requests included.
	mu sync.Mutex
	// qmu guards nextAttach and nextDetach: the attaches and detaches waiting for mu.
	qmu        sync.Mutex
	nextAttach *portBatch
	nextDetach *portBatch
	id         string
	parent     string
	// address is the node's address the parent port was found by.
	address string
	// keep is the VLAN each port being attached asks for (the one its former port had: AttachAt); guarded
	// by qmu.
	keep     map[string]int
	loaded   bool
	byPort   map[string]int // subport → segmentation ID
	portByID map[int]string // segmentation ID → subport
}

// Subport is a port on a trunk: which trunk, and its VLAN there.
type Subport struct {
	TrunkID, ParentPortID string
	VLAN                  int
}

// trunkOf finds the node VM's port (the one holding the node's address on the worker subnet) and its trunk.
func (t *Trunks) trunkOf(ctx context.Context, node VMNode) (*vmTrunk, error) {
	t.mu.Lock()
	vt := t.nodes[node.Name]
	if vt != nil && vt.address != node.Address {
		// The Node's address changed: the trunk Raven knows is that of the VM that held the old one.
		delete(t.nodes, node.Name)
		vt = nil
	}
	t.mu.Unlock()
	if vt != nil {
		return vt, nil
	}
	if node.Address == "" {
		return nil, fmt.Errorf("nested node %s has no InternalIP to find its VM's port by", node.Name)
	}
	ports, err := t.N.PortsWithAddress(ctx, t.WorkerSubnetID, node.Address)
	if err != nil {
		return nil, err
	}
	if len(ports) != 1 {
		return nil, fmt.Errorf("nested node %s: %d ports hold %s on the worker subnet %s, want its VM's port alone", node.Name, len(ports), node.Address, t.WorkerSubnetID)
	}
	trunks, err := t.N.ListTrunks(ctx, ports[0].ID)
	if err != nil {
		return nil, err
	}
	if len(trunks) != 1 {
		return nil, fmt.Errorf("nested node %s: its VM's port %s is the parent of no trunk (a VLAN-aware VM needs one: openstack network trunk create --parent-port %s)", node.Name, ports[0].ID, ports[0].ID)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.nodes == nil {
		t.nodes = map[string]*vmTrunk{}
	}
	if vt := t.nodes[node.Name]; vt != nil && vt.address == node.Address {
		return vt, nil
	}
	vt = &vmTrunk{id: trunks[0].ID, parent: ports[0].ID, address: node.Address}
	t.nodes[node.Name] = vt
	return vt, nil
}

// load reads the trunk's subports from Neutron. Caller holds vt.mu.
func (vt *vmTrunk) load(ctx context.Context, n openstack.Networking) error {
	tr, err := n.GetTrunk(ctx, vt.id)
	if err != nil {
		return err
	}
	vt.byPort, vt.portByID = map[string]int{}, map[int]string{}
	for _, s := range tr.Subports {
		vt.byPort[s.PortID] = s.SegmentationID
		vt.portByID[s.SegmentationID] = s.PortID
	}
	vt.loaded = true
	return nil
}

// free is the lowest segmentation ID no subport of the trunk uses and taken does not hold, 0 when every one
// is taken.
func (vt *vmTrunk) free(taken map[int]bool) int {
	for id := 1; id <= MaxVLAN; id++ {
		if _, used := vt.portByID[id]; !used && !taken[id] {
			return id
		}
	}
	return 0
}

// Attach makes the port a subport of the node's trunk and returns where: a port the trunk carries already
// keeps its segmentation ID. A trunk Neutron no longer has (the node's VM was replaced under the same node
// name) is looked up again.
func (t *Trunks) Attach(ctx context.Context, node VMNode, portID string) (Subport, error) {
	return t.AttachAt(ctx, node, portID, 0)
}

// AttachAt is Attach for a port made again for a running pod whose port is gone: it goes on vlan, the VLAN
// of that former port, when no other port of the trunk holds it in Neutron (the pod's interface on its node
// carries that VLAN, and raven-node on a nested node does not re-plug a running pod), else as Attach does.
// vlan 0 asks for nothing.
func (t *Trunks) AttachAt(ctx context.Context, node VMNode, portID string, vlan int) (Subport, error) {
	subs, err := t.attachAll(ctx, node, []string{portID}, vlan)
	if err != nil {
		return Subport{}, err
	}
	return subs[0], nil
}

// AttachAll makes the ports subports of the node's trunk, those it does not carry yet in one request (a trunk
// pool's refill), and returns where each is, in order.
func (t *Trunks) AttachAll(ctx context.Context, node VMNode, portIDs []string) ([]Subport, error) {
	return t.attachAll(ctx, node, portIDs, 0)
}

// attachAll is AttachAll; a single port asks for vlan when it is not 0 (AttachAt).
func (t *Trunks) attachAll(ctx context.Context, node VMNode, portIDs []string, vlan int) ([]Subport, error) {
	subs, err := t.attach(ctx, node, portIDs, vlan)
	if openstack.IsNotFound(err) {
		t.Forget(node.Name)
		subs, err = t.attach(ctx, node, portIDs, vlan)
	}
	return subs, err
}

// portBatch is the ports of the attaches (or detaches) that wait for a trunk while another is in Neutron: the
// first of them to get the trunk sends them all in one add_subports (remove_subports). A burst of pods with
// pools off makes one request per round trip, not one per pod, and so does a namespace's teardown.
type portBatch struct {
	ports []string
	done  chan struct{}
	err   error
}

// group runs op, with vt.mu held, for ports and those of every caller that joined the same batch of next. A
// batch op fails for is run again for each caller's ports alone, so that a port Neutron refuses (its pod
// deleted meanwhile) fails alone.
func (vt *vmTrunk) group(next **portBatch, ports []string, op func([]string) error) error {
	vt.qmu.Lock()
	b := *next
	if b == nil {
		b = &portBatch{done: make(chan struct{})}
		*next = b
	}
	b.ports = append(b.ports, ports...)
	vt.qmu.Unlock()

	vt.mu.Lock()
	defer vt.mu.Unlock()
	vt.qmu.Lock()
	lead := *next == b
	if lead {
		*next = nil
	}
	vt.qmu.Unlock()
	if lead {
		b.err = op(b.ports)
		if b.err != nil && len(b.ports) > len(ports) {
			b.err = errBatchFailed
		}
		close(b.done)
	}
	<-b.done // closed already unless this caller leads: the leader closes it before it lets go of vt.mu
	if errors.Is(b.err, errBatchFailed) {
		return op(ports)
	}
	return b.err
}

// attach is AttachAll on the trunk Raven knows for the node: the ports join the trunk's next batch.
func (t *Trunks) attach(ctx context.Context, node VMNode, portIDs []string, vlan int) ([]Subport, error) {
	vt, err := t.trunkOf(ctx, node)
	if err != nil {
		return nil, err
	}
	if vlan > 0 && vlan <= MaxVLAN && len(portIDs) == 1 {
		vt.qmu.Lock()
		if vt.keep == nil {
			vt.keep = map[string]int{}
		}
		vt.keep[portIDs[0]] = vlan
		vt.qmu.Unlock()
		defer func() {
			vt.qmu.Lock()
			delete(vt.keep, portIDs[0])
			vt.qmu.Unlock()
		}()
	}
	if err := vt.group(&vt.nextAttach, portIDs, func(ports []string) error { return t.attachLocked(ctx, node, vt, ports) }); err != nil {
		return nil, err
	}
	vt.mu.Lock()
	defer vt.mu.Unlock()
	return vt.where(portIDs), nil
}

// errBatchFailed says a batch of several attaches (or detaches) failed: each is tried again alone.
var errBatchFailed = errors.New("a batch of subports was refused")

// attachLocked adds the ports the trunk does not carry yet in one add_subports. Caller holds vt.mu.
func (t *Trunks) attachLocked(ctx context.Context, node VMNode, vt *vmTrunk, portIDs []string) error {
	if !vt.loaded {
		if err := vt.load(ctx, t.N); err != nil {
			return err
		}
	}
	if vt.keepTaken(portIDs) {
		// The VLAN a port made again asks for is another port's as far as Raven knows: that is most often
		// its former port, which left the trunk out of band. Neutron says whether it is still there.
		if err := vt.load(ctx, t.N); err != nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		add, err := vt.plan(portIDs)
		if err != nil {
			return fmt.Errorf("nested node %s, trunk %s: %w", node.Name, vt.id, err)
		}
		if len(add) == 0 {
			return nil
		}
		err = t.N.AddSubports(ctx, vt.id, add)
		if err == nil {
			for _, a := range add {
				vt.byPort[a.PortID], vt.portByID[a.SegmentationID] = a.SegmentationID, a.PortID
			}
			return nil
		}
		// 409: an ID, or a port, is taken on the trunk already (by a Raven that led before this one, or a
		// reply that was lost): read the trunk again and look once more.
		if openstack.KindOf(err) != openstack.KindConflict || attempt >= 2 {
			return fmt.Errorf("adding %d ports (first %s, VLAN %d) to trunk %s of nested node %s: %w", len(add), add[0].PortID,
				add[0].SegmentationID, vt.id, node.Name, err)
		}
		if err := vt.load(ctx, t.N); err != nil {
			return err
		}
	}
}

// keepTaken says a port of portIDs the trunk does not carry asks for a VLAN another port holds. Caller holds
// vt.mu.
func (vt *vmTrunk) keepTaken(portIDs []string) bool {
	vt.qmu.Lock()
	defer vt.qmu.Unlock()
	for _, id := range portIDs {
		if _, on := vt.byPort[id]; on {
			continue
		}
		if holder, used := vt.portByID[vt.keep[id]]; vt.keep[id] != 0 && used && holder != id {
			return true
		}
	}
	return false
}

// plan gives each port the trunk does not carry yet the VLAN it asks for (AttachAt) when that is free on the
// trunk, else the lowest segmentation ID free on it. Caller holds vt.mu.
func (vt *vmTrunk) plan(portIDs []string) ([]openstack.Subport, error) {
	vt.qmu.Lock()
	keep := maps.Clone(vt.keep)
	vt.qmu.Unlock()
	// First the VLANs asked for and free, then the lowest free ones for the other ports.
	asked := map[int]string{} // VLAN → the port that gets it
	taken := map[int]bool{}
	for _, id := range portIDs {
		want := keep[id]
		if _, on := vt.byPort[id]; on || want == 0 || taken[want] {
			continue
		}
		if _, used := vt.portByID[want]; !used {
			asked[want], taken[want] = id, true
		}
	}
	var add []openstack.Subport
	for _, id := range portIDs {
		if _, on := vt.byPort[id]; on || slices.ContainsFunc(add, func(s openstack.Subport) bool { return s.PortID == id }) {
			continue
		}
		vlan := keep[id]
		if vlan == 0 || asked[vlan] != id {
			if vlan = vt.free(taken); vlan == 0 {
				return nil, ErrTrunkFull
			}
			taken[vlan] = true
		}
		add = append(add, openstack.Subport{PortID: id, SegmentationType: openstack.SegmentationVLAN, SegmentationID: vlan})
	}
	return add, nil
}

// where is each port's place on the trunk. Caller holds vt.mu.
func (vt *vmTrunk) where(portIDs []string) []Subport {
	out := make([]Subport, len(portIDs))
	for i, id := range portIDs {
		out[i] = Subport{TrunkID: vt.id, ParentPortID: vt.parent, VLAN: vt.byPort[id]}
	}
	return out
}

// Detach takes the port off the trunk that carries it, if one does: Neutron refuses to delete a subport.
// The trunks Raven knows are looked at first, then those of the node VMs' ports on the worker subnet, or,
// without one (the nested configuration removed while nested pods remain), the trunks of Raven's project, which
// are the only ones it may change; never every trunk of the cloud (with an admin's credentials, that is every
// project's).
func (t *Trunks) Detach(ctx context.Context, portID string) error {
	if vt := t.carrier(portID); vt != nil {
		return vt.group(&vt.nextDetach, []string{portID}, func(ports []string) error { return t.removeLocked(ctx, vt, ports) })
	}
	trunks, err := t.candidates(ctx, portID)
	if err != nil {
		return fmt.Errorf("port %s: no trunk Raven knows carries it: %w", portID, err)
	}
	for _, tr := range trunks {
		if slices.ContainsFunc(tr.Subports, func(s openstack.Subport) bool { return s.PortID == portID }) {
			return openstack.IgnoreNotFound(t.N.RemoveSubports(ctx, tr.ID, []string{portID}))
		}
	}
	return nil
}

// candidates are the trunks that may carry a port Raven did not attach since it started: those of the node VMs'
// ports on the worker subnet, else those of Raven's project, else (credentials that name no project, auth_type
// none, whose requests are all an admin's) the trunk of the parent port the port's binding profile names.
func (t *Trunks) candidates(ctx context.Context, portID string) ([]openstack.Trunk, error) {
	if t.WorkerSubnetID == "" {
		if p := t.N.ProjectID(); p != "" {
			return t.N.ListProjectTrunks(ctx, p)
		}
		port, err := t.N.GetPort(ctx, portID)
		if err != nil {
			return nil, openstack.IgnoreNotFound(err)
		}
		parent, _ := port.Profile["parent_name"].(string)
		if port.DeviceOwner != openstack.SubportOwner || parent == "" {
			return nil, nil // not a subport: nothing to take it off
		}
		return t.N.ListTrunks(ctx, parent)
	}
	vms, err := t.N.PortsWithAddress(ctx, t.WorkerSubnetID, "")
	if err != nil || len(vms) == 0 {
		return nil, err
	}
	parents := make([]string, len(vms))
	for i, p := range vms {
		parents[i] = p.ID
	}
	return t.N.ListTrunks(ctx, parents...)
}

// removeLocked takes the ports vt still carries off it in one remove_subports (a port alone that Neutron says
// the trunk does not carry is off already). Caller holds vt.mu.
func (t *Trunks) removeLocked(ctx context.Context, vt *vmTrunk, portIDs []string) error {
	ports := slices.DeleteFunc(slices.Clone(portIDs), func(id string) bool { _, on := vt.byPort[id]; return !on })
	if len(ports) == 0 {
		return nil
	}
	err := t.N.RemoveSubports(ctx, vt.id, ports)
	if len(ports) == 1 {
		err = openstack.IgnoreNotFound(err)
	}
	if err != nil {
		return err
	}
	for _, id := range ports {
		delete(vt.portByID, vt.byPort[id])
		delete(vt.byPort, id)
	}
	return nil
}

// Carries says a trunk Raven knows carries the port (Neutron's copy of the port may not show it yet).
func (t *Trunks) Carries(portID string) bool { return t.carrier(portID) != nil }

// carrier is the trunk Raven knows that carries the port, nil when none does.
func (t *Trunks) carrier(portID string) *vmTrunk {
	t.mu.Lock()
	known := make([]*vmTrunk, 0, len(t.nodes))
	for _, vt := range t.nodes {
		known = append(known, vt)
	}
	t.mu.Unlock()
	for _, vt := range known {
		vt.mu.Lock()
		_, on := vt.byPort[portID]
		vt.mu.Unlock()
		if on {
			return vt
		}
	}
	return nil
}

// Forget drops what Raven knows of a deleted node's trunk.
func (t *Trunks) Forget(node string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.nodes, node)
}
