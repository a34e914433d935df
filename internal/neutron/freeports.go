package neutron

import (
	"slices"
	"strings"
)

// freePorts holds the free pool ports by pool (poolKey), with the pools of each network and the total kept
// alongside, so that a resync over thousands of namespaces and nodes never scans every pool per network.
type freePorts struct {
	ids map[string][]string
	// hosts counts the free ports of each network's pools: network ID → host → ports.
	hosts map[string]map[string]int
	total int
}

func newFreePorts() freePorts {
	return freePorts{ids: map[string][]string{}, hosts: map[string]map[string]int{}}
}

func (f *freePorts) add(key, id string) {
	f.ids[key] = append(f.ids[key], id)
	net, host, _ := strings.Cut(key, "|")
	if f.hosts[net] == nil {
		f.hosts[net] = map[string]int{}
	}
	f.hosts[net][host]++
	f.total++
}

// remove takes id out of the pool key, if it is there.
func (f *freePorts) remove(key, id string) {
	ids := f.ids[key]
	i := slices.Index(ids, id)
	if i < 0 {
		return
	}
	ids = slices.Delete(ids, i, i+1)
	if len(ids) == 0 {
		delete(f.ids, key)
	} else {
		f.ids[key] = ids
	}
	net, host, _ := strings.Cut(key, "|")
	if f.hosts[net][host]--; f.hosts[net][host] <= 0 {
		delete(f.hosts[net], host)
		if len(f.hosts[net]) == 0 {
			delete(f.hosts, net)
		}
	}
	f.total--
}

func (f *freePorts) in(key string) []string { return f.ids[key] }

// hostsOf lists the hosts whose pools of the network hold free ports, sorted.
func (f *freePorts) hostsOf(networkID string) []string {
	out := make([]string, 0, len(f.hosts[networkID]))
	for h := range f.hosts[networkID] {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}
