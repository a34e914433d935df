package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
)

func TestNamedNetns(t *testing.T) {
	needRoot(t)
	name := "standintest_netns"
	t.Cleanup(func() { _ = removeNetns(name) })
	path, err := createNetns(name)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join("/var/run/netns", name) {
		t.Errorf("path %s", path)
	}
	if err := ns.IsNSorErr(path); err != nil {
		t.Fatalf("%s is not a network namespace: %v", path, err)
	}
	// Read on a thread of this test, not /proc/self: the main thread may have made a namespace of its own
	// before (the runtime parks a locked main thread instead of ending it).
	var host string
	err = ns.WithNetNSPath("/proc/thread-self/ns/net", func(ns.NetNS) error {
		host, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var inside string
	if err := ns.WithNetNSPath(path, func(ns.NetNS) error {
		inside, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if inside == host {
		t.Errorf("the namespace is the host's (%s)", host)
	}
	// Creating it again keeps it.
	if again, err := createNetns(name); err != nil || again != path {
		t.Errorf("second create = %s, %v", again, err)
	}
	for range 2 {
		if err := removeNetns(name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s still there", path)
	}
}
