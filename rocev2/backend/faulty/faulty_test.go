package faulty

import (
	"encoding/binary"
	"math"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/backendtest"
	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pair wraps a sender on a fresh memlink network; the receiver is wrapped
// too (for Corrupt) with the same config.
func pair(tb testing.TB, cfg Config) (tx, rx *Backend, n *memlink.Network) {
	tb.Helper()
	n = memlink.NewNetworkConfig(memlink.Config{QueueLen: 1 << 16})
	a, err := n.Attach(netip.MustParseAddrPort("198.18.0.1:4791"))
	require.NoError(tb, err)
	b, err := n.Attach(netip.MustParseAddrPort("198.18.0.2:4791"))
	require.NoError(tb, err)
	tx, rx = Wrap(a, cfg), Wrap(b, cfg)
	tb.Cleanup(func() { tx.Close(); rx.Close() })
	return tx, rx, n
}

// numbered builds count packets to dst carrying their number in the payload.
func numbered(tb testing.TB, dst netip.AddrPort, count int) []backend.Outgoing {
	tb.Helper()
	out := make([]backend.Outgoing, count)
	for i := range out {
		var payload [32]byte
		binary.BigEndian.PutUint32(payload[:], uint32(i))
		f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x11, PSN: rocev2.PSN(i)}
		buf, err := f.Append(nil, payload[:])
		require.NoError(tb, err)
		out[i] = backend.Outgoing{Buf: buf, Dst: dst}
	}
	return out
}

// arrival is one received packet: its number and ICRC verdict.
type arrival struct {
	num  uint32
	icrc backend.ICRCStatus
}

// sendAll sends pkts in batches of 16 and flushes the holds.
func sendAll(tb testing.TB, tx *Backend, pkts []backend.Outgoing) {
	tb.Helper()
	for i := 0; i < len(pkts); i += 16 {
		require.NoError(tb, tx.Send(pkts[i:min(i+16, len(pkts))]))
	}
	require.NoError(tb, tx.Flush())
}

// receiveN receives n packets through rx, failing after a deadline.
func receiveN(tb testing.TB, rx *Backend, n int) []arrival {
	tb.Helper()
	var timedOut atomic.Bool
	watchdog := time.AfterFunc(10*time.Second, func() {
		timedOut.Store(true)
		rx.inner.Close()
	})
	defer watchdog.Stop()
	out := make([]arrival, 0, n)
	batch := make([]backend.Incoming, 64)
	for len(out) < n {
		k, err := rx.Receive(batch[:min(len(batch), n-len(out))])
		require.False(tb, timedOut.Load(), "timed out with %d of %d packets", len(out), n)
		require.NoError(tb, err)
		for _, d := range batch[:k] {
			out = append(out, arrival{binary.BigEndian.Uint32(d.Buf[rocev2.BTHLen:]), d.ICRC})
		}
	}
	return out
}

func TestSameSeedSameFaults(t *testing.T) {
	// Reordering is released by later packets only (not by its time bound),
	// so that the arrivals depend on the seed alone.
	cfg := Config{Seed: 42, Loss: 0.1, Duplicate: 0.1, Reorder: 0.2, Corrupt: 0.05, Mangle: 0.02, MaxReorderWait: time.Hour}
	run := func(cfg Config) ([]arrival, Stats) {
		tx, rx, n := pair(t, cfg)
		sendAll(t, tx, numbered(t, rx.LocalAddr(), 2000))
		got := receiveN(t, rx, int(n.Stats().Delivered))
		s := tx.Stats()
		s.Corrupted = rx.Stats().Corrupted
		return got, s
	}
	first, s1 := run(cfg)
	second, s2 := run(cfg)
	assert.Equal(t, s1, s2)
	assert.Equal(t, first, second, "same seed, same sends: same arrivals")
	for _, v := range []uint64{s1.Lost, s1.Duplicated, s1.Reordered, s1.Corrupted, s1.Mangled} {
		assert.Positive(t, v, "every fault happened: %+v", s1)
	}

	cfg.Seed++
	other, _ := run(cfg)
	assert.NotEqual(t, first, other, "another seed, other faults")
}

func TestRates(t *testing.T) {
	const n = 10000
	cfg := Config{Seed: 7, Loss: 0.1, Duplicate: 0.05, Reorder: 0.1, Corrupt: 0.03, Mangle: 0.02, MaxHold: n}
	tx, rx, network := pair(t, cfg)
	sendAll(t, tx, numbered(t, rx.LocalAddr(), n))
	s := tx.Stats()

	// within 4 standard deviations of the expected count
	near := func(name string, got uint64, trials float64, p float64) {
		want := trials * p
		sd := math.Sqrt(trials * p * (1 - p))
		assert.InDelta(t, want, float64(got), 4*sd, "%s: %d of %.0f", name, got, trials)
	}
	kept := float64(n - s.Lost)
	near("lost", s.Lost, n, cfg.Loss)
	near("duplicated", s.Duplicated, kept, cfg.Duplicate)
	near("mangled", s.Mangled, kept, cfg.Mangle)
	near("reordered", s.Reordered, kept+float64(s.Duplicated), cfg.Reorder) // copies are held with their original
	assert.Equal(t, uint64(n), s.Sent)
	assert.Equal(t, s.Sent-s.Lost+s.Duplicated, s.Forwarded, "every packet not lost went, once or twice")
	assert.Zero(t, s.HoldFull)

	got := receiveN(t, rx, int(network.Stats().Delivered))
	assert.Len(t, got, int(s.Forwarded))
	bad, outOfOrder := 0, 0
	for i, a := range got {
		if a.icrc == backend.ICRCBad {
			bad++
		}
		if i > 0 && a.num < got[i-1].num {
			outOfOrder++
		}
	}
	rs := rx.Stats()
	near("corrupted", rs.Corrupted, float64(len(got)), cfg.Corrupt)
	assert.Equal(t, int(rs.Corrupted), bad, "every corruption is caught, nothing else is")
	assert.Positive(t, outOfOrder)
	t.Logf("tx %+v", s)
	t.Logf("rx corrupted %d of %d", rs.Corrupted, len(got))
}

func TestLossOneDropsAll(t *testing.T) {
	tx, rx, n := pair(t, Config{Seed: 1, Loss: 1, Duplicate: 1, Reorder: 1})
	pkts := numbered(t, rx.LocalAddr(), 1000)
	sendAll(t, tx, pkts)
	s := tx.Stats()
	assert.Equal(t, uint64(1000), s.Lost)
	assert.Zero(t, s.Forwarded)
	assert.Zero(t, s.Duplicated, "a lost packet is not duplicated")
	assert.Zero(t, n.Stats().Sent, "nothing reached the network")
}

func TestReorderReleasesAfterLaterPackets(t *testing.T) {
	tx, rx, _ := pair(t, Config{Seed: 3, Reorder: 0.3})
	pkts := numbered(t, rx.LocalAddr(), 300)
	for i := range pkts {
		require.NoError(t, tx.Send(pkts[i:i+1]), "one packet at a time")
	}
	require.NoError(t, tx.Flush())
	got := receiveN(t, rx, len(pkts))
	pos := make(map[uint32]int)
	for i, a := range got {
		_, dup := pos[a.num]
		require.False(t, dup, "packet %d twice", a.num)
		pos[a.num] = i
	}
	require.Len(t, pos, len(pkts))
	late := 0
	for num, at := range pos {
		// A held packet goes after 1 to 3 later ones; a chain of holds can
		// push it further, but never before its own time.
		if at > int(num) {
			late++
		}
	}
	assert.Positive(t, late)
	assert.Positive(t, tx.Stats().Reordered)
}

func TestMaxHold(t *testing.T) {
	tx, rx, _ := pair(t, Config{Seed: 5, Reorder: 1, MaxHold: 4})
	sendAll(t, tx, numbered(t, rx.LocalAddr(), 20))
	s := tx.Stats()
	assert.Equal(t, uint64(20), s.Reordered+s.HoldFull)
	assert.Positive(t, s.HoldFull)
	assert.Len(t, receiveN(t, rx, 20), 20, "the held ones come out too")
}

func TestDelay(t *testing.T) {
	const delay = 50 * time.Millisecond
	tx, rx, _ := pair(t, Config{Seed: 9, Delay: delay, DelayRate: 0.5})
	pkts := numbered(t, rx.LocalAddr(), 200)
	start := time.Now()
	for i := 0; i < len(pkts); i += 10 {
		require.NoError(t, tx.Send(pkts[i:i+10]))
	}
	s := tx.Stats()
	assert.InDelta(t, 100, float64(s.Delayed), 30)
	// The immediate packets are there now; the delayed ones come from the
	// goroutine, no sooner than Delay after their send.
	got := receiveN(t, rx, len(pkts))
	assert.GreaterOrEqual(t, time.Since(start), delay)
	seen := make(map[uint32]bool)
	for _, a := range got {
		seen[a.num] = true
	}
	assert.Len(t, seen, len(pkts))
	assert.Equal(t, uint64(len(pkts)), tx.Stats().Forwarded)
}

func TestCloseStopsGoroutine(t *testing.T) {
	n := memlink.NewNetwork()
	a, err := n.Attach(netip.MustParseAddrPort("198.18.0.1:4791"))
	require.NoError(t, err)
	b, err := n.Attach(netip.MustParseAddrPort("198.18.0.2:4791"))
	require.NoError(t, err)
	defer b.Close()
	tx := Wrap(a, Config{Delay: time.Hour, DelayRate: 1})
	require.NoError(t, tx.Send(numbered(t, b.LocalAddr(), 5)), "held for an hour")
	require.NotNil(t, tx.done)
	require.NoError(t, tx.Close())
	select {
	case <-tx.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the delay goroutine did not stop")
	}
	assert.ErrorIs(t, tx.Send(numbered(t, b.LocalAddr(), 1)), backend.ErrBackendClosed)
	assert.ErrorIs(t, tx.Flush(), backend.ErrBackendClosed)
	_, err = tx.Receive(make([]backend.Incoming, 1))
	assert.ErrorIs(t, err, backend.ErrBackendClosed, "the inner backend is closed")
	assert.NoError(t, tx.Close())
	assert.Zero(t, n.Stats().Sent, "held packets are dropped on Close")

	plain := Wrap(b, Config{Loss: 0.5})
	assert.Nil(t, plain.done, "no goroutine without Delay")
}

func TestCallerBuffersAndIDs(t *testing.T) {
	// Packets that go on time are the caller's: sealed in place by the
	// inner backend, with their Wire reported back. Mangled ones are
	// copies: the caller's bytes stay as they were, marked unsealed.
	tx, rx, _ := pair(t, Config{Seed: 11, Mangle: 0.5, Duplicate: 0.5})
	pkts := numbered(t, rx.LocalAddr(), 64)
	orig := make([][]byte, len(pkts))
	for i, p := range pkts {
		orig[i] = append([]byte(nil), p.Buf...)
		pkts[i].Wire.IPv4ID = 0xdead
	}
	require.NoError(t, tx.Send(pkts))
	fl := rocev2.NewFlow(tx.LocalAddr(), rx.LocalAddr())
	mangled := 0
	for i, p := range pkts {
		assert.Equal(t, orig[i][:len(orig[i])-rocev2.ICRCLen], p.Buf[:len(p.Buf)-rocev2.ICRCLen], "packet %d", i)
		if fl.VerifyICRC(p.Buf) {
			assert.Equal(t, backend.Wire{}, p.Wire, "packet %d: sealed for ID 0", i)
		} else {
			mangled++ // sent as a copy: the caller's buffer was not sealed
			assert.Equal(t, backend.Wire{Unsealed: true}, p.Wire, "packet %d", i)
		}
	}
	assert.Equal(t, int(tx.Stats().Mangled), mangled)
	got := receiveN(t, rx, int(tx.Stats().Forwarded))
	for _, a := range got {
		assert.Equal(t, backend.ICRCOK, a.icrc, "a mangled packet is sealed over: its ICRC is good")
	}
}

// Over a backend that can poll, Backend() polls too, and TryReceive
// corrupts exactly as Receive does: the same seed gives the same bits.
func TestPollingCorruptsLikeReceive(t *testing.T) {
	cfg := Config{Seed: 7, Corrupt: 0.3}
	run := func(poll bool) []arrival {
		tx, rx, _ := pair(t, cfg)
		sendAll(t, tx, numbered(t, rx.LocalAddr(), 200))
		if !poll {
			return receiveN(t, rx, 200)
		}
		p, ok := rx.Backend().(backend.Poller)
		require.True(t, ok, "a wrapped memlink backend polls")
		var out []arrival
		batch := make([]backend.Incoming, 64)
		done := make(chan error, 1)
		go func() {
			done <- p.Serve(func() bool {
				k, err := p.TryReceive(batch)
				if err != nil {
					return false
				}
				for _, d := range batch[:k] {
					out = append(out, arrival{binary.BigEndian.Uint32(d.Buf[rocev2.BTHLen:]), d.ICRC})
				}
				if len(out) >= 200 {
					rx.Close() // ends Serve
				}
				return k == len(batch)
			})
		}()
		select {
		case err := <-done:
			require.ErrorIs(t, err, backend.ErrBackendClosed)
		case <-time.After(30 * time.Second): // hang guard only
			t.Fatal("Serve did not drain 200 packets")
		}
		return out
	}
	blocking, polled := run(false), run(true)
	assert.Equal(t, blocking, polled)
	bad := 0
	for _, a := range polled {
		if a.icrc == backend.ICRCBad {
			bad++
		}
	}
	assert.InDelta(t, 60, bad, 30, "about Corrupt of the packets arrive corrupted")

	_, rx, _ := pair(t, Config{})
	inner := &blockingOnly{rx.inner}
	_, polls := Wrap(inner, Config{}).Backend().(backend.Poller)
	assert.False(t, polls, "over a backend that cannot poll, neither can the wrapper")
}

// blockingOnly hides an inner backend's Poller methods.
type blockingOnly struct{ backend.Backend }

func TestSharedBackendChecks(t *testing.T) {
	tx, rx, _ := pair(t, Config{Seed: 3, Loss: 0.1, Corrupt: 0.1})
	backendtest.Run(t, rx, numbered(t, tx.LocalAddr(), 1))
}
