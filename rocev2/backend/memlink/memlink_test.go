package memlink

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goroce/goroce/internal/race"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/backendtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func attach(tb testing.TB, n *Network, addr string) *Backend {
	tb.Helper()
	b, err := n.Attach(netip.MustParseAddrPort(addr))
	require.NoError(tb, err)
	tb.Cleanup(func() { b.Close() })
	return b
}

// packets builds RC SEND Only packets to dst with the given payload sizes,
// PSN = index, payload bytes = index.
func packets(tb testing.TB, dst netip.AddrPort, sizes ...int) []backend.Outgoing {
	tb.Helper()
	out := make([]backend.Outgoing, len(sizes))
	for i, n := range sizes {
		payload := make([]byte, n)
		for j := range payload {
			payload[j] = byte(i)
		}
		f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x11, PSN: rocev2.PSN(i)}
		buf, err := f.Append(nil, payload)
		require.NoError(tb, err)
		out[i] = backend.Outgoing{Buf: buf, Dst: dst}
	}
	return out
}

// receiveN receives n packets, copying them; a watchdog closes b (waking
// Receive) and fails the test if they do not all arrive in time.
func receiveN(tb testing.TB, b *Backend, n int) []backend.Incoming {
	tb.Helper()
	var timedOut atomic.Bool
	watchdog := time.AfterFunc(5*time.Second, func() {
		timedOut.Store(true)
		b.Close()
	})
	defer watchdog.Stop()
	out := make([]backend.Incoming, 0, n)
	batch := make([]backend.Incoming, b.BatchSize())
	for len(out) < n {
		k, err := b.Receive(batch)
		require.False(tb, timedOut.Load(), "timed out with %d of %d packets", len(out), n)
		require.NoError(tb, err)
		for _, d := range batch[:k] {
			d.Buf = append([]byte(nil), d.Buf...)
			out = append(out, d)
		}
	}
	return out
}

func TestExchange(t *testing.T) {
	for _, tc := range []struct{ name, a, b string }{
		{"ipv4", "198.18.0.1:4791", "198.18.0.2:4791"},
		{"ipv6", "[fd00::1]:4791", "[fd00::2]:4791"},
		{"mapped", "[::ffff:198.18.0.1]:4791", "198.18.0.2:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := NewNetwork()
			a, b := attach(t, n, tc.a), attach(t, n, tc.b)
			assert.True(t, a.LocalAddr().Addr().Is4() || a.LocalAddr().Addr().Is6() && !a.LocalAddr().Addr().Is4In6(), "normalized")
			sent := packets(t, b.LocalAddr(), 0, 16, 1000, 4096, 9000, 3)
			require.NoError(t, a.Send(sent))
			got := receiveN(t, b, len(sent))
			for i, d := range got {
				assert.Equal(t, sent[i].Buf, d.Buf, "packet %d", i)
				assert.Equal(t, backend.ICRCOK, d.ICRC, "packet %d", i)
				assert.Equal(t, a.LocalAddr(), d.Src)
				assert.Zero(t, d.IPv4ID)
				fl := rocev2.NewFlow(a.LocalAddr(), b.LocalAddr())
				assert.True(t, fl.VerifyICRC(sent[i].Buf), "Send sealed the caller's buffer")
			}
			assert.Equal(t, Stats{Sent: 6, Delivered: 6}, n.Stats())
		})
	}
}

func TestDrops(t *testing.T) {
	n := NewNetworkConfig(Config{QueueLen: 4, MTU: 1500})
	a := attach(t, n, "198.18.0.1:4791")
	b := attach(t, n, "198.18.0.2:4791")
	v6 := attach(t, n, "[fd00::2]:4791")
	assert.Equal(t, 1500, a.LinkMTU())

	pkts := packets(t, b.LocalAddr(), 1, 2, 3, 1500, 4, 5, 6)
	pkts[1].Dst = netip.MustParseAddrPort("198.18.0.9:4791") // nobody there
	pkts[2].Dst = v6.LocalAddr()                             // other family
	require.NoError(t, a.Send(pkts))
	// Packet 3 (1500 bytes of payload) does not fit an MTU of 1500; 0, 4, 5
	// and 6 fill the queue of 4.
	assert.Equal(t, Stats{Sent: 7, Delivered: 4, NoRoute: 2, TooBig: 1}, n.Stats())
	require.NoError(t, a.Send(packets(t, b.LocalAddr(), 7)))
	assert.Equal(t, uint64(1), n.Stats().QueueFull, "the fifth packet finds the queue full")

	got := receiveN(t, b, 4)
	for i, want := range []int{0, 4, 5, 6} {
		assert.Equal(t, pkts[want].Buf, got[i].Buf, "FIFO order")
	}
	err := a.Send([]backend.Outgoing{{Buf: []byte{1, 2}, Dst: b.LocalAddr()}})
	assert.ErrorIs(t, err, errShort)
}

func TestBuffersStayValidUntilNextReceive(t *testing.T) {
	n := NewNetwork()
	a := attach(t, n, "198.18.0.1:4791")
	b := attach(t, n, "198.18.0.2:4791")
	first := packets(t, b.LocalAddr(), 100, 100, 100)
	require.NoError(t, a.Send(first))
	rx := make([]backend.Incoming, 8)
	k, err := b.Receive(rx)
	require.NoError(t, err)
	require.Equal(t, 3, k)
	held := append([]backend.Incoming(nil), rx[:k]...)

	// More packets arrive while the caller still holds the first batch.
	second := packets(t, b.LocalAddr(), 200, 200, 200)
	for i := range second {
		second[i].Buf[rocev2.BTHLen] = 0xee
	}
	require.NoError(t, a.Send(second))
	for i, d := range held {
		assert.Equal(t, first[i].Buf, d.Buf, "held packet %d overwritten", i)
	}
	got := receiveN(t, b, 3)
	for i, d := range got {
		assert.Equal(t, second[i].Buf, d.Buf)
	}
}

func TestCorruptPacketIsBad(t *testing.T) {
	n := NewNetwork()
	b := attach(t, n, "198.18.0.2:4791")
	src := netip.MustParseAddrPort("198.18.0.1:4791")
	pkts := packets(t, b.LocalAddr(), 64, 64)
	fl := rocev2.NewFlow(src, b.LocalAddr())
	for _, p := range pkts {
		fl.SealICRC(p.Buf)
	}
	pkts[1].Buf[20] ^= 1
	for _, p := range pkts {
		require.Equal(t, delivered, b.deliver(p.Buf, src))
	}
	got := receiveN(t, b, 2)
	assert.Equal(t, backend.ICRCOK, got[0].ICRC)
	assert.Equal(t, backend.ICRCBad, got[1].ICRC)
}

func TestAttach(t *testing.T) {
	n := NewNetwork()
	a := attach(t, n, "198.18.0.1:0")
	b := attach(t, n, "198.18.0.1:0")
	assert.Equal(t, uint16(firstEphemeralPort), a.LocalAddr().Port())
	assert.Equal(t, uint16(firstEphemeralPort+1), b.LocalAddr().Port())

	_, err := n.Attach(a.LocalAddr())
	assert.ErrorIs(t, err, errAddrInUse)
	for _, bad := range []string{"0.0.0.0:1", "[::]:1", "224.0.0.1:1"} {
		_, err := n.Attach(netip.MustParseAddrPort(bad))
		assert.Error(t, err, bad)
	}
	require.NoError(t, a.Close())
	again, err := n.Attach(a.LocalAddr())
	require.NoError(t, err, "Close frees the address")
	again.Close()
}

func TestConcurrentSenders(t *testing.T) {
	const senders, each = 4, 500
	n := NewNetworkConfig(Config{QueueLen: senders * each})
	rx := attach(t, n, "198.18.0.100:4791")
	done := make(chan error, senders)
	for s := range senders {
		tx := attach(t, n, netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 0, byte(1 + s)}), 4791).String())
		sizes := make([]int, each)
		for i := range sizes {
			sizes[i] = 4
		}
		pkts := packets(t, rx.LocalAddr(), sizes...)
		for i, p := range pkts {
			p.Buf[rocev2.BTHLen] = byte(i) // sequence per sender
			p.Buf[rocev2.BTHLen+1] = byte(i >> 8)
		}
		go func() {
			for i := range pkts {
				if err := tx.Send(pkts[i : i+1]); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range senders {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("senders did not finish")
		}
	}
	next := map[netip.AddrPort]int{}
	for _, d := range receiveN(t, rx, senders*each) {
		require.Equal(t, backend.ICRCOK, d.ICRC)
		seq := int(d.Buf[rocev2.BTHLen]) | int(d.Buf[rocev2.BTHLen+1])<<8
		assert.Equal(t, next[d.Src], seq, "FIFO per sender")
		next[d.Src] = seq + 1
	}
	assert.Len(t, next, senders)
}

func TestCloseUnblocksReceive(t *testing.T) {
	n := NewNetwork()
	a := attach(t, n, "198.18.0.1:4791")
	b, err := n.Attach(netip.MustParseAddrPort("198.18.0.2:4791"))
	require.NoError(t, err)
	backendtest.Run(t, b, packets(t, a.LocalAddr(), 1))

	require.NoError(t, a.Send(packets(t, b.LocalAddr(), 1)))
	assert.Equal(t, uint64(1), n.Stats().NoRoute, "a closed backend is gone from the network")
}

func TestDataPathDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates; make test runs this without it")
	}
	n := NewNetwork()
	a := attach(t, n, "198.18.0.1:4791")
	b := attach(t, n, "198.18.0.2:4791")
	sizes := make([]int, 64)
	for i := range sizes {
		sizes[i] = 1024
	}
	pkts := packets(t, b.LocalAddr(), sizes...)
	rx := make([]backend.Incoming, 64)
	bad := 0
	allocs := testing.AllocsPerRun(100, func() {
		_ = a.Send(pkts)
		for got := 0; got < len(pkts); {
			k, _ := b.Receive(rx)
			for _, d := range rx[:k] {
				if d.ICRC != backend.ICRCOK {
					bad++
				}
			}
			got += k
		}
	})
	assert.Zero(t, allocs)
	assert.Zero(t, bad)
}

func BenchmarkSendReceive(b *testing.B) {
	n := NewNetwork()
	tx := attach(b, n, "198.18.0.1:4791")
	rx := attach(b, n, "198.18.0.2:4791")
	sizes := make([]int, 64)
	for i := range sizes {
		sizes[i] = 1024
	}
	pkts := packets(b, rx.LocalAddr(), sizes...)
	out := make([]backend.Incoming, 64)
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		_ = tx.Send(pkts)
		for got := 0; got < len(pkts); {
			k, _ := rx.Receive(out)
			got += k
		}
	}
	b.ReportMetric(float64(b.N*len(pkts))/time.Since(start).Seconds(), "pkts/s")
}
