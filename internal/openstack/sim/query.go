package sim

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/raven-net/raven/internal/openstack/fake"
)

// listQuery is a list request's query: the fake's Query, and Octavia's load balancer filter.
type listQuery struct {
	fake.Query
	LoadBalancerID string
}

// setters read each query parameter the simulator takes.
var setters = map[string]func(q *listQuery, key string, vals []string) error{
	"limit": func(q *listQuery, key string, vals []string) error {
		v, err := one(key, vals)
		if err != nil {
			return err
		}
		if q.Limit, err = strconv.Atoi(v); err != nil || q.Limit < 0 {
			return bad("Bad limit request: limit must be an integer 0 or greater and not '%s'", v)
		}
		return nil
	},
	"marker":     single(func(q *listQuery) *string { return &q.Marker }),
	"id":         single(func(q *listQuery) *string { return &q.ID }),
	"project_id": single(func(q *listQuery) *string { return &q.ProjectID }),
	"router:external": func(q *listQuery, key string, vals []string) error {
		v, err := one(key, vals)
		if err != nil {
			return err
		}
		if v != "true" && v != "True" {
			return bad("the simulator filters %s by true only, not %q", key, v)
		}
		q.External = true
		return nil
	},
	"name":            single(func(q *listQuery) *string { return &q.Name }),
	"description":     single(func(q *listQuery) *string { return &q.Description }),
	"network_id":      networkIDs,
	"device_id":       single(func(q *listQuery) *string { return &q.DeviceID }),
	"device_owner":    single(func(q *listQuery) *string { return &q.DeviceOwner }),
	"port_id":         many(func(q *listQuery) *[]string { return &q.PortIDs }),
	"loadbalancer_id": single(func(q *listQuery) *string { return &q.LoadBalancerID }),
	"tags":            tagList(func(q *listQuery) *[]string { return &q.Tags }),
	"tags-any":        tagList(func(q *listQuery) *[]string { return &q.TagsAny }),
	"not-tags":        tagList(func(q *listQuery) *[]string { return &q.NotTags }),
	"not-tags-any":    tagList(func(q *listQuery) *[]string { return &q.NotTagsAny }),
	"fixed_ips":       fixedIPs,
	// fields names the attributes each listed object carries (call.page keeps only those), as in Neutron.
	"fields": func(_ *listQuery, key string, vals []string) error {
		if slices.Contains(vals, "") {
			return bad("empty value in %s", key)
		}
		return nil
	},
}

// pageKeys are the parameters every list takes.
var pageKeys = []string{"limit", "marker", "fields"}

// tagKeys are the tag filters.
var tagKeys = []string{"tags", "tags-any", "not-tags", "not-tags-any"}

// parseQuery reads a list's query, refusing (400) a parameter the list does not take (as Neutron's
// filter-validation does) and a filter the simulator cannot apply.
func parseQuery(v url.Values, allowed ...string) (listQuery, error) {
	var q listQuery
	for key, vals := range v {
		set := setters[key]
		if set == nil || !slices.Contains(allowed, key) && !slices.Contains(pageKeys, key) {
			return q, bad("%s is an invalid filter here (the simulator filters this list by %s)", key, strings.Join(allowed, ", "))
		}
		if err := set(&q, key, vals); err != nil {
			return q, err
		}
	}
	return q, nil
}

func one(key string, vals []string) (string, error) {
	if len(vals) != 1 || vals[0] == "" {
		return "", bad("the simulator takes one non-empty value of %s, not %q", key, vals)
	}
	return vals[0], nil
}

func single(field func(*listQuery) *string) func(*listQuery, string, []string) error {
	return func(q *listQuery, key string, vals []string) error {
		v, err := one(key, vals)
		*field(q) = v
		return err
	}
}

// many reads a filter that keeps the objects with any of its values, given as key=a&key=b.
func many(field func(*listQuery) *[]string) func(*listQuery, string, []string) error {
	return func(q *listQuery, key string, vals []string) error {
		if slices.Contains(vals, "") {
			return bad("empty value in %s", key)
		}
		*field(q) = append(*field(q), vals...)
		return nil
	}
}

// networkIDs reads network_id: one value is Filter.NetworkID (which the fake's index looks up), several
// Filter.NetworkIDs.
func networkIDs(q *listQuery, key string, vals []string) error {
	if len(vals) == 1 {
		return single(func(q *listQuery) *string { return &q.NetworkID })(q, key, vals)
	}
	return many(func(q *listQuery) *[]string { return &q.NetworkIDs })(q, key, vals)
}

// tagList reads a tag filter, given as tags=a,b or tags=a&tags=b.
func tagList(field func(*listQuery) *[]string) func(*listQuery, string, []string) error {
	return func(q *listQuery, key string, vals []string) error {
		for _, v := range vals {
			for _, t := range strings.Split(v, ",") {
				if t == "" {
					return bad("empty tag in %s", key)
				}
				*field(q) = append(*field(q), t)
			}
		}
		return nil
	}
}

// fixedIPs reads Neutron's fixed_ips=ip_address=X and fixed_ips=subnet_id=Y filters.
func fixedIPs(q *listQuery, _ string, vals []string) error {
	for _, v := range vals {
		k, val, _ := strings.Cut(v, "=")
		switch {
		case val == "":
			return bad("Invalid fixed_ips filter %q", v)
		case k == "ip_address":
			q.IPAddresses = append(q.IPAddresses, val)
		case k == "subnet_id":
			q.SubnetIDs = append(q.SubnetIDs, val)
		default:
			return bad("the simulator does not filter fixed_ips by %s", k)
		}
	}
	return nil
}
