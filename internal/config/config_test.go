package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "raven.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const valid = `
clusterID: c1
openstack: {cloudsFile: /x/clouds.yaml, cloud: raven}
neutron: {serviceSubnetCIDR: 10.0.0.0/24, externalSubnetCIDR: 172.24.4.0/24}
resyncPeriod: 10s
`

func ovnWithDefaultMonitors(o Options) bool {
	want := HealthMonitor{Enabled: true, DelaySeconds: 2, TimeoutSeconds: 1, MaxRetries: 1, MaxRetriesDown: 2, UDPConnectDelaySeconds: 3}
	return o.Octavia.Provider == "ovn" && o.Octavia.HealthMonitor == want
}

func TestLoadAndFlags(t *testing.T) {
	cases := []struct {
		name    string
		file    string
		args    []string
		check   func(Options) bool
		wantErr string
	}{
		{"the file fills the options over the defaults", valid, nil,
			func(o Options) bool {
				return o.ClusterID == "c1" && o.ResyncPeriod.Duration == 10*time.Second && o.Workers == 16
			}, ""},
		{"a flag given on the command line wins over the file", valid, []string{"--cluster-id=c2", "--workers=3"},
			func(o Options) bool { return o.ClusterID == "c2" && o.Workers == 3 }, ""},
		{"a flag left out does not reset the file's value", valid, []string{"--workers=3"},
			func(o Options) bool { return o.ClusterID == "c1" }, ""},
		{"pools.recycle is off unless asked for", valid, nil,
			func(o Options) bool { return o.Pools.Enabled && !o.Pools.Recycle }, ""},
		{"pools.recycle read from the file, the rest of pools kept", valid + "pools: {enabled: true, minFree: 5, batch: 10, max: 50, recycle: true}\n", nil,
			func(o Options) bool { return o.Pools.Recycle && o.Pools.Max == 50 }, ""},
		{"health monitors are on by default, and a provider alone keeps them", valid + "octavia: {provider: ovn}\n", nil,
			ovnWithDefaultMonitors, ""},
		{"health monitors can be turned off", valid + "octavia: {healthMonitor: {enabled: false}}\n", nil,
			func(o Options) bool { return !o.Octavia.HealthMonitor.Enabled }, ""},
		{"a probe timeout longer than its delay is an error", valid + "octavia: {healthMonitor: {enabled: true, delaySeconds: 2, timeoutSeconds: 3, maxRetries: 1, maxRetriesDown: 2}}\n", nil, nil, "octavia.healthMonitor"},
		{"Raven serves its own loadBalancerClass unless told another", valid, nil,
			func(o Options) bool { return o.Octavia.LoadBalancerClass == "raven.io/octavia" }, ""},
		{"loadBalancerClass read from the file", valid + "octavia: {loadBalancerClass: example.com/lb}\n", nil,
			func(o Options) bool { return o.Octavia.LoadBalancerClass == "example.com/lb" }, ""},
		{"a loadBalancerClass Kubernetes would refuse is an error", valid + "octavia: {loadBalancerClass: 'not a/class/at all'}\n", nil, nil, "octavia.loadBalancerClass"},
		{"an empty loadBalancerClass is an error", valid + "octavia: {loadBalancerClass: ''}\n", nil, nil, "octavia.loadBalancerClass"},
		{"nested nodes are off unless a worker subnet is named", valid, nil,
			func(o Options) bool { return o.Nested.WorkerSubnetID == "" }, ""},
		{"nested nodes by label", valid + "nested: {workerSubnetID: s1, nodeSelector: raven.io/nested=true}\n", nil,
			func(o Options) bool {
				return o.Nested.WorkerSubnetID == "s1" && o.Nested.NodeSelector == "raven.io/nested=true"
			}, ""},
		{"a nested node selector without a worker subnet is an error", valid + "nested: {nodeSelector: a=b}\n", nil, nil, "nested.workerSubnetID"},
		{"a bad nested node selector is an error", valid + "nested: {workerSubnetID: s1, nodeSelector: '=='}\n", nil, nil, "nested.nodeSelector"},
		{"an unknown field is an error", valid + "bogus: 1\n", nil, nil, "bogus"},
		{"a bad CIDR is an error", strings.Replace(valid, "10.0.0.0/24", "10.0.0.0/33", 1), nil, nil, "serviceSubnetCIDR"},
		{"a bad duration is an error", strings.Replace(valid, "10s", "ten", 1), nil, nil, "duration"},
		{"every port is listed every 30 minutes unless asked otherwise", valid, nil,
			func(o Options) bool { return o.PortAuditPeriod.Duration == 30*time.Minute }, ""},
		{"portAuditPeriod from the flag", valid + "portAuditPeriod: 1h\n", []string{"--port-audit-period=0s"},
			func(o Options) bool { return o.PortAuditPeriod.Duration == 0 }, ""},
		{"a negative portAuditPeriod is an error", valid + "portAuditPeriod: -1m\n", nil, nil, "portAuditPeriod"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OS_CLIENT_CONFIG_FILE", "")
			t.Setenv("OS_CLOUD", "")
			fs := flag.NewFlagSet("raven", flag.ContinueOnError)
			f := BindFlags(fs)
			if err := fs.Parse(append([]string{"--config=" + writeFile(t, tc.file)}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			o, err := f.Options()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(o) {
				t.Fatalf("unexpected options %+v", o)
			}
		})
	}
}

// The configuration shipped in deploy/ must load (unknown fields are errors) and validate.
func TestDeployedConfigLoads(t *testing.T) {
	// deploy/kustomization.yaml makes the ConfigMap raven-config of this file.
	raw, err := os.ReadFile("../../deploy/raven.yaml")
	if err != nil {
		t.Fatal(err)
	}
	body := string(raw)
	o, err := Load(writeFile(t, body))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if !o.Pools.Enabled || o.Pools.Recycle || !o.LeaderElection.Enabled {
		t.Errorf("deployed pools %+v, leader election %v; want pools on, recycling off, leader election on", o.Pools, o.LeaderElection.Enabled)
	}
	// What measured best on ML2/OVN, the only Neutron whose chassis raven-node plugs pods into.
	if !o.Pools.PerNode || o.Octavia.Provider != "ovn" {
		t.Errorf("deployed pools.perNode %v, octavia.provider %q; want the per-node pools and the ovn provider", o.Pools.PerNode, o.Octavia.Provider)
	}
}
