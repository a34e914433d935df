package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
)

// netnsDir is where `ip netns` keeps named namespaces; a namespace mounted here is visible to
// `ip netns exec <name>`.
const netnsDir = "/var/run/netns"

// createNetns makes a persistent network namespace called name (bind-mounted under netnsDir) and returns
// its path; an existing one of that name is kept.
func createNetns(name string) (string, error) {
	path := filepath.Join(netnsDir, name)
	if err := ns.IsNSorErr(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(netnsDir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", netnsDir, err)
	}
	// Like `ip netns add`: make the directory a shared mount point so that the namespace mounts under it
	// propagate to other mount namespaces (a raven-node container mounts it with HostToContainer).
	if err := unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		if err := unix.Mount(netnsDir, netnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return "", fmt.Errorf("bind-mounting %s on itself: %w", netnsDir, err)
		}
		if err := unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
			return "", fmt.Errorf("making %s shared: %w", netnsDir, err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return "", fmt.Errorf("creating the mount point %s: %w", path, err)
	}
	_ = f.Close()

	// A fresh namespace exists only on a thread that unshared it; that thread is never given back to the
	// Go scheduler (its goroutine ends while still locked, so the runtime ends the thread).
	var wg sync.WaitGroup
	var mountErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			mountErr = fmt.Errorf("unshare: %w", err)
			return
		}
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		if err := unix.Mount(self, path, "none", unix.MS_BIND, ""); err != nil {
			mountErr = fmt.Errorf("bind-mounting %s on %s: %w", self, path, err)
		}
	}()
	wg.Wait()
	if mountErr != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("creating network namespace %s: %w", name, mountErr)
	}
	return path, nil
}

// removeNetns unmounts and removes the named namespace; a missing one is fine.
func removeNetns(name string) error {
	path := filepath.Join(netnsDir, name)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting network namespace %s: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing network namespace %s: %w", name, err)
	}
	return nil
}
