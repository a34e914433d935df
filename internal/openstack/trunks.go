package openstack

import (
	"context"
	"errors"
	"net/url"
	"slices"

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/trunks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// Trunk is a VLAN-aware VM's trunk: its parent port (the VM's NIC) and the subports it carries.
type Trunk struct {
	ID        string    `json:"id"`
	PortID    string    `json:"port_id"`
	ProjectID string    `json:"project_id"`
	Status    string    `json:"status"`
	Subports  []Subport `json:"sub_ports"`
}

// Subport is a port a trunk carries, its frames tagged with SegmentationID on the parent port.
type Subport struct {
	PortID           string `json:"port_id"`
	SegmentationType string `json:"segmentation_type"`
	SegmentationID   int    `json:"segmentation_id"`
}

// SegmentationVLAN is the only segmentation type ML2/OVN's trunk driver supports.
const SegmentationVLAN = "vlan"

// SubportOwner is the device_owner Neutron gives a port once it is a subport (and takes away when it no
// longer is).
const SubportOwner = "trunk:subport"

func (n *neutron) PortsWithAddress(ctx context.Context, subnetID, ip string) ([]Port, error) {
	if subnetID == "" {
		return nil, wrap("neutron port list", ErrUnscoped)
	}
	return allPages[Port](ctx, "neutron port list",
		ports.List(n.c, ports.ListOpts{Limit: PortPageSize, FixedIPs: []ports.FixedIPOpts{{SubnetID: subnetID, IPAddress: ip}}}),
		ports.ExtractPortsInto)
}

// ErrUnscoped refuses a listing that names none of the objects it is about: it would read every such object
// of the cloud that Raven's credentials can see.
var ErrUnscoped = errors.New("a listing that names no object to list by would read the whole cloud")

func (n *neutron) ListTrunks(ctx context.Context, parentPortIDs ...string) ([]Trunk, error) {
	if len(parentPortIDs) == 0 || slices.Contains(parentPortIDs, "") {
		return nil, wrap("neutron trunk list", ErrUnscoped)
	}
	var out []Trunk
	for ids := range slices.Chunk(parentPortIDs, IDsPerQuery) {
		got, err := allPages[Trunk](ctx, "neutron trunk list", trunks.List(n.c, trunksOf(ids)),
			func(p pagination.Page, v any) error { return p.(trunks.TrunkPage).ExtractIntoSlicePtr(v, "trunks") })
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

func (n *neutron) ListProjectTrunks(ctx context.Context, projectID string) ([]Trunk, error) {
	if projectID == "" {
		return nil, wrap("neutron trunk list", ErrUnscoped)
	}
	return allPages[Trunk](ctx, "neutron trunk list", trunks.List(n.c, trunks.ListOpts{ProjectID: projectID}),
		func(p pagination.Page, v any) error { return p.(trunks.TrunkPage).ExtractIntoSlicePtr(v, "trunks") })
}

// trunksOf is a trunk list's query for the trunks of any of the parent ports (port_id repeated).
type trunksOf []string

func (t trunksOf) ToTrunkListQuery() (string, error) {
	return "?" + url.Values{"port_id": t}.Encode(), nil
}

func (n *neutron) GetTrunk(ctx context.Context, id string) (*Trunk, error) {
	out := new(Trunk)
	err := trunks.Get(ctx, n.c, id).ExtractIntoStructPtr(out, "trunk")
	return out, wrap("neutron trunk get", err)
}

func (n *neutron) AddSubports(ctx context.Context, trunkID string, subs []Subport) error {
	opts := trunks.AddSubportsOpts{}
	for _, s := range subs {
		opts.Subports = append(opts.Subports, trunks.Subport{PortID: s.PortID, SegmentationType: s.SegmentationType, SegmentationID: s.SegmentationID})
	}
	return wrap("neutron trunk add_subports", trunks.AddSubports(ctx, n.c, trunkID, opts).Err)
}

func (n *neutron) RemoveSubports(ctx context.Context, trunkID string, portIDs []string) error {
	opts := trunks.RemoveSubportsOpts{}
	for _, id := range portIDs {
		opts.Subports = append(opts.Subports, trunks.RemoveSubport{PortID: id})
	}
	return wrap("neutron trunk remove_subports", trunks.RemoveSubports(ctx, n.c, trunkID, opts).Err)
}
