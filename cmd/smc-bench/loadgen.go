package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The load generator's side of the workloads. Every measurement is bounded
// in count (-n requests) and in time (-duration): it ends at whichever
// comes first.

// uperf's rr1c-200x1000 profile: 200-byte requests, 1000-byte responses.
const (
	uperfReq  = 200
	uperfResp = 1000
)

// redis-benchmark's defaults for -t set,get: one key, 3-byte values.
const (
	benchKey   = "key:__rand_int__"
	benchValue = "xxx"
)

// bound is a measurement's limits and the requests it has handed out.
type bound struct {
	n        int64
	deadline time.Time
	issued   atomic.Int64
}

// take reserves k requests; false when the count or the time is up.
func (b *bound) take(k int) bool {
	if time.Now().After(b.deadline) {
		return false
	}
	return b.issued.Add(int64(k)) <= b.n
}

// conns is a set of connections of one mode to one server, dialed through
// the mode's dialer and counted by what they speak.
type conns struct {
	mode   string
	dial   func(ctx context.Context, addr string) (net.Conn, error)
	mu     sync.Mutex
	counts modeCounts
	dials  int
}

// dialCounted dials and counts the connection.
func (cs *conns) dialCounted(ctx context.Context, addr string) (net.Conn, error) {
	c, err := cs.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	cs.mu.Lock()
	cs.counts.add(c)
	cs.dials++
	cs.mu.Unlock()
	return c, nil
}

// forEach runs f(i) for i in [0, n) with at most par at once, and returns
// the first error.
func forEach(n, par int, f func(i int) error) error {
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// dialParallel bounds how many connections are set up at once (the server
// bounds its pending handshakes too).
const dialParallel = 32

// redisClients are -c go-redis clients, each with exactly one connection
// (a pool of one, so one request in flight per connection, as each
// redis-benchmark client has).
type redisClients struct {
	cs      *conns
	clients []*redis.Client
	pipe    int
}

// newRedisClients creates n clients of mode to addr and connects each one
// (a PING, pipelined when pipe > 1 so that the connection dialed is the one
// the pipelines use).
func newRedisClients(cs *conns, addr string, n, pipe int, deadlines bool) (*redisClients, error) {
	rc := &redisClients{cs: cs, pipe: pipe}
	timeout := time.Duration(-2) // no SetDeadline calls, as redis-benchmark sets none
	if deadlines {
		timeout = 0 // go-redis's defaults
	}
	for range n {
		rc.clients = append(rc.clients, redis.NewClient(&redis.Options{
			Addr: addr, Protocol: 2, DisableIdentity: true,
			Dialer: func(ctx context.Context, _, addr string) (net.Conn, error) {
				return cs.dialCounted(ctx, addr)
			},
			PoolSize: 1, MaxActiveConns: 1, PipelinePoolSize: 1, MinIdleConns: 0,
			ReadTimeout: timeout, WriteTimeout: timeout, MaxRetries: -1,
			ReadBufferSize: 16 << 10, WriteBufferSize: 16 << 10,
			PipelineReadBufferSize: 16 << 10, PipelineWriteBufferSize: 16 << 10,
			PoolTimeout: 30 * time.Second, DialTimeout: 30 * time.Second,
		}))
	}
	err := forEach(n, dialParallel, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c := rc.clients[i]
		if pipe > 1 {
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error { p.Ping(ctx); return nil })
			return err
		}
		return c.Ping(ctx).Err()
	})
	if err != nil {
		rc.close()
		return nil, fmt.Errorf("connect %d redis clients: %w", n, err)
	}
	return rc, nil
}

func (rc *redisClients) close() {
	for _, c := range rc.clients {
		c.Close()
	}
}

// run runs the GET or SET test on every client until b is exhausted, and
// returns the requests done. A failed request ends the measurement with
// its error.
func (rc *redisClients) run(b *bound, set bool, h *hist) (int64, error) {
	var done atomic.Int64
	var once sync.Once
	var firstErr error
	var wg sync.WaitGroup
	ctx := context.Background()
	for _, c := range rc.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cmds []redis.Cmder
			for b.take(rc.pipe) {
				t0 := time.Now()
				var err error
				if rc.pipe == 1 {
					if set {
						err = c.Set(ctx, benchKey, benchValue, 0).Err()
					} else {
						err = c.Get(ctx, benchKey).Err()
					}
				} else {
					p := c.Pipeline()
					for range rc.pipe {
						if set {
							p.Set(ctx, benchKey, benchValue, 0)
						} else {
							p.Get(ctx, benchKey)
						}
					}
					cmds, err = p.Exec(ctx)
					_ = cmds
				}
				if err != nil && !errors.Is(err, redis.Nil) {
					once.Do(func() { firstErr = err })
					return
				}
				h.add(time.Since(t0), rc.pipe)
				done.Add(int64(rc.pipe))
			}
		}()
	}
	wg.Wait()
	return done.Load(), firstErr
}

// uperfClients are n connections running uperf's request/response loop.
type uperfClients struct {
	cs    *conns
	conns []net.Conn
}

func newUperfClients(cs *conns, addr string, n int) (*uperfClients, error) {
	uc := &uperfClients{cs: cs, conns: make([]net.Conn, n)}
	err := forEach(n, dialParallel, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c, err := cs.dialCounted(ctx, addr)
		if err != nil {
			return err
		}
		uc.conns[i] = c
		return nil
	})
	if err != nil {
		uc.close()
		return nil, fmt.Errorf("connect %d uperf clients: %w", n, err)
	}
	return uc, nil
}

func (uc *uperfClients) close() {
	for _, c := range uc.conns {
		if c != nil {
			c.Close()
		}
	}
}

// run loops write-200/read-1000 on every connection until b is exhausted.
func (uc *uperfClients) run(b *bound, h *hist) (int64, error) {
	var done atomic.Int64
	var once sync.Once
	var firstErr error
	var wg sync.WaitGroup
	for _, c := range uc.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := make([]byte, uperfReq)
			resp := make([]byte, uperfResp)
			for b.take(1) {
				t0 := time.Now()
				_, err := c.Write(req)
				if err == nil {
					_, err = io.ReadFull(c, resp)
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				h.add(time.Since(t0), 1)
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	return done.Load(), firstErr
}

// uperfOnce runs one exchange on every connection (the scale check's proof
// that each one works).
func (uc *uperfClients) once() error {
	return forEach(len(uc.conns), 64, func(i int) error {
		c := uc.conns[i]
		if _, err := c.Write(make([]byte, uperfReq)); err != nil {
			return err
		}
		_, err := io.ReadFull(c, make([]byte, uperfResp))
		return err
	})
}
