package manager

import (
	"os"
	"runtime/debug"
)

// GCPercent is Raven's collector target (Go's GOGC) unless the GOGC environment variable sets one: most of
// Raven's heap is its caches, which live as long as the process, and Go's default of 100 lets the heap grow to
// twice them between collections. At 50,000 pods the leader's RSS was 2.3 times its live heap with the default
// (docs/performance.md). 50 costs more collector CPU for less memory; GOGC=100 restores Go's default.
const GCPercent = 50

// gcPercent is the collector target to set for GOGC's value gogc: GCPercent when it is unset or empty, else 0
// (leave the runtime's own, which already follows GOGC).
func gcPercent(gogc string) int {
	if gogc != "" {
		return 0
	}
	return GCPercent
}

// TuneGC sets the collector target (see GCPercent).
func TuneGC() {
	if p := gcPercent(os.Getenv("GOGC")); p > 0 {
		debug.SetGCPercent(p)
	}
}
