package fake

import (
	"container/heap"
	"net/netip"
)

// allocator hands out the addresses of one subnet as the unindexed fake does, the lowest free address of the
// allocation pool first, without looking at every port: next is the lowest address never handed out, freed
// holds the free ones below it.
type allocator struct {
	start, end, next netip.Addr
	freed            addrHeap
	// used are the subnet's addresses that ports (or floating IPs) hold, in the pool or not.
	used map[netip.Addr]struct{}
}

func newAllocator(start, end string) *allocator {
	a := &allocator{used: map[netip.Addr]struct{}{}}
	if s, err := netip.ParseAddr(start); err == nil {
		a.start, a.next = s, s
	}
	if e, err := netip.ParseAddr(end); err == nil {
		a.end = e
	}
	return a
}

// take marks ip held; false when it was held already.
func (a *allocator) take(ip netip.Addr) bool {
	if _, ok := a.used[ip]; ok {
		return false
	}
	a.used[ip] = struct{}{}
	return true
}

// release gives ip back.
func (a *allocator) release(ip netip.Addr) {
	if _, ok := a.used[ip]; !ok {
		return
	}
	delete(a.used, ip)
	if a.start.IsValid() && ip.Compare(a.start) >= 0 && ip.Compare(a.next) < 0 {
		heap.Push(&a.freed, ip)
	}
}

// held says whether a port holds ip.
func (a *allocator) held(ip netip.Addr) bool {
	_, ok := a.used[ip]
	return ok
}

// allocate takes the lowest free address of the pool; false when there is none.
func (a *allocator) allocate() (netip.Addr, bool) {
	for a.freed.Len() > 0 {
		ip := heap.Pop(&a.freed).(netip.Addr)
		if a.take(ip) {
			return ip, true
		}
	}
	for a.next.IsValid() && a.end.IsValid() && a.next.Compare(a.end) <= 0 {
		ip := a.next
		a.next = a.next.Next()
		if a.take(ip) {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// addrHeap is a min-heap of addresses.
type addrHeap []netip.Addr

func (h addrHeap) Len() int           { return len(h) }
func (h addrHeap) Less(i, j int) bool { return h[i].Less(h[j]) }
func (h addrHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }

// Push implements heap.Interface.
func (h *addrHeap) Push(x any) { *h = append(*h, x.(netip.Addr)) }

// Pop implements heap.Interface.
func (h *addrHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
