package qp

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/device"
)

// A blind sweep of QP numbers from the peer's IP address (the attacker
// knows whom the QP talks to, not its number or PSNs) at a device with a
// live RC QP whose every WQE is in flight kills nothing: 65,536 fatal
// NAKs where numbers FirstQPN+slot put every QP (four per number, their
// PSNs a quarter of the space apart, so that one is ahead of any QP's
// window), then 65,536 datagrams of every kind at random numbers and
// PSNs. The QP's send side is as it was, and the peer's answers then
// complete every WQE.
func TestBlindQPNSweepKillsNothing(t *testing.T) {
	l := newLoneRC(t, RandomPSN())
	sweeper, err := l.net.Attach(netip.AddrPortFrom(l.peer.Addr(), 9999))
	require.NoError(t, err)
	defer sweeper.Close()
	rng := rand.New(rand.NewPCG(7, 11))
	kinds := []rocev2.Fields{
		{Opcode: rocev2.RCAcknowledge, Syndrome: 0x61},
		{Opcode: rocev2.RCAcknowledge, Syndrome: 0x63},
		{Opcode: rocev2.RCAcknowledge, Syndrome: 0x60},
		{Opcode: rocev2.RCAcknowledge, Syndrome: 0x2C},
		{Opcode: rocev2.RCAcknowledge, Syndrome: 0x1F},
		{Opcode: rocev2.RCReadResponseOnly, Syndrome: 0x1F},
		{Opcode: rocev2.RCAtomicAcknowledge, Syndrome: 0x1F},
		{Opcode: rocev2.RCSendOnly},
		{Opcode: rocev2.RCWriteOnly, VA: 0x1000, Len: 8},
	}
	const batch = 512 // well inside memlink's receive queue
	var dgs []backend.Outgoing
	sent, received0 := 0, l.dev.Counters.Received()
	send := func(fl rocev2.Fields) {
		fl.PKey = 0xffff
		var payload []byte
		if fl.Opcode.Is(rocev2.OpPayload) {
			payload = make([]byte, 8)
		}
		p, err := fl.Append(nil, payload)
		require.NoError(t, err)
		dgs = append(dgs, backend.Outgoing{Buf: p, Dst: l.dev.LocalAddr()})
		if len(dgs) < batch {
			return
		}
		require.NoError(t, sweeper.Send(dgs))
		sent += len(dgs)
		dgs = dgs[:0]
		require.Eventually(t, func() bool { return l.dev.Counters.Received()-received0 >= uint64(sent) }, waitLimit, 50*time.Microsecond,
			"the device took %d of %d datagrams", l.dev.Counters.Received()-received0, sent)
	}
	v0 := l.view()
	for qpn := uint32(device.FirstQPN); qpn < device.FirstQPN+device.MaxQP; qpn++ {
		psn := rocev2.PSN(rng.Uint32() & rocev2.PSNMask)
		for j := range uint32(4) {
			fl := kinds[j%2]
			fl.DestQP, fl.PSN = qpn, psn.Add(j<<22)
			send(fl)
		}
	}
	for range 65536 {
		fl := kinds[rng.IntN(len(kinds))]
		fl.DestQP, fl.PSN, fl.RKey = rng.Uint32()&0xFFFFFF, rocev2.PSN(rng.Uint32()&rocev2.PSNMask), rng.Uint32()
		send(fl)
	}
	require.Equal(t, 2*65536, sent)
	assert.Equal(t, v0, l.view(), "the sweep changed the QP's send side")
	l.answer(t)
}
