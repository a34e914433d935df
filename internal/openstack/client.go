package openstack

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"sigs.k8s.io/yaml"
)

// Clients are the authenticated OpenStack services Raven talks to.
type Clients struct {
	Networking    Networking
	LoadBalancing LoadBalancing
	// Calls counts every request made through these clients.
	Calls *CallCounter
}

// cloudEntry is the part of a clouds.yaml entry that gophercloud's parser does not cover:
// auth_type "none" with endpoint overrides, for OpenStack services running without Keystone.
type cloudEntry struct {
	AuthType string `json:"auth_type"`
	Auth     struct {
		ProjectID string `json:"project_id"`
	} `json:"auth"`
	NetworkEndpoint      string `json:"network_endpoint_override"`
	LoadBalancerEndpoint string `json:"load_balancer_endpoint_override"`
	Verify               *bool  `json:"verify"`
}

// NewClients reads cloud from cloudsFile (clouds.yaml) and connects to Neutron and Octavia.
// Password and application-credential authentication go through Keystone; auth_type "none"
// talks to the endpoint overrides directly. TLS verification stays on unless the cloud says verify: false.
func NewClients(ctx context.Context, cloudsFile, cloud string, obs Observer) (*Clients, error) {
	raw, err := os.ReadFile(cloudsFile)
	if err != nil {
		return nil, fmt.Errorf("reading clouds file: %w", err)
	}
	var doc struct {
		Clouds map[string]cloudEntry `json:"clouds"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", cloudsFile, err)
	}
	entry, ok := doc.Clouds[cloud]
	if !ok {
		return nil, fmt.Errorf("cloud %q not found in %s", cloud, cloudsFile)
	}
	calls := &CallCounter{}
	if entry.AuthType == "none" || entry.AuthType == "noauth" {
		return noauthClients(entry, obs, calls)
	}

	ao, eo, tlsConfig, err := clouds.Parse(clouds.WithLocations(cloudsFile), clouds.WithCloudName(cloud))
	if err != nil {
		return nil, fmt.Errorf("reading cloud %q: %w", cloud, err)
	}
	ao.AllowReauth = true
	pc, err := config.NewProviderClient(ctx, ao, config.WithHTTPClient(httpClient(tlsConfig, "", obs, calls)))
	if err != nil {
		return nil, fmt.Errorf("authenticating to cloud %q: %w", cloud, wrap("keystone authenticate", err))
	}
	project, err := tokenProject(pc)
	if err != nil {
		return nil, fmt.Errorf("cloud %q: %w", cloud, err)
	}
	net, err := gcopenstack.NewNetworkV2(pc, eo)
	if err != nil {
		return nil, fmt.Errorf("finding the network endpoint: %w", err)
	}
	lb, err := gcopenstack.NewLoadBalancerV2(pc, eo)
	if err != nil {
		return nil, fmt.Errorf("finding the load-balancer endpoint: %w", err)
	}
	return &Clients{Networking: NewProjectNetworking(net, project), LoadBalancing: NewLoadBalancing(lb), Calls: calls}, nil
}

// tokenProject returns the project of pc's Keystone token. Raven's objects are that project's, and the lookups
// of objects that may not carry Raven's tags yet are scoped by it: credentials that see every project (an
// admin's) would otherwise find another project's object of the same name or description.
func tokenProject(pc *gophercloud.ProviderClient) (string, error) {
	r, ok := pc.GetAuthResult().(interface {
		ExtractProject() (*tokens.Project, error)
	})
	if !ok {
		return "", fmt.Errorf("the credentials did not give a Keystone v3 token, which names Raven's project")
	}
	p, err := r.ExtractProject()
	if err != nil {
		return "", fmt.Errorf("reading the token's project: %w", err)
	}
	if p == nil || p.ID == "" {
		return "", fmt.Errorf("the credentials are not scoped to a project: give project_name or project_id in clouds.yaml")
	}
	return p.ID, nil
}

func noauthClients(e cloudEntry, obs Observer, calls *CallCounter) (*Clients, error) {
	if e.NetworkEndpoint == "" || e.LoadBalancerEndpoint == "" {
		return nil, fmt.Errorf("auth_type none needs network_endpoint_override and load_balancer_endpoint_override")
	}
	var tlsConfig *tls.Config
	if e.Verify != nil && !*e.Verify {
		tlsConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the operator asked for it with verify: false
	}
	// Neutron without Keystone treats an identity-less request as admin; Octavia wants a project.
	mk := func(endpoint, project string) *gophercloud.ServiceClient {
		endpoint = strings.TrimSuffix(endpoint, "/") + "/"
		pc := &gophercloud.ProviderClient{HTTPClient: httpClient(tlsConfig, project, obs, calls)}
		return &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: endpoint, ResourceBase: endpoint + "v2.0/"}
	}
	project := e.Auth.ProjectID
	if project == "" {
		project = "raven"
	}
	return &Clients{
		Networking:    NewNetworking(mk(e.NetworkEndpoint, "")),
		LoadBalancing: NewLoadBalancing(mk(e.LoadBalancerEndpoint, project)),
		Calls:         calls,
	}, nil
}

func httpClient(tlsConfig *tls.Config, project string, obs Observer, calls *CallCounter) http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	t.MaxIdleConns = 128
	if tlsConfig != nil {
		t.TLSClientConfig = tlsConfig
	}
	// No client-wide timeout: the meter gives each request its own (timeoutFor).
	return http.Client{Transport: &meter{next: t, project: project, obs: obs, calls: calls}}
}
