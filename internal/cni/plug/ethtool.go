package plug

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolValue is struct ethtool_value.
type ethtoolValue struct {
	cmd  uint32
	data uint32
}

// ifreqData is struct ifreq with ifr_data: the name, then the pointer, padded to the union's size.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

func ethtool(ifName string, cmd, data uint32) (uint32, error) {
	if len(ifName) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("interface name %q too long", ifName)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("socket for ethtool: %w", err)
	}
	defer unix.Close(fd)
	val := &ethtoolValue{cmd: cmd, data: data}
	req := &ifreqData{data: unsafe.Pointer(val)}
	copy(req.name[:], ifName)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(req))); errno != 0 {
		return 0, errno
	}
	return val.data, nil
}

// SetTxChecksum turns TX checksum offload of the interface on or off (ethtool -K <if> tx on|off); the
// kernel turns the features that depend on it (TSO) off with it. The userspace datapath never fills in
// a checksum left partial by the pod's kernel, so the pod end must compute its own.
func SetTxChecksum(ifName string, on bool) error {
	var v uint32
	if on {
		v = 1
	}
	if _, err := ethtool(ifName, unix.ETHTOOL_STXCSUM, v); err != nil {
		return fmt.Errorf("setting tx checksum offload of %s to %v: %w", ifName, on, err)
	}
	return nil
}

// TxChecksum reads whether TX checksum offload is on.
func TxChecksum(ifName string) (bool, error) {
	v, err := ethtool(ifName, unix.ETHTOOL_GTXCSUM, 0)
	if err != nil {
		return false, fmt.Errorf("reading tx checksum offload of %s: %w", ifName, err)
	}
	return v != 0, nil
}
