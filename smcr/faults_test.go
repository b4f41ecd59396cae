package smcr_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/faulty"
	"github.com/goroce/goroce/smcr"
)

// wrapBackends makes the stacks the test's pairs open (testConfig) use
// wrap around their UDP backend, until the test ends.
func wrapBackends(t *testing.T, wrap func(backend.Backend) backend.Backend) {
	testWrap.Store(&wrap)
	t.Cleanup(func() { testWrap.Store(nil) })
}

// testWrap is what wrapBackends set, read by testConfig's WrapBackend.
var testWrap atomic.Pointer[func(backend.Backend) backend.Backend]

// Under loss, reordering, duplication and corruption of the RoCEv2
// packets (the TCP connection of the handshake is left alone), every SMC-R
// stream arrives byte-exact in both directions, ends with io.EOF, and the
// connections stay SMC-R: RC's retransmission carries the CDC messages and
// RDMA WRITEs, and SMC must neither lose nor repeat a byte.
//
// A BTH bit flipped before the ICRC is sealed (a broken peer; the ICRC
// cannot catch it) may cost the link: a flipped ACK PSN acknowledges
// packets never received, and with SMC's endless retries only TEST_LINK
// notices. Then every stream must end with an error, in bounded time;
// whatever did arrive must still be exact.
func TestFaultsKeepStreamsExact(t *testing.T) {
	tests := []struct {
		name    string
		cfg     faulty.Config
		mayFail bool
	}{
		{"loss 3%", faulty.Config{Loss: 0.03}, false},
		{"reorder 10%", faulty.Config{Reorder: 0.10}, false},
		{"duplicate 10%", faulty.Config{Duplicate: 0.10}, false},
		{"corrupt 2%", faulty.Config{Corrupt: 0.02}, false},
		{"all at once", faulty.Config{Loss: 0.02, Reorder: 0.05, Duplicate: 0.05, Corrupt: 0.01}, false},
		{"mangled BTH 2%", faulty.Config{Mangle: 0.02}, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noLeaks(t)
			var seed atomic.Uint64
			seed.Store(uint64(i+1) * 1000)
			var injected []*faulty.Backend
			var mu sync.Mutex
			wrapBackends(t, func(b backend.Backend) backend.Backend {
				cfg := tt.cfg
				cfg.Seed = seed.Add(1)
				f := faulty.Wrap(b, cfg)
				mu.Lock()
				injected = append(injected, f)
				mu.Unlock()
				return f
			})
			p := newPair(t, func(c *smcr.Config) {
				if tt.mayFail {
					c.TestLinkInterval = 200 * time.Millisecond
				}
			})
			// Several connections, so that CONFIRM_RKEY and DELETE_RKEY
			// flows run under the faults too.
			for _, n := range []int{1 << 20, 70001, 1} {
				c, s, err := p.tryDial(t)
				if tt.mayFail && err != nil {
					continue // the handshake's LLC flow met a dead link: a Decline
				}
				require.NoError(t, err)
				if i, _ := smcr.Info(c); tt.mayFail && i.Mode != smcr.ModeSMCRv2 {
					continue
				}
				requireMode(t, c, smcr.ModeSMCRv2)
				requireMode(t, s, smcr.ModeSMCRv2)
				if err := transfer(t, c, s, n); err != nil && !tt.mayFail {
					require.NoError(t, err)
				}
				c.Close()
				s.Close()
			}
			mu.Lock()
			defer mu.Unlock()
			var faults uint64
			for _, f := range injected {
				st := f.Stats()
				faults += st.Lost + st.Reordered + st.Duplicated + st.Corrupted + st.Mangled
			}
			require.NotZero(t, faults, "the injector injected nothing: the test proved nothing")
		})
	}
}

// cutBackend drops every packet it is asked to send once cut is set: the
// path to the peer is gone (a cable pulled), the peer itself lives on.
type cutBackend struct {
	backend.Backend
	cut *atomic.Bool
}

func (b cutBackend) Send(pkts []backend.Outgoing) error {
	if b.cut.Load() {
		return nil
	}
	return b.Backend.Send(pkts)
}

// When the path dies in the middle of a transfer, TEST_LINK finds the link
// dead (no answer within its wait), the link group ends, and the blocked
// Read and Write on both sides return errors: no hang.
func TestLinkFailureMidTransfer(t *testing.T) {
	noLeaks(t)
	var cut atomic.Bool
	wrapBackends(t, func(b backend.Backend) backend.Backend { return cutBackend{b, &cut} })
	p := newPair(t, func(c *smcr.Config) { c.TestLinkInterval = 50 * time.Millisecond })
	c, s := p.dial(t)
	requireMode(t, c, smcr.ModeSMCRv2)

	requireDeadEnds(t, c, s, func() { cut.Store(true) })
	require.NoError(t, c.Close())
	require.NoError(t, s.Close())
}

// requireDeadEnds has c write without end and s read a first MiB, then
// kills the path (kill), and requires that the blocked Write and Read then
// return errors, not an orderly end, in bounded time.
func requireDeadEnds(t *testing.T, c, s net.Conn, kill func()) {
	t.Helper()
	werr := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				werr <- err
				return
			}
		}
	}()
	_, err := io.CopyN(io.Discard, s, 1<<20)
	require.NoError(t, err)
	kill()
	rerr := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, s)
		if err == nil {
			err = io.EOF // Copy hides EOF; an orderly end is wrong here
		}
		rerr <- err
	}()
	for _, ch := range []chan error{werr, rerr} {
		select {
		case err := <-ch:
			require.Error(t, err)
			require.False(t, errors.Is(err, io.EOF), "a dead path is not an orderly end: %v", err)
		case <-time.After(60 * time.Second): // hang guard
			t.Fatal("Read or Write still blocked after the path died")
		}
	}
}

// Closing a connection whose link group died returns at once, and the
// closed side's peer learns of it through the TCP connection.
func TestCloseAfterLinkFailure(t *testing.T) {
	noLeaks(t)
	var cut atomic.Bool
	wrapBackends(t, func(b backend.Backend) backend.Backend { return cutBackend{b, &cut} })
	p := newPair(t, func(c *smcr.Config) { c.TestLinkInterval = 50 * time.Millisecond })
	c, s := p.dial(t)
	cut.Store(true)
	done := make(chan error, 1)
	go func() { _, err := s.Read(make([]byte, 1)); done <- err }()
	select {
	case err := <-done:
		require.Error(t, err)
	case <-time.After(60 * time.Second): // hang guard
		t.Fatal("Read blocked after the link died")
	}
	closed := make(chan struct{})
	go func() {
		c.Close()
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(60 * time.Second): // hang guard
		t.Fatal("Close blocked after the link died")
	}
	var _ net.Conn = c
}
