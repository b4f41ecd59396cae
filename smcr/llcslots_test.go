package smcr_test

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/faulty"
	"github.com/goroce/goroce/smcr"
)

// An LLC flow never waits for a CDC send slot: with every slot of a link
// taken (as writers on a busy link keep them), a new connection's
// CONFIRM_RKEY flows still run, on both sides, and the handshake
// succeeds. (They shared the slots, and waited behind every writer.)
func TestLLCFlowsDoNotWaitForCDCSlots(t *testing.T) {
	noLeaks(t)
	p := newPair(t, nil)
	c1, s1 := p.dial(t)
	requireMode(t, c1, smcr.ModeSMCRv2)
	releaseC := smcr.HoldCDCSlots(c1)
	releaseS := smcr.HoldCDCSlots(s1)
	c2, s2 := p.dial(t)
	i := requireMode(t, c2, smcr.ModeSMCRv2)
	require.False(t, i.FirstContact, "the group with every CDC slot taken")
	releaseC()
	releaseS()
	exchange(t, c2, s2, 100000)
	exchange(t, c1, s1, 100000)
}

// Many connections connect while others keep the link group's link full
// of data, on a path with some delay (so that a send slot stays taken for
// a round trip): every handshake succeeds in SMC-R within Linux's CLC
// timeout, none times out waiting for its LLC flows behind the data.
// (Scaled down from the 2 × 255 connections of 8 MB: 128
// connections streaming, 48 connecting. With the LLC flows waiting behind
// every writer for a send slot, the slowest connect took 10.4 s here; with
// slots of their own, 0.8 s, and 1.1 s with the race detector on a busy
// machine.)
func TestConnectsUnderDataLoad(t *testing.T) {
	noLeaks(t)
	var delayed []*faulty.Backend
	var mu sync.Mutex
	wrapBackends(t, func(b backend.Backend) backend.Backend {
		f := faulty.Wrap(b, faulty.Config{Delay: 5 * time.Millisecond, DelayRate: 1})
		mu.Lock()
		delayed = append(delayed, f)
		mu.Unlock()
		return f
	})
	p := newPair(t, func(c *smcr.Config) { c.HandshakeTimeout = 0 }) // Linux's 6 s
	const streams, connects = 128, 48
	go func() { // the server echoes every connection
		for {
			s, err := p.ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer s.Close()
				io.Copy(s, s)
				s.(*smcr.Conn).CloseWrite()
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang guard
	defer cancel()
	dial := func() *smcr.Conn {
		c, err := p.d.DialContext(ctx, "tcp", p.ln.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c.(*smcr.Conn)
	}
	var stop atomic.Bool
	var load sync.WaitGroup
	for range streams {
		c := dial()
		requireMode(t, c, smcr.ModeSMCRv2)
		load.Add(2)
		go func() { // writes until the connects are done
			defer load.Done()
			buf := make([]byte, 64<<10)
			for !stop.Load() {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
			c.CloseWrite()
		}()
		go func() {
			defer load.Done()
			io.Copy(io.Discard, c)
		}()
	}
	var wg sync.WaitGroup
	modes := make(chan smcr.ConnInfo, connects)
	var slowest atomic.Int64
	for range connects {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			c, err := p.d.DialContext(ctx, "tcp", p.ln.Addr().String())
			for d := int64(time.Since(start)); ; {
				if old := slowest.Load(); d <= old || slowest.CompareAndSwap(old, d) {
					break
				}
			}
			if err != nil {
				t.Errorf("dial under load: %v", err)
				return
			}
			defer c.Close()
			i, _ := smcr.Info(c)
			modes <- i
		}()
	}
	wait(t, &wg, 2*time.Minute)
	t.Logf("the slowest of %d connects under load took %v", connects, time.Duration(slowest.Load()))
	stop.Store(true)
	wait(t, &load, 2*time.Minute)
	close(modes)
	for i := range modes {
		require.Equal(t, smcr.ModeSMCRv2, i.Mode, "%+v", i)
	}
	mu.Lock()
	defer mu.Unlock()
	var n uint64
	for _, f := range delayed {
		n += f.Stats().Delayed
	}
	require.NotZero(t, n, "no packet was delayed: the test proved nothing")
}
