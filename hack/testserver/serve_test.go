package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// startServing serves name on TCP and UDP ports of 127.0.0.1 chosen by the kernel, until the test ends.
func startServing(t *testing.T, name string) (tcpAddr, udpAddr string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ls := &listeners{tcp: []net.Listener{l}, udp: []net.PacketConn{c}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ls.serve(ctx, name) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return l.Addr().String(), c.LocalAddr().String()
}

func TestTCPAnswers(t *testing.T) {
	tcpAddr, _ := startServing(t, "pod-a")
	tests := []struct {
		name string
		send string
		want string
	}{
		{name: "a line that is not HTTP gets the name", send: "hello\n", want: "pod-a\n"},
		{name: "a line that looks almost like HTTP gets the name", send: "GET / HTTP/2.0\r\n", want: "pod-a\n"},
		{name: "an HTTP request gets an HTTP response",
			send: "GET /x HTTP/1.0\r\nHost: a\r\n\r\n",
			want: "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 6\r\nConnection: close\r\n\r\npod-a\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", tcpAddr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.WriteString(c, tt.send); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("answer to %q = %q, want %q", tt.send, got, tt.want)
			}
		})
	}
}

// A client that sends nothing (a probe, nc -z) still gets the name, after the first line's wait.
func TestTCPAnswersSilentClient(t *testing.T) {
	tcpAddr, _ := startServing(t, "pod-a")
	c, err := net.DialTimeout("tcp", tcpAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "pod-a\n" {
		t.Errorf("answer = %q, %v; want %q", line, err, "pod-a\n")
	}
}

func TestHTTPClientGetsTheName(t *testing.T) {
	tcpAddr, _ := startServing(t, "pod-a")
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Post(fmt.Sprintf("http://%s/", tcpAddr), "text/plain", strings.NewReader("a body the server does not read"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || string(body) != "pod-a\n" || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("response = %d %q %q, want 200 %q text/plain", resp.StatusCode, resp.Header.Get("Content-Type"), body, "pod-a\n")
	}
}

func TestUDPAnswers(t *testing.T) {
	_, udpAddr := startServing(t, "pod-a")
	c, err := net.Dial("udp", udpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(buf[:n]); got != "pod-a\n" {
		t.Errorf("answer = %q, want %q", got, "pod-a\n")
	}
}

func TestGetPrintsTheAnswer(t *testing.T) {
	tcp, _ := startServing(t, "web-1")
	var out strings.Builder
	if err := httpGet("http://"+tcp+"/", &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "web-1\n" {
		t.Fatalf("got %q, want %q", out.String(), "web-1\n")
	}
	if err := httpGet("http://127.0.0.1:1/", &out); err == nil {
		t.Fatal("a GET of a closed port succeeded")
	}
}
