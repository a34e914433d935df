package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
)

// serveCommand is the hidden subcommand that plays a pod's containers: inside the pod's network
// namespace it answers every TCP connection and UDP datagram on the pod's containerPorts with the pod's
// name and a newline.
const serveCommand = "serve"

// ports are a pod's containerPorts by protocol; a port without protocol is TCP.
type ports struct{ tcp, udp []int }

func podPorts(pod *corev1.Pod) ports {
	var p ports
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			switch cp.Protocol {
			case corev1.ProtocolTCP, "":
				p.tcp = append(p.tcp, int(cp.ContainerPort))
			case corev1.ProtocolUDP:
				p.udp = append(p.udp, int(cp.ContainerPort))
			}
		}
	}
	slices.Sort(p.tcp)
	slices.Sort(p.udp)
	p.tcp, p.udp = slices.Compact(p.tcp), slices.Compact(p.udp)
	return p
}

func (p ports) empty() bool { return len(p.tcp) == 0 && len(p.udp) == 0 }

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func splitInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("bad port %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// serveArgs are the subcommand's arguments for a sandbox; --sandbox marks the process as the sandbox's.
func serveArgs(sb *sandbox, netnsPath string, p ports) []string {
	return []string{serveCommand, "--netns=" + netnsPath, "--name=" + sb.Name, "--sandbox=" + sb.ID,
		"--tcp=" + joinInts(p.tcp), "--udp=" + joinInts(p.udp)}
}

// startServer runs the subcommand for a sandbox, in its own process group so that it outlives a restart
// of the stand-in and dies only with its pod; the caller reaps it through the returned wait.
func startServer(self, logPath string, args []string) (pid int, wait func(), err error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, nil, err
	}
	defer logf.Close()
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, nil, fmt.Errorf("starting the pod's server: %w", err)
	}
	return cmd.Process.Pid, func() { _ = cmd.Wait() }, nil
}

// stopServer kills the sandbox's server if pid still is it (a pid can be reused).
func stopServer(pid int, sandboxID string) {
	if pid <= 0 || !serverAlive(pid, sandboxID) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// serverAlive tells whether pid is the server of the sandbox.
func serverAlive(pid int, sandboxID string) bool {
	if pid <= 0 {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		// A zombie (state Z) is dead already.
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			return false
		}
	}
	return slices.Contains(strings.Split(string(cmdline), "\x00"), "--sandbox="+sandboxID)
}

// runServe is the subcommand's main.
func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet(serveCommand, flag.ContinueOnError)
	netnsPath := fs.String("netns", "", "network namespace to serve in")
	name := fs.String("name", "", "what to answer (the pod's name)")
	_ = fs.String("sandbox", "", "the sandbox this process belongs to")
	tcp := fs.String("tcp", "", "TCP ports, comma-separated")
	udp := fs.String("udp", "", "UDP ports, comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tcpPorts, err := splitInts(*tcp)
	if err != nil {
		return err
	}
	udpPorts, err := splitInts(*udp)
	if err != nil {
		return err
	}
	// Sockets belong to the namespace of the thread that opens them: open them all on this locked thread
	// after entering the pod's namespace; serving them can then happen on any thread.
	runtime.LockOSThread()
	if *netnsPath != "" {
		target, err := ns.GetNS(*netnsPath)
		if err != nil {
			return err
		}
		if err := target.Set(); err != nil {
			return fmt.Errorf("entering %s: %w", *netnsPath, err)
		}
	}
	ls, err := listen(tcpPorts, udpPorts)
	if err != nil {
		return err
	}
	return ls.serve(ctx, *name+"\n")
}

type listeners struct {
	tcp []net.Listener
	udp []net.PacketConn
}

func listen(tcp, udp []int) (*listeners, error) {
	ls := &listeners{}
	for _, p := range tcp {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", p))
		if err != nil {
			ls.close()
			return nil, err
		}
		ls.tcp = append(ls.tcp, l)
	}
	for _, p := range udp {
		c, err := net.ListenPacket("udp", fmt.Sprintf(":%d", p))
		if err != nil {
			ls.close()
			return nil, err
		}
		ls.udp = append(ls.udp, c)
	}
	return ls, nil
}

func (ls *listeners) close() {
	for _, l := range ls.tcp {
		_ = l.Close()
	}
	for _, c := range ls.udp {
		_ = c.Close()
	}
}

// serve answers until ctx ends.
func (ls *listeners) serve(ctx context.Context, answer string) error {
	errs := make(chan error, len(ls.tcp)+len(ls.udp))
	for _, l := range ls.tcp {
		go func() { errs <- serveTCP(l, answer) }()
	}
	for _, c := range ls.udp {
		go func() { errs <- serveUDP(c, answer) }()
	}
	select {
	case <-ctx.Done():
		ls.close()
		return nil
	case err := <-errs:
		ls.close()
		return err
	}
}

func serveTCP(l net.Listener, answer string) error {
	for {
		c, err := l.Accept()
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			w := bufio.NewWriter(c)
			_, _ = w.WriteString(answer)
			_ = w.Flush()
		}()
	}
}

func serveUDP(c net.PacketConn, answer string) error {
	buf := make([]byte, 65536)
	for {
		_, from, err := c.ReadFrom(buf)
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		if err != nil {
			return err
		}
		_, _ = c.WriteTo([]byte(answer), from)
	}
}
