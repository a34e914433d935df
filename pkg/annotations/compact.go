package annotations

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"unsafe"
)

// compactPrefix opens every compact port annotation: the digest comes first, so that Same tells a compact
// value from a whole one by its first bytes.
const compactPrefix = `{"digest":"`

// compactPort is a port annotation as a cache keeps it: what the controller reads of a cached pod's port
// (its ID, network, MAC and addresses), and a digest of the whole value. It decodes into Port like the whole
// value does, with the fields it does not keep empty.
type compactPort struct {
	Digest     string    `json:"digest"`
	ID         string    `json:"id"`
	NetworkID  string    `json:"network_id,omitempty"`
	MACAddress string    `json:"mac_address,omitempty"`
	FixedIPs   []address `json:"fixed_ips,omitempty"`
}

// address is a fixed IP as a compact port keeps it: without its subnet, the namespace's, which nothing reads
// from a cached pod.
type address struct {
	IPAddress string `json:"ip_address"`
}

// digest names a value: the first 12 bytes of its SHA-256, in base64.
func digest(v string) string {
	sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(v), len(v)))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// CompactPort is the value of a port annotation (PodPort) as a cache keeps it: a fifth of its size, with what
// the controller reads of it and a digest of the whole, so that Same can still say whether it is the value
// the controller would write. A value that is not a port annotation, or is already compact, comes back as it
// is.
func CompactPort(v string) string {
	if strings.HasPrefix(v, compactPrefix) {
		return v
	}
	var p compactPort
	if err := json.Unmarshal(unsafe.Slice(unsafe.StringData(v), len(v)), &p); err != nil || p.ID == "" {
		return v
	}
	p.Digest = digest(v)
	b, err := json.Marshal(p)
	if err != nil {
		return v
	}
	return string(b)
}

// Same says whether cur, an annotation's value as a cache keeps it (whole, or compact), is want.
func Same(cur, want string) bool {
	if cur == want {
		return true
	}
	return strings.HasPrefix(cur, compactPrefix) && cur == CompactPort(want)
}
