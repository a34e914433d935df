package daemon

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/raven-net/raven/internal/cni/wire"
)

// Options are raven-node's settings.
type Options struct {
	Kubeconfig   string
	NodeName     string
	Socket       string
	OVSDB        string
	Bridge       string
	OVSRunDir    string
	OVNRunDir    string
	ReadyTimeout time.Duration
	// DatapathNetns is the network namespace (a path) of the node's Open vSwitch, when it is not raven-node's.
	DatapathNetns string
	// InstallPlugin, when set, is the raven-cni binary to copy into CNIBinDir at start, with the conflist
	// written into CNIConfDir.
	InstallPlugin string
	CNIBinDir     string
	CNIConfDir    string
	// CNIConflist, when set, is the conflist to install instead of the generated one (to chain plugins).
	CNIConflist string
	MetricsAddr string
	Nested      bool
	// VLANUplink, on a nested node, is the VM's NIC: each pod's interface is a kernel 802.1Q link of its
	// subport's VLAN on it, and raven-node uses no Open vSwitch (the kernel-VLAN path).
	VLANUplink string

	// flags is the set the options were bound to, for Validate to tell a flag given from its default.
	flags *flag.FlagSet
}

// BindFlags registers the flags on fs and returns the Options they fill.
func BindFlags(fs *flag.FlagSet) *Options {
	o := &Options{flags: fs}
	host, _ := os.Hostname()
	fs.StringVar(&o.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file; empty means in-cluster")
	fs.StringVar(&o.NodeName, "node-name", host, "this node's name: its pods are watched, and ports bound to it plugged")
	fs.StringVar(&o.Socket, "socket", wire.DefaultSocket, "unix socket raven-cni talks to (directory 0700, socket 0600)")
	fs.StringVar(&o.OVSDB, "ovs-db", "", "OVS database, passed as --db= to ovs-vsctl; empty means ovs-vsctl's default")
	fs.StringVar(&o.Bridge, "bridge", "br-int", "OVN integration bridge the pods are plugged into")
	fs.StringVar(&o.OVSRunDir, "ovs-rundir", "", "when set, /healthz (raven-node's readiness, not CNI STATUS) checks that ovs-vswitchd answers on its control socket there")
	fs.StringVar(&o.OVNRunDir, "ovn-rundir", "", "when set, /healthz (raven-node's readiness, not CNI STATUS) checks that ovn-controller answers on its control socket there")
	fs.DurationVar(&o.ReadyTimeout, "ready-timeout", 2*time.Minute,
		"how long ADD waits for the port annotation and ovn-installed (the kubelet's CRI timeout is 2m)")
	fs.StringVar(&o.DatapathNetns, "datapath-netns", "", "path of the network namespace where this node's ovs-vswitchd runs, "+
		"which gets the host ends of the pods' veths; empty means raven-node's own")
	fs.StringVar(&o.InstallPlugin, "install-cni-plugin", "", "path of the raven-cni binary to install into --cni-bin-dir, "+
		"with "+ConflistName+" written into --cni-conf-dir, at start")
	fs.StringVar(&o.CNIBinDir, "cni-bin-dir", "/opt/cni/bin", "CNI plugin directory (with --install-cni-plugin)")
	fs.StringVar(&o.CNIConfDir, "cni-conf-dir", "/etc/cni/net.d", "CNI configuration directory (with --install-cni-plugin)")
	fs.StringVar(&o.CNIConflist, "cni-conflist", "", "conflist file to install as "+ConflistName+" instead of the generated one "+
		"(with --install-cni-plugin); it must name raven-cni and the same socket")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", "", "address to serve /metrics and /healthz on; empty means none")
	fs.BoolVar(&o.Nested, "nested", false, "this node is a Nova VM (a nested node): its pods' ports are VLAN subports of the VM port's trunk, "+
		"plugged into --bridge (the VM's own, whose uplink is the VM's NIC) as access ports of their VLAN, or with --vlan-uplink as kernel "+
		"VLAN links, and a pod is ready once its gateway answers ARP")
	fs.StringVar(&o.VLANUplink, "vlan-uplink", "", "with --nested: the VM's NIC (e.g. eth0); each pod's interface is a kernel 802.1Q link "+
		"of its subport's VLAN on it, moved into the pod, and no Open vSwitch is used (the node needs the 8021q module)")
	return o
}

// Validate says what is wrong with the options.
func (o *Options) Validate() error {
	var errs []error
	if o.NodeName == "" {
		errs = append(errs, errors.New("--node-name is empty and the hostname unknown"))
	}
	if o.Socket == "" {
		errs = append(errs, errors.New("--socket is empty"))
	}
	if o.Bridge == "" && o.VLANUplink == "" {
		errs = append(errs, errors.New("--bridge is empty"))
	}
	if o.ReadyTimeout <= 0 {
		errs = append(errs, errors.New("--ready-timeout must be positive"))
	}
	if o.Nested && o.OVNRunDir != "" {
		errs = append(errs, errors.New("--nested and --ovn-rundir: a nested node's VM runs no ovn-controller (the hypervisor's binds its ports)"))
	}
	if o.InstallPlugin != "" && (o.CNIBinDir == "" || o.CNIConfDir == "") {
		errs = append(errs, errors.New("--install-cni-plugin needs --cni-bin-dir and --cni-conf-dir"))
	}
	if o.VLANUplink != "" {
		errs = append(errs, o.validateVLAN()...)
	}
	return errors.Join(errs...)
}

// ovsFlags are the flags of plugging into Open vSwitch, which the kernel-VLAN path does not do.
var ovsFlags = []string{"bridge", "ovs-db", "ovs-rundir", "ovn-rundir", "datapath-netns"}

// validateVLAN says what is wrong with the options of the kernel-VLAN path (--vlan-uplink).
func (o *Options) validateVLAN() []error {
	var errs []error
	if !o.Nested {
		errs = append(errs, errors.New("--vlan-uplink is the kernel-VLAN path of nested nodes: it needs --nested"))
	}
	if len(o.VLANUplink) >= 16 || strings.ContainsAny(o.VLANUplink, "/: \t\n") {
		errs = append(errs, fmt.Errorf("--vlan-uplink=%q is not an interface name (at most 15 characters, no '/', ':' or space)", o.VLANUplink))
	}
	if o.flags == nil {
		return errs
	}
	var given []string
	o.flags.Visit(func(f *flag.Flag) {
		if slices.Contains(ovsFlags, f.Name) {
			given = append(given, "--"+f.Name)
		}
	})
	if len(given) > 0 {
		errs = append(errs, fmt.Errorf("--vlan-uplink plugs pods as kernel VLAN links, without Open vSwitch: remove %s, "+
			"or remove --vlan-uplink to plug into the VM's bridge", strings.Join(given, ", ")))
	}
	return errs
}
