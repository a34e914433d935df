package policy

import (
	"fmt"
	"net/netip"
)

// Subtract is the CIDR cidr minus every except, as the fewest prefixes that cover exactly what remains:
// a true set difference, whatever the number of excepts and however they overlap. An except outside cidr
// removes nothing.
func Subtract(cidr string, excepts []string) ([]string, error) {
	block, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, fmt.Errorf("cidr %q: %w", cidr, err)
	}
	block = block.Masked()
	var ex []netip.Prefix
	for _, e := range excepts {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return nil, fmt.Errorf("except %q: %w", e, err)
		}
		if p.Addr().Is4() != block.Addr().Is4() {
			return nil, fmt.Errorf("except %q is not of the family of %s", e, cidr)
		}
		ex = append(ex, p.Masked())
	}
	var out []string
	for _, p := range subtract(block, ex) {
		out = append(out, p.String())
	}
	return out, nil
}

// subtract splits p in halves until each piece is either inside an except (dropped) or overlaps none (kept).
func subtract(p netip.Prefix, ex []netip.Prefix) []netip.Prefix {
	overlaps := false
	for _, e := range ex {
		if e.Bits() <= p.Bits() && e.Contains(p.Addr()) {
			return nil // p lies inside e
		}
		if p.Overlaps(e) {
			overlaps = true
		}
	}
	if !overlaps {
		return []netip.Prefix{p}
	}
	lo, hi := halves(p)
	return append(subtract(lo, ex), subtract(hi, ex)...)
}

// halves are the two prefixes one bit longer than p that make it up.
func halves(p netip.Prefix) (netip.Prefix, netip.Prefix) {
	bits := p.Bits() + 1
	lo := netip.PrefixFrom(p.Addr(), bits)
	b := p.Addr().AsSlice()
	i := (bits - 1) / 8
	b[i] |= 0x80 >> ((bits - 1) % 8)
	a, _ := netip.AddrFromSlice(b)
	return lo, netip.PrefixFrom(a, bits)
}
