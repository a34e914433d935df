package server

import (
	"slices"
	"sync"
)

// keyedLocks serialises the changes to one host interface; entries live only while someone holds them.
type keyedLocks struct {
	mu sync.Mutex
	m  map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	users int
}

// lock takes the key's lock and returns its release.
func (k *keyedLocks) lock(key string) func() {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedLock{}
	}
	l, ok := k.m[key]
	if !ok {
		l = &keyedLock{}
		k.m[key] = l
	}
	l.users++
	k.mu.Unlock()

	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		l.users--
		if l.users == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// lockBoth takes the locks of two keys (one when they are the same) in the order of their names, so that two
// callers taking two of the same keys never wait on each other; it returns the release of both.
func (k *keyedLocks) lockBoth(a, b string) func() {
	if a == b {
		return k.lock(a)
	}
	keys := []string{a, b}
	slices.Sort(keys)
	first := k.lock(keys[0])
	second := k.lock(keys[1])
	return func() { second(); first() }
}
