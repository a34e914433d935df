package neutron

import (
	"context"
	"sync"
	"time"

	"github.com/raven-net/raven/internal/openstack"
)

// Raven's port batching: ports per bulk create, and bulk creates in flight at once.
const (
	BulkMax      = 50
	BulkInFlight = 2
)

// Batcher groups concurrent port creates into Neutron bulk requests, like a group commit: a create that
// finds a free slot goes out at once, alone; creates that arrive while bulk requests are in flight wait
// and leave together in the next one. A single pod pays one single-port create; a burst keeps Neutron
// busy with bulk requests and no idle gap.
type Batcher struct {
	N openstack.Networking
	// Max is the number of ports per bulk request; InFlight the bulk requests sent at once.
	Max, InFlight int
	// Created sees every port Neutron made, even when its caller gave up waiting.
	Created func(openstack.Port)

	mu      sync.Mutex
	queue   []*createReq
	running int
	// idle is closed when the last create in flight ends (nil while nobody waits for it).
	idle chan struct{}
}

type createReq struct {
	spec openstack.PortSpec
	done chan createRes
}

type createRes struct {
	port *openstack.Port
	err  error
}

// Create creates one port, possibly within a bulk request.
func (b *Batcher) Create(ctx context.Context, spec openstack.PortSpec) (*openstack.Port, error) {
	r := &createReq{spec: spec, done: make(chan createRes, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, r)
	if b.running < max(b.InFlight, 1) {
		b.running++
		// The loop outlives this caller and serves others: it keeps the context's values, not its end.
		go b.loop(context.WithoutCancel(ctx))
	}
	b.mu.Unlock()
	select {
	case res := <-r.done:
		return res.port, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *Batcher) loop(ctx context.Context) {
	for {
		b.mu.Lock()
		n := min(len(b.queue), max(b.Max, 1))
		if n == 0 {
			b.running--
			if b.running == 0 && b.idle != nil {
				close(b.idle)
				b.idle = nil
			}
			b.mu.Unlock()
			return
		}
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()
		b.send(ctx, batch)
	}
}

func (b *Batcher) send(ctx context.Context, batch []*createReq) {
	// The waiters' contexts may end (ctx never does); the request runs to its end so that its result is recorded.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if len(batch) > 1 {
		specs := make([]openstack.PortSpec, len(batch))
		for i, r := range batch {
			specs[i] = r.spec
		}
		ports, err := b.N.CreatePorts(ctx, specs)
		if err == nil && len(ports) == len(batch) {
			for i, r := range batch {
				p := ports[i]
				if err := KeepTags(ctx, b.N, &p, r.spec.Tags); err != nil {
					r.done <- createRes{err: err}
					continue
				}
				if b.Created != nil {
					b.Created(p)
				}
				r.done <- createRes{port: &p}
			}
			return
		}
		// Neutron creates all or none: one port's failure (quota, a full subnet) fails the batch, so each
		// port tries alone and gets its own answer.
	}
	for _, r := range batch {
		p, err := b.N.CreatePort(ctx, r.spec)
		if err == nil {
			if err = KeepTags(ctx, b.N, p, r.spec.Tags); err != nil {
				p = nil
			}
		}
		if err == nil && b.Created != nil {
			b.Created(*p)
		}
		r.done <- createRes{port: p, err: err}
	}
}

// Busy reports whether pod ports are waiting for Neutron or being created.
func (b *Batcher) Busy() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue) > 0 || b.running > 0
}

// WaitIdle waits, up to limit, until no pod port is waiting for Neutron or being created, and returns how long
// it waited: background listings call it between their requests, so that they take a Neutron worker only when
// no pod needs one. A nil Batcher is always idle.
func (b *Batcher) WaitIdle(ctx context.Context, limit time.Duration) time.Duration {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	if len(b.queue) == 0 && b.running == 0 {
		b.mu.Unlock()
		return 0
	}
	if b.idle == nil {
		b.idle = make(chan struct{})
	}
	idle := b.idle
	b.mu.Unlock()
	start := time.Now()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
	return max(time.Since(start), time.Nanosecond)
}
