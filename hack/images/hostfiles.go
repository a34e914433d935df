package main

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// maxLinks bounds the symlinks followed for one path, as the kernel's ELOOP does.
const maxLinks = 40

// hostFiles copies files of the host into an image at the same paths.
type hostFiles struct {
	// root is where the host's "/" is: "/" itself, or a test's tree.
	root  string
	files fileset
}

// addWithLibs adds the executable at p and every shared library ldd says it loads, the dynamic loader
// included: the image has no other libc than what is copied in.
func (h hostFiles) addWithLibs(ctx context.Context, p string) error {
	if err := h.add(p); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "ldd", p)
	if h.root != "/" {
		// The root's own loader and libraries, as its programs see them.
		cmd = exec.CommandContext(ctx, "chroot", h.root, "ldd", p)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ldd %s: %w: %s", p, err, strings.TrimSpace(string(out)))
	}
	libs, err := parseLdd(string(out))
	if err != nil {
		return fmt.Errorf("ldd %s: %w", p, err)
	}
	for _, lib := range libs {
		if err := h.add(lib); err != nil {
			return fmt.Errorf("a library of %s: %w", p, err)
		}
	}
	return nil
}

// lookPath finds the program name in the root's usual PATH, as a path in the root.
func (h hostFiles) lookPath(name string) (string, error) {
	for _, dir := range strings.Split(strings.TrimPrefix(defaultPath, "PATH="), ":") {
		p := path.Join(dir, name)
		if fi, err := os.Stat(h.hostPath(p)); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in %s", name, defaultPath)
}

// add copies the file at absolute path p, with every symlink on the way to it: a binary asks for
// /lib64/ld-linux-x86-64.so.2 and a library for libz.so.1, and on the host these are symlinks
// (/lib64 -> usr/lib64, libz.so.1 -> libz.so.1.2.13). The image gets the same symlinks and the file at
// its resolved path, so that every name the binaries use resolves in the image as it does on the host.
func (h hostFiles) add(p string) error {
	return h.addFrom(p, 0)
}

func (h hostFiles) addFrom(p string, links int) error {
	if links > maxLinks {
		return fmt.Errorf("%s: too many levels of symbolic links", p)
	}
	parts := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	// cur has no symlink in it: each one met is resolved before going on.
	cur := "/"
	for i, part := range parts {
		next := path.Join(cur, part)
		fi, err := os.Lstat(h.hostPath(next))
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		target, err := os.Readlink(h.hostPath(next))
		if err != nil {
			return err
		}
		if err := h.files.addSymlink(next, target); err != nil {
			return err
		}
		if !path.IsAbs(target) {
			target = path.Join(cur, target)
		}
		return h.addFrom(path.Join(append([]string{target}, parts[i+1:]...)...), links+1)
	}
	return h.addRegular(cur)
}

func (h hostFiles) addRegular(p string) error {
	fi, err := os.Stat(h.hostPath(p))
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	data, err := os.ReadFile(h.hostPath(p))
	if err != nil {
		return err
	}
	return h.files.addFile(p, int64(fi.Mode().Perm()), data)
}

func (h hostFiles) hostPath(p string) string { return filepath.Join(h.root, filepath.FromSlash(p)) }

// staticBinary reads a binary of --bin and checks that it is for amd64 and statically linked: a dynamic one fails in
// the image with a bare "no such file or directory" (its loader is missing), a long way from the cause.
func staticBinary(p string) ([]byte, error) {
	f, err := elf.Open(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("%s is for %s; the images are linux/amd64", p, f.Machine)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", p)
		}
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, errors.New(p + " is empty")
	}
	return data, nil
}
