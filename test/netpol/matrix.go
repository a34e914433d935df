package netpol

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// Table is a connectivity matrix: Table[from][to] is true when a connection
// from pod "ns/name" to pod "ns/name" is allowed.
type Table map[string]map[string]bool

// Matrix computes the expected Table of every ordered pair of pods of c,
// loopback included, on port/proto under policies.
func Matrix(c Cluster, policies []networkingv1.NetworkPolicy, port int32, proto corev1.Protocol) Table {
	t := Table{}
	for _, from := range c.Pods {
		t[from.Key()] = map[string]bool{}
		for _, to := range c.Pods {
			t[from.Key()][to.Key()] = Allowed(c, policies, from, to, port, proto)
		}
	}
	return t
}

// Set records whether from may reach to.
func (t Table) Set(from, to string, allowed bool) {
	if t[from] == nil {
		t[from] = map[string]bool{}
	}
	t[from][to] = allowed
}

// keys returns the pod keys appearing as a row or a column, sorted.
func (t Table) keys() []string {
	seen := map[string]bool{}
	for from, row := range t {
		seen[from] = true
		for to := range row {
			seen[to] = true
		}
	}
	var ks []string
	for k := range seen {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// String prints the table like the upstream truth table: rows are sources,
// columns destinations, "." allowed and "X" blocked.
func (t Table) String() string {
	ks := t.keys()
	return strings.Join(grid(ks, func(from, to string) string { return mark(t[from][to]) }), "\n") + "\n"
}

// SideBySide prints want, got and a comparison grid ("." agree, "X" differ)
// next to each other, for reporting a mismatch.
func SideBySide(want, got Table) string {
	ks := mergeKeys(want.keys(), got.keys())
	a := grid(ks, func(f, to string) string { return mark(want[f][to]) })
	b := grid(ks, func(f, to string) string { return mark(got[f][to]) })
	d := grid(ks, func(f, to string) string { return mark(want[f][to] == got[f][to]) })
	width := 0
	for _, l := range a {
		width = max(width, len(l))
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-*s   %-*s   %s\n", width, "expected", width, "observed", "comparison")
	for i := range a {
		fmt.Fprintf(&sb, "%-*s   %-*s   %s\n", width, a[i], width, b[i], d[i])
	}
	return sb.String()
}

// Pair is one ordered pair of pods on which two tables differ.
type Pair struct {
	From, To  string
	Want, Got bool
}

// Loopback reports whether the pair is a pod talking to itself; the upstream
// suite ignores those pairs because CNIs disagree on them.
func (p Pair) Loopback() bool { return p.From == p.To }

// String formats the pair as "from -> to: want ., got X".
func (p Pair) String() string {
	return fmt.Sprintf("%s -> %s: want %s, got %s", p.From, p.To, mark(p.Want), mark(p.Got))
}

// Diff returns the pairs on which want and got differ, in key order. A pair
// missing from a table counts as blocked. Loopback pairs are included; see
// Pair.Loopback.
func Diff(want, got Table) []Pair {
	var out []Pair
	ks := mergeKeys(want.keys(), got.keys())
	for _, from := range ks {
		for _, to := range ks {
			if w, g := want[from][to], got[from][to]; w != g {
				out = append(out, Pair{From: from, To: to, Want: w, Got: g})
			}
		}
	}
	return out
}

func mergeKeys(a, b []string) []string {
	ks := slices.Concat(a, b)
	slices.Sort(ks)
	return slices.Compact(ks)
}

// grid renders a header line and one line per source, all of equal width.
func grid(keys []string, cell func(from, to string) string) []string {
	w := 1
	for _, k := range keys {
		w = max(w, len(k))
	}
	line := func(head string, cells []string) string {
		var sb strings.Builder
		fmt.Fprintf(&sb, "%-*s", w, head)
		for _, c := range cells {
			fmt.Fprintf(&sb, " %-*s", w, c)
		}
		return strings.TrimRight(sb.String(), " ")
	}
	lines := []string{line("-", keys)}
	for _, from := range keys {
		var cells []string
		for _, to := range keys {
			cells = append(cells, cell(from, to))
		}
		lines = append(lines, line(from, cells))
	}
	return lines
}

func mark(allowed bool) string {
	if allowed {
		return "."
	}
	return "X"
}
