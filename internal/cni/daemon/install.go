package daemon

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/libcni"

	"github.com/raven-net/raven/internal/cni/wire"
)

// ConflistName is the file raven-node writes into the CNI configuration directory. Runtimes use the first
// configuration of the directory in lexical order, so the name sorts before the usual ones (05-cilium,
// 10-calico, 10-containerd-net).
const ConflistName = "00-raven.conflist"

// formerConflistName is the name of the conflist of former releases, removed at install when it is Raven's.
const formerConflistName = "10-raven.conflist"

// Install copies the plugin binary into binDir as raven-cni and writes the conflist naming socket into
// confDir: the given one (conflist, a file) when set, else a generated one. Both land atomically (written
// aside, then renamed), so a runtime never runs half a binary or reads half a file.
func Install(plugin, binDir, confDir, socket, conflist string) error {
	src, err := os.Open(plugin)
	if err != nil {
		return fmt.Errorf("installing the CNI plugin: %w", err)
	}
	defer src.Close()
	if err := writeAtomic(filepath.Join(binDir, wire.PluginType), 0o755, func(w io.Writer) error {
		_, err := io.Copy(w, src)
		return err
	}); err != nil {
		return fmt.Errorf("installing the CNI plugin from %s: %w", plugin, err)
	}
	conf, err := conflistBytes(conflist, socket)
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(confDir, ConflistName), 0o644, func(w io.Writer) error {
		_, err := w.Write(conf)
		return err
	}); err != nil {
		return fmt.Errorf("writing the CNI configuration: %w", err)
	}
	return removeFormerConflist(filepath.Join(confDir, formerConflistName))
}

// removeFormerConflist removes the conflist a former release installed under its former name, when it is
// Raven's (it names raven-cni); anything else of that name is left alone.
func removeFormerConflist(path string) error {
	list, err := libcni.ConfListFromFile(path)
	if err != nil {
		return nil // none, or not a conflist: not Raven's
	}
	for _, p := range list.Plugins {
		if p.Network.Type == wire.PluginType {
			if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("removing the former CNI configuration %s: %w", path, err)
			}
			return nil
		}
	}
	return nil
}

func writeAtomic(path string, mode os.FileMode, fill func(io.Writer) error) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := fill(tmp); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// conflistBytes is the generated conflist, or the given file once checked: it must load with libcni and
// have a raven-cni entry whose socket is raven-node's.
func conflistBytes(file, socket string) ([]byte, error) {
	if file == "" {
		return wire.Conflist(socket)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the conflist to install: %w", err)
	}
	list, err := libcni.NetworkConfFromBytes(b)
	if err != nil {
		return nil, fmt.Errorf("conflist %s: %w", file, err)
	}
	for _, p := range list.Plugins {
		if p.Network.Type != wire.PluginType {
			continue
		}
		conf, err := wire.ParseNetConf(p.Bytes)
		if err != nil {
			return nil, fmt.Errorf("conflist %s: %w", file, err)
		}
		if conf.Socket != socket {
			return nil, fmt.Errorf("conflist %s: raven-cni's socket is %s, but raven-node listens on %s", file, conf.Socket, socket)
		}
		return b, nil
	}
	return nil, fmt.Errorf("conflist %s has no %s plugin", file, wire.PluginType)
}
