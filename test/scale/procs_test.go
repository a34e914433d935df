//go:build bench

package scale

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func insecureTLS() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the benchmark's own API server, on 127.0.0.1, with a self-signed certificate
}

// sim is the OpenStack stand-in (hack/openstack-sim): Neutron and Octavia with the measured per-call latency.
type sim struct {
	*proc
	Neutron string `json:"neutron"`
	Octavia string `json:"octavia"`
}

func startSim(t testing.TB, bin, dir, model string) *sim {
	t.Helper()
	args := []string{bin, "-neutron-listen", "127.0.0.1:0", "-octavia-listen", "127.0.0.1:0"}
	if model != "" {
		args = append(args, "-model", model)
	}
	p := startProc(t, dir, "openstack-sim", args...)
	t.Cleanup(func() { p.stop(syscall.SIGTERM, 10*time.Second) })
	s := &sim{proc: p}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		f, err := os.Open(p.log)
		if err == nil {
			line, _ := bufio.NewReader(f).ReadString('\n')
			_ = f.Close()
			if strings.HasSuffix(line, "\n") && json.Unmarshal([]byte(line), s) == nil && s.Neutron != "" {
				return s
			}
		}
		if p.exited() {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the simulator did not say where it listens (log: %s)", p.log)
	return nil
}

// simStats is what the simulator counts (GET /sim/stats).
type simStats struct {
	Ops map[string]struct {
		Calls   int64   `json:"calls"`
		Items   int64   `json:"items"`
		TotalMS float64 `json:"total_ms"`
	} `json:"ops"`
	Totals struct {
		Calls     int64 `json:"calls"`
		Writes    int64 `json:"writes"`
		ListCalls int64 `json:"list_calls"`
		ListPages int64 `json:"list_pages"`
	} `json:"totals"`
	Objects map[string]any `json:"objects"`
}

func (s *sim) stats(t testing.TB) simStats {
	t.Helper()
	var st simStats
	getJSON(t, s.Neutron+"/sim/stats", &st)
	return st
}

func (s *sim) reset(t testing.TB) {
	t.Helper()
	resp, err := http.Post(s.Neutron+"/sim/reset", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
}

// object reads one count of the simulator's objects (0 when absent).
func (st simStats) object(name string) float64 {
	v, _ := st.Objects[name].(float64)
	return v
}

func getJSON(t testing.TB, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// raven is one replica of the Raven controller, run from its binary with a configuration of the benchmark's.
type raven struct {
	*proc
	metrics, health, pprof string
	started                time.Time
}

func startRaven(t testing.TB, bin, dir, name, config string) *raven {
	t.Helper()
	metrics, health, pprof := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := filepath.Join(dir, name+".yaml")
	full := config + fmt.Sprintf("metricsAddr: %s\nhealthAddr: %s\npprofAddr: %s\n", metrics, health, pprof)
	if err := os.WriteFile(cfg, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &raven{metrics: metrics, health: health, pprof: pprof, started: time.Now()}
	r.proc = startProc(t, dir, name, bin, "--config", cfg)
	t.Cleanup(func() { r.stop(syscall.SIGTERM, 10*time.Second) })
	waitHTTP(t, r.proc, "http://"+health+"/healthz", http.DefaultClient, nil, time.Minute)
	return r
}

// ready says the replica's readiness checks pass (its caches are synced and OpenStack answers).
func (r *raven) ready() bool {
	resp, err := http.Get("http://" + r.health + "/readyz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// metric sums the samples of a metric whose label text contains every one of labels.
func (r *raven) metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	return r.scrape(t).sum(name, labels...)
}

// samples are the text of one scrape of a replica's metrics.
type samples string

// scrape reads the replica's metrics once, as text: a check of several metrics reads them all from one scrape.
func (r *raven) scrape(t testing.TB) samples {
	t.Helper()
	return samples(r.get(t, "http://"+r.metrics+"/metrics", "metrics"))
}

// sum adds the samples of a metric whose label text contains every one of labels.
func (s samples) sum(name string, labels ...string) float64 {
	sum := 0.0
	for _, line := range strings.Split(string(s), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(line, l)
		}
		if !match {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// saveHeapProfile writes the replica's heap profile (go tool pprof reads it) to path.
func (r *raven) saveHeapProfile(t testing.TB, path string) {
	t.Helper()
	if err := os.WriteFile(path, r.get(t, "http://"+r.pprof+"/debug/pprof/heap", "heap profile"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// profileCPU starts a CPU profile of the replica over d (go tool pprof reads it), written to path; the channel
// says when it is written, or why not.
func (r *raven) profileCPU(path string, d time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() {
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", r.pprof, int(d.Seconds()+0.5))
		resp, err := http.Get(url)
		if err != nil {
			done <- fmt.Errorf("%s CPU profile: %w", r.name, err)
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s", resp.Status)
		}
		if err == nil {
			err = os.WriteFile(path, body, 0o644)
		}
		if err != nil {
			err = fmt.Errorf("%s CPU profile: %w", r.name, err)
		}
		done <- err
	}()
	return done
}

// plain reads a replica's endpoints without asking for gzip: the benchmark polls them, and compressing each
// answer is work of the benchmark's that Raven's CPU figures must not carry (polled 20 times a second, it was
// the largest single part of a replica's CPU profile through a cold start).
var plain = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// get reads what the replica serves at url (what names it in a failure).
func (r *raven) get(t testing.TB, url, what string) []byte {
	t.Helper()
	resp, err := plain.Get(url)
	if err != nil {
		t.Fatalf("%s %s: %v", r.name, what, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", r.name, what, err)
	}
	return body
}

// usage is a process's CPU time (user + system) and its resident memory.
type usage struct {
	CPUSeconds float64
	RSSMiB     float64
}

func procUsage(t testing.TB, pid int) usage {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	u := usage{CPUSeconds: (utime + stime) / 100}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			u.RSSMiB = kb / 1024
		}
	}
	return u
}

func (p *proc) usage(t testing.TB) usage { return procUsage(t, p.cmd.Process.Pid) }

// latency turns the simulator's latency model on or off (off: set-up at full speed).
func (s *sim) latency(t testing.TB, on bool) {
	t.Helper()
	resp, err := http.Post(fmt.Sprintf("%s/sim/latency?on=%t", s.Neutron, on), "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /sim/latency: %s", resp.Status)
	}
}

// quiet waits until the simulator has served no request for d: what was asked is done.
func (s *sim) quiet(ctx context.Context, t testing.TB, d time.Duration) {
	t.Helper()
	last, since := int64(-1), time.Now()
	waitFor(ctx, t, 30*time.Minute, "the simulator to go quiet", func() (bool, error) {
		n := s.stats(t).Totals.Calls
		if n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= d, nil
	})
}
