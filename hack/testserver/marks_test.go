package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMarksSwitchTheProbe(t *testing.T) {
	unreadyMark = filepath.Join(t.TempDir(), "tmp", "unready") // a directory that does not exist yet, as /tmp in the image
	steps := []struct {
		mark      string
		wantReady bool
	}{
		{"", true},
		{"unready", false},
		{"unready", false},
		{"ready", true},
		{"ready", true},
	}
	for _, s := range steps {
		if s.mark != "" {
			if err := setMark(s.mark); err != nil {
				t.Fatalf("setMark(%s): %v", s.mark, err)
			}
		}
		if got := probeReady() == nil; got != s.wantReady {
			t.Fatalf("after %q: ready = %v, want %v", s.mark, got, s.wantReady)
		}
	}
	if err := setMark("sleepy"); err == nil {
		t.Fatal("an unknown mark was accepted")
	}
}

// freeTCPPort returns a port nothing listens on now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// answer is the line the server at addr answers "hello\n" with, or the error.
func answer(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("hello\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// until retries cond for 5 s: the server switches asynchronously after a signal.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestHungServerClosesItsSocketsUntilServing(t *testing.T) {
	p := freeTCPPort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", p)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveUntilDone(ctx, "web-0", []port{{Number: p}}) }()
	until(t, "first answer", func() bool { got, err := answer(addr); return err == nil && got == "web-0" })

	if err := syscall.Kill(syscall.Getpid(), hangSignal); err != nil {
		t.Fatal(err)
	}
	until(t, "connections refused while hung", func() bool { _, err := answer(addr); return err != nil })
	if err := syscall.Kill(syscall.Getpid(), resumeSignal); err != nil {
		t.Fatal(err)
	}
	until(t, "answers again once serving", func() bool { got, err := answer(addr); return err == nil && got == "web-0" })

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serveUntilDone: %v", err)
	}
}
