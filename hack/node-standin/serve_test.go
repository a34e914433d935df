package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/signal"
	"reflect"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestMain lets the test binary play the serve subcommand, as node-standin's own binary does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == serveCommand {
		ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		err := runServe(ctx, os.Args[2:])
		cancel()
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestPodPorts(t *testing.T) {
	tests := []struct {
		name  string
		ports [][]corev1.ContainerPort
		want  ports
	}{
		{name: "no ports", want: ports{}},
		{name: "a port without protocol is TCP", ports: [][]corev1.ContainerPort{{{ContainerPort: 80}}}, want: ports{tcp: []int{80}}},
		{
			name: "TCP and UDP as declared, across containers, without repeats",
			ports: [][]corev1.ContainerPort{
				{{ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {ContainerPort: 53, Protocol: corev1.ProtocolTCP}},
				{{ContainerPort: 8080}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {ContainerPort: 9, Protocol: corev1.ProtocolSCTP}},
			},
			want: ports{tcp: []int{53, 8080}, udp: []int{53}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{}
			for _, ps := range tt.ports {
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Ports: ps})
			}
			if got := podPorts(pod); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("podPorts = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := l.Addr().(*net.TCPAddr).Port
	u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Skipf("port %d free for TCP but not UDP", p)
	}
	_ = u.Close()
	return p
}

func TestServeAnswersWithThePodName(t *testing.T) {
	p := freePort(t)
	ls, err := listen([]int{p}, []int{p})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = ls.serve(t.Context(), "web-0\n") }()
	expectAnswers(t, "127.0.0.1", p, "web-0\n")
}

// expectAnswers checks that TCP and UDP on port answer want.
func expectAnswers(t *testing.T, host string, port int, want string) {
	t.Helper()
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != want {
		t.Errorf("TCP answer %q, %v, want %q", line, err, want)
	}
	u, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	_ = u.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := u.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	n, err := u.Read(buf)
	if err != nil || string(buf[:n]) != want {
		t.Errorf("UDP answer %q, %v, want %q", buf[:n], err, want)
	}
}

func TestJoinAndSplitPorts(t *testing.T) {
	got, err := splitInts(joinInts([]int{80, 443}))
	if err != nil || !reflect.DeepEqual(got, []int{80, 443}) {
		t.Errorf("round trip = %v, %v", got, err)
	}
	if got, err := splitInts(""); err != nil || len(got) != 0 {
		t.Errorf("empty = %v, %v", got, err)
	}
	if _, err := splitInts("80,x"); err == nil {
		t.Error("a bad port was accepted")
	}
}
