package hostile_test

import (
	"io"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/hostile"
	"github.com/goroce/goroce/pcap"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/faulty"
	"github.com/goroce/goroce/rocev2/backend/memlink"
)

// The receive paths of the backends other than UDP (whose stand-in kernel
// has its own fuzz target in rocev2/udp): the in-memory network, the fault
// injector and the capture tap, alone and stacked, each with a device and a
// live RC QP behind them, fed by an attacker on the same network.

var (
	targetAddr   = netip.MustParseAddrPort("127.0.0.1:4791")
	attackerAddr = netip.MustParseAddrPort("127.0.0.66:4791")
)

// counting counts the datagrams a device takes from its backend.
type counting struct {
	backend.Backend
	n atomic.Uint64
}

func (c *counting) Receive(p []backend.Incoming) (int, error) {
	n, err := c.Backend.Receive(p)
	c.n.Add(uint64(n))
	return n, err
}

// stack is one backend arrangement under attack.
type stack struct {
	name     string
	target   *hostile.Target
	count    *counting
	attacker backend.Backend
}

func newStack(tb testing.TB, name string, wrap func(backend.Backend) backend.Backend) *stack {
	tb.Helper()
	network := memlink.NewNetwork()
	be, err := network.Attach(targetAddr)
	require.NoError(tb, err)
	attacker, err := network.Attach(attackerAddr)
	require.NoError(tb, err)
	tb.Cleanup(func() { attacker.Close() })
	go func() { // take whatever the QP answers
		batch := make([]backend.Incoming, 64)
		for {
			if _, err := attacker.Receive(batch); err != nil {
				return
			}
		}
	}()
	inner := wrap(be)
	s := &stack{name: name, count: &counting{Backend: inner}, attacker: attacker}
	var wrapped backend.Backend = s.count
	if _, ok := inner.(backend.Poller); ok {
		wrapped = backend.KeepPolling(s.count, inner, func(p []backend.Incoming) { s.count.n.Add(uint64(len(p))) })
	}
	s.target = hostile.NewTarget(tb, wrapped, attackerAddr.Addr())
	return s
}

func stacks(tb testing.TB) []*stack {
	faults := faulty.Config{Seed: 7, Corrupt: 0.2, Loss: 0.1, Duplicate: 0.1}
	capture := func() *pcap.Writer {
		w, err := pcap.NewWriter(io.Discard, pcap.WriterOptions{})
		require.NoError(tb, err)
		return w
	}
	return []*stack{
		newStack(tb, "memlink", func(b backend.Backend) backend.Backend { return b }),
		newStack(tb, "faulty", func(b backend.Backend) backend.Backend { return faulty.Wrap(b, faults).Backend() }),
		newStack(tb, "tap", func(b backend.Backend) backend.Backend { return pcap.NewTap(b, capture()).Backend() }),
		newStack(tb, "tap over faulty", func(b backend.Backend) backend.Backend {
			return pcap.NewTap(faulty.Wrap(b, faults).Backend(), capture()).Backend()
		}),
	}
}

// attack sends the decoded messages, fences, and checks the invariants.
func (s *stack) attack(tb testing.TB, msgs []hostile.Message) {
	tb.Helper()
	s.target.Reconnect(tb)
	inject := func(p []byte) {
		// memlink refuses (and does not deliver) what cannot hold an
		// ICRC: that is the sender's error, not the receiver's.
		_ = s.attacker.Send([]backend.Outgoing{{Buf: p, Dst: targetAddr}})
	}
	h0, c0 := s.count.n.Load(), hostile.Received(&s.target.Dev.Counters)
	for _, m := range msgs {
		p := m.Data
		if m.Aim {
			p = s.target.Aim(p)
		}
		inject(p)
	}
	s.target.Fence(tb, inject)
	handed := s.count.n.Load() - h0
	counted := hostile.Received(&s.target.Dev.Counters) - c0
	if handed != counted {
		tb.Fatalf("%s: %d datagrams handed to the device, %d handled or counted", s.name, handed, counted)
	}
	if !s.target.Unchanged() {
		tb.Fatalf("%s: guarded memory changed", s.name)
	}
}

func TestBackendsUnderAttack(t *testing.T) {
	send := func(op rocev2.Opcode, psn uint32, payload []byte) []byte {
		fl := rocev2.Fields{Opcode: op, PKey: 0xffff, PSN: rocev2.PSN(psn), VA: 0x1000, RKey: 0x1234, Len: uint32(len(payload))}
		b, _ := fl.Append(nil, payload)
		return b
	}
	ud := func(op rocev2.Opcode, qkey uint32, payload []byte) []byte {
		fl := rocev2.Fields{Opcode: op, PKey: 0xffff, QKey: qkey, SrcQP: 0x42}
		b, _ := fl.Append(nil, payload)
		return b
	}
	for _, s := range stacks(t) {
		t.Run(s.name, func(t *testing.T) {
			var msgs []hostile.Message
			for _, p := range [][]byte{
				{}, {0x04}, make([]byte, 4), make([]byte, 12), make([]byte, 9000),
				send(rocev2.RCSendOnly, hostile.RQPSN, []byte("hello")),
				send(rocev2.RCWriteOnly, hostile.RQPSN, make([]byte, 64)),
				send(rocev2.RCReadRequest, hostile.RQPSN, nil),
				send(rocev2.RCFetchAdd, hostile.RQPSN, nil),
				send(rocev2.UCSendOnly, hostile.RQPSN, []byte("hello")),
				send(rocev2.UCWriteOnly, hostile.RQPSN, make([]byte, 64)),
				send(rocev2.UCSendMiddle, hostile.RQPSN+1, make([]byte, 1024)),
				ud(rocev2.UDSendOnly, hostile.QKey, []byte("hello")),
				ud(rocev2.UDSendOnlyImm, hostile.QKey^1, []byte("hello")),
				ud(rocev2.UDSendOnly, hostile.QKey, make([]byte, 8192)),
			} {
				msgs = append(msgs, hostile.Message{Data: p, Aim: true})
			}
			s.attack(t, msgs)
		})
	}
}

// FuzzBackends throws fuzzed datagrams at each backend arrangement: nothing
// panics, every datagram the device took is handled or dropped and counted,
// and the QP's guarded memory is unchanged.
func FuzzBackends(f *testing.F) {
	f.Add(byte(0), []byte{0x00, 0x00, 0x00})
	f.Add(byte(1), []byte{0x02, 0x00, 0x11, 0x04, 0x00, 0x00, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(byte(3), []byte{0x02, 0x00, 0x1c, 0x0a, 0x00, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0x12, 0x34, 0, 0, 0, 0, 0, 0})
	// A UD SEND with the Target's Q_Key and a UC WRITE, aimed and sealed
	// (selector 0x03, then the length and the packet).
	seed := func(fl rocev2.Fields, payload []byte) []byte {
		fl.PKey = 0xffff
		p, _ := fl.Append(nil, payload)
		return append([]byte{0x03, byte(len(p) >> 8), byte(len(p))}, p...)
	}
	f.Add(byte(0), seed(rocev2.Fields{Opcode: rocev2.UDSendOnly, QKey: hostile.QKey, SrcQP: 7}, []byte("hello")))
	f.Add(byte(1), seed(rocev2.Fields{Opcode: rocev2.UCWriteFirst, PSN: hostile.RQPSN, VA: 0x1000, RKey: 0x1234, Len: 4096}, make([]byte, 1024)))
	all := stacks(f)
	f.Fuzz(func(t *testing.T, which byte, in []byte) {
		all[int(which)%len(all)].attack(t, hostile.Messages(in))
	})
}
