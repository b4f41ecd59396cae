//go:build linux

package afpacket_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/race"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/afpacket"
)

// The data path allocates nothing per packet: Send to a known neighbour
// (headers into preallocated slots, ICRC sealed in place) and Receive
// (frames checked in the backend's buffers).
func TestSendAndReceiveDoNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	local, peer := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	b, k, sent := afpacket.OpenFake(t, local, peer)
	t.Cleanup(func() { b.Close() })

	pkts := packets(t, netip.AddrPortFrom(peer, rocev2.UDPPort), 0x11, 64)
	require.NoError(t, b.Send(pkts))
	allocs := testing.AllocsPerRun(100, func() {
		if err := b.Send(pkts); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs, "allocations per Send of 64 packets")
	require.Equal(t, 101*64+64, sent.N())

	pkt, err := (&rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x11}).Append(nil, make([]byte, 1000))
	require.NoError(t, err)
	batch := make([]afpacket.FakeMessage, 64)
	for i := range batch {
		batch[i] = message(afpacket.Frame(local, peer, 0xC000, uint16(i), pkt))
	}
	const runs = 100
	for range runs + 1 {
		k.Push(batch)
	}
	rx := make([]backend.Incoming, 64)
	allocs = testing.AllocsPerRun(runs, func() {
		n, err := b.Receive(rx)
		if err != nil || n != 64 || rx[0].ICRC != backend.ICRCVerified {
			t.Fatalf("received %d, %v, %v", n, err, rx[0].ICRC)
		}
	})
	require.Zero(t, allocs, "allocations per Receive of 64 frames")
}

// Receiving from the TPACKET_V3 ring allocates nothing either: frames are
// copied out of the block into the backend's buffers.
func TestRingReceiveDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	local, peer := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	b, _, _ := afpacket.OpenFake(t, local, peer)
	t.Cleanup(func() { b.Close() })
	ring := afpacket.UseFakeRing(b, 128<<10, 2)

	pkt, err := (&rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x11}).Append(nil, make([]byte, 1000))
	require.NoError(t, err)
	frames := make([][]byte, 64)
	for i := range frames {
		frames[i] = afpacket.Frame(local, peer, 0xC000, uint16(i), pkt)
	}
	blk := afpacket.RingBlock(128<<10, frames)
	rx := make([]backend.Incoming, 64)
	next := 0
	allocs := testing.AllocsPerRun(100, func() {
		ring.Load(next, blk)
		next ^= 1
		n, err := b.TryReceive(rx)
		if err != nil || n != 64 || rx[63].ICRC != backend.ICRCVerified {
			t.Fatalf("received %d, %v, %v", n, err, rx[63].ICRC)
		}
	})
	require.Zero(t, allocs, "allocations per Receive of a block of 64 frames")
}
