package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"time"
)

const (
	// firstLineWait is how long a TCP client has to send its first line before it gets the plain answer:
	// a client that only reads (nc -z, a probe) is answered at once after it.
	firstLineWait = time.Second
	// requestWait bounds the rest of an HTTP request's head, and the answer's write.
	requestWait = 5 * time.Second
	// maxRequest bounds what one connection may make us read.
	maxRequest = 64 << 10
)

// requestLine matches an HTTP/1.x request line: method, space, target, space, version.
var requestLine = regexp.MustCompile(`^[A-Z]+ [^ ]+ HTTP/1\.[0-9]\r?\n$`)

// listeners are the open sockets; they are opened before serving so that a port taken fails the start.
type listeners struct {
	tcp []net.Listener
	udp []net.PacketConn
}

func listen(ports []port) (*listeners, error) {
	ls := &listeners{}
	for _, p := range ports {
		addr := fmt.Sprintf(":%d", p.Number)
		if p.UDP {
			c, err := net.ListenPacket("udp", addr)
			if err != nil {
				ls.close()
				return nil, err
			}
			ls.udp = append(ls.udp, c)
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			ls.close()
			return nil, err
		}
		ls.tcp = append(ls.tcp, l)
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

// serve answers with name until ctx ends (nil) or a socket fails (its error).
func (ls *listeners) serve(ctx context.Context, name string) error {
	errs := make(chan error, len(ls.tcp)+len(ls.udp))
	for _, l := range ls.tcp {
		go func() { errs <- serveTCP(l, name) }()
	}
	for _, c := range ls.udp {
		go func() { errs <- serveUDP(c, name) }()
	}
	defer ls.close()
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}

// serveTCP answers each connection in its own goroutine until l is closed.
func serveTCP(l net.Listener, name string) error {
	for {
		c, err := l.Accept()
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		if err != nil {
			return err
		}
		go answerConn(c, name)
	}
}

// serveUDP answers each datagram with "name\n" to its sender until c is closed.
func serveUDP(c net.PacketConn, name string) error {
	buf := make([]byte, 64<<10)
	answer := []byte(name + "\n")
	for {
		_, from, err := c.ReadFrom(buf)
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		if err != nil {
			return err
		}
		_, _ = c.WriteTo(answer, from)
	}
}

// answerConn answers one TCP connection: an HTTP response to an HTTP request, "name\n" to anything else.
func answerConn(c net.Conn, name string) {
	defer c.Close()
	r := bufio.NewReader(io.LimitReader(c, maxRequest))
	_ = c.SetReadDeadline(time.Now().Add(firstLineWait))
	line, err := r.ReadString('\n')
	answer := name + "\n"
	if err == nil && requestLine.MatchString(line) {
		_ = c.SetReadDeadline(time.Now().Add(requestWait))
		skipHeaders(r)
		answer = httpResponse(answer)
	}
	_ = c.SetWriteDeadline(time.Now().Add(requestWait))
	if _, err := io.WriteString(c, answer); err != nil {
		return
	}
	lingerClose(c)
}

// skipHeaders reads up to the blank line that ends a request's head (or an error: the answer goes anyway).
func skipHeaders(r *bufio.Reader) {
	for {
		line, err := r.ReadString('\n')
		if err != nil || strings.TrimRight(line, "\r\n") == "" {
			return
		}
	}
}

func httpResponse(body string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		len(body), body)
}

// lingerClose ends our side first and reads what the client still sends (a request body, say) until it
// closes: closing a socket with unread input sends a reset, which can make the client drop the answer
// before it has read it.
func lingerClose(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	if err := tc.CloseWrite(); err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(firstLineWait))
	_, _ = io.Copy(io.Discard, io.LimitReader(c, maxRequest))
}
