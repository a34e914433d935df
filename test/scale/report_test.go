//go:build bench

package scale

import (
	"fmt"
	"math"
	"strings"
)

func num(m map[string]any, phase, key string) float64 {
	p, _ := m[phase].(map[string]any)
	switch v := p[key].(type) {
	case float64:
		return v
	case int:
		return float64(v)
	case int64:
		return float64(v)
	}
	return math.NaN() // a phase not run, or a figure it has not
}

// curve compares each size with the one before: how much Raven's costs grew as the pods grew.
func curve(sizes []map[string]any) []map[string]any {
	var out []map[string]any
	for i := 1; i < len(sizes); i++ {
		a, b := sizes[i-1], sizes[i]
		pods := float64(b["pods"].(int)) / float64(a["pods"].(int))
		ratio := func(phase, key string) float64 {
			if x, y := num(a, phase, key), num(b, phase, key); x > 0 && !math.IsNaN(y) {
				return y / x
			}
			return 0 // a phase not run at one of the two sizes
		}
		out = append(out, map[string]any{
			"from": a["pods"], "to": b["pods"], "pods_ratio": pods,
			"leader_rss_ratio":      ratio("steady", "leader_rss_mib"),
			"grow_cpu_per_pod":      ratio("grow", "raven_cpu_ms_per_pod"),
			"churn_cpu_per_pod":     ratio("churn", "raven_cpu_ms_per_pod"),
			"resync_calls_ratio":    ratio("steady", "calls"),
			"coldstart_ratio":       ratio("coldstart", "reconciled_s"),
			"coldstart_calls_ratio": ratio("coldstart", "calls"),
		})
	}
	return out
}

func markdown(res map[string]any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Scale benchmark (make bench-scale)\n\n%v, Raven %v, %v.\n\nSimulated OpenStack: %v\n\n",
		res["when"], res["raven"], res["machine"], modelSource(res))
	sizes, _ := res["sizes"].([]map[string]any)
	b.WriteString("| pods | nodes | namespaces = Services | cold start → reconciled (s) | its floor: all lists / the port listing alone (s) | its list calls / pages / writes | failover → first write (s) | churn p50 / p99 (ms) | churn floor p99 (ms) | calls per pod (churn) | Raven CPU per pod (churn, ms) | calls per resync | leader RSS (MiB) | RSS per pod (KiB) | leader / standby Go heap in use (MiB) | free pool ports / budget |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range sizes {
		fmt.Fprintf(&b, "| %v | %v | %v | %.1f | %.1f / %.1f | %.0f / %.0f / %.0f | %.1f | %.0f / %.0f | %.0f | %.2f | %.1f | %.0f | %.0f | %.1f | %.0f / %.0f | %.0f / %d |\n",
			s["pods"], s["nodes"], s["namespaces"], num(s, "coldstart", "reconciled_s"),
			num(s, "coldstart", "floor_list_s"), num(s, "coldstart", "floor_ports_s"),
			num(s, "coldstart", "list_calls"), num(s, "coldstart", "list_pages"), num(s, "coldstart", "writes"),
			num(s, "failover", "to_first_write_s"), num(s, "churn", "p50_ms"), num(s, "churn", "p99_ms"), num(s, "churn", "floor_p99_ms"),
			num(s, "churn", "calls_per_pod"), num(s, "churn", "raven_cpu_ms_per_pod"), num(s, "steady", "calls"),
			num(s, "steady", "leader_rss_mib"), num(s, "steady", "rss_kib_per_pod"),
			num(s, "steady", "leader_heap_inuse_mib"), num(s, "steady", "standby_heap_inuse_mib"), num(s, "steady", "free_pool_ports"), *budgetFlag)
	}
	b.WriteString("\nCalls per resync are those of a resync between two listings of every port, which lists the namespace networks, " +
		"their subnets and the router's interfaces, not the ports; a resync that lists every port (at start, then once every portAuditPeriod) " +
		"costs about the cold start's port pages, and the artifact records the one the steady window met, if any (steady.whole_listing_resync).\n")
	if c, ok := res["curve"].([]map[string]any); ok {
		b.WriteString("\n| from → to pods | × pods | × leader RSS | × CPU per pod (grow) | × CPU per pod (churn) | × calls per resync | × cold start |\n|---|---|---|---|---|---|---|\n")
		for _, r := range c {
			fmt.Fprintf(&b, "| %v → %v | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r["from"], r["to"], r["pods_ratio"], r["leader_rss_ratio"],
				r["grow_cpu_per_pod"], r["churn_cpu_per_pod"], r["resync_calls_ratio"], r["coldstart_ratio"])
		}
	}
	fmt.Fprintf(&b, "\nRaven's configuration:\n\n```yaml\n%v```\n", res["raven_config"])
	return b.String()
}

func modelSource(res map[string]any) any {
	if m, ok := res["model"].(map[string]any); ok {
		return m["source"]
	}
	return "?"
}
