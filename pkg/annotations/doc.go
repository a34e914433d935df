// Package annotations holds every annotation key Raven reads or writes, and the Go types that encode and
// decode their JSON values. A CNI plugin can import this package to read what Raven wrote; the format is
// documented in docs/annotations.md.
package annotations
