//go:build linux

package udp_test

import (
	"context"
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/internal/hostile"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/udp"
	"github.com/goroce/goroce/rocev2/device"
)

// The receive path from the socket up, fed by a stand-in kernel
// (udp.FakeKernel) with what a hostile sender, or a kernel that lies, could
// make recvmmsg report: empty datagrams, lengths beyond the buffer,
// truncation flags, GRO segment sizes of 0, 1 or larger than the datagram,
// control messages of any length, senders of any address family. Behind
// the backend sit a device and a live RC QP in RTS (hostile.Target).

var peer = netip.MustParseAddrPort("127.0.0.66:4791")

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

type rig struct {
	be     *udp.Backend
	kernel *udp.FakeKernel
	count  *counting
	target *hostile.Target
}

func newRig(tb testing.TB) *rig {
	tb.Helper()
	be, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	if err != nil {
		tb.Fatal(err)
	}
	r := &rig{be: be, kernel: udp.UseFakeKernel(be), count: &counting{Backend: be}}
	wrapped := backend.KeepPolling(r.count, be, func(p []backend.Incoming) { r.count.n.Add(uint64(len(p))) })
	r.target = hostile.NewTarget(tb, wrapped, peer.Addr())
	return r
}

// sockaddrIn is the sockaddr_in of a.
func sockaddrIn(a netip.AddrPort) []byte {
	b := make([]byte, unix.SizeofSockaddrInet4)
	binary.NativeEndian.PutUint16(b[0:], unix.AF_INET)
	binary.BigEndian.PutUint16(b[2:], a.Port())
	ip := a.Addr().As4()
	copy(b[4:], ip[:])
	return b
}

// groCmsg is a UDP_GRO control message reporting segments of size.
func groCmsg(size int) []byte {
	b := make([]byte, unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafePointer(b))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_GRO
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(b[unix.CmsgLen(0):], uint32(size))
	return b
}

// valid returns a well-formed packet from peer to the rig's QP with a
// valid ICRC (IPv4 ID 0).
func (r *rig) valid(fl rocev2.Fields, payload []byte) []byte {
	fl.PKey, fl.DestQP = 0xffff, r.target.QP.QPN()
	b, _ := fl.Append(nil, payload)
	f := rocev2.NewFlow(peer, r.be.LocalAddr())
	f.SealICRC(b)
	return b
}

// deliver pushes one batch and waits until the device has handled it; it
// returns how many datagrams the backend handed out and how many the
// device's counters account for.
func (r *rig) deliver(tb testing.TB, batch []udp.FakeMessage) (handed, counted uint64) {
	tb.Helper()
	h0, c0 := r.count.n.Load(), hostile.Received(&r.target.Dev.Counters)
	n := r.kernel.Push(batch)
	if !hostile.WaitFor(context.Background(), 20*time.Second, func() bool { return r.kernel.IdleAfter(n) }) {
		tb.Fatal("the device did not finish the batch (receive path stuck?)")
	}
	return r.count.n.Load() - h0, hostile.Received(&r.target.Dev.Counters) - c0
}

func TestHostileDatagrams(t *testing.T) {
	r := newRig(t)
	src := sockaddrIn(peer)
	send := r.valid(rocev2.Fields{Opcode: rocev2.RCSendOnly, PSN: hostile.RQPSN}, []byte("hello"))
	msg := func(data []byte) udp.FakeMessage {
		return udp.FakeMessage{Data: data, Len: len(data), Name: src, NameLen: len(src)}
	}
	in6 := make([]byte, unix.SizeofSockaddrInet6)
	binary.NativeEndian.PutUint16(in6[0:], unix.AF_INET6)
	tests := []struct {
		name    string
		m       func() udp.FakeMessage
		counter string // the counter the datagrams must land in
		want    uint64 // datagrams handed out
	}{
		{"empty datagram", func() udp.FakeMessage { return msg(nil) }, "rcvd_bad_datagram", 1},
		{"length beyond the buffer", func() udp.FakeMessage { m := msg(send); m.Len = 1 << 20; return m }, "rcvd_bad_datagram", 1},
		{"negative length", func() udp.FakeMessage { m := msg(send); m.Len = -1; return m }, "rcvd_bad_datagram", 1},
		{"truncated by the kernel", func() udp.FakeMessage { m := msg(send); m.Flags = unix.MSG_TRUNC; return m }, "rcvd_bad_datagram", 1},
		{"one byte", func() udp.FakeMessage { return msg([]byte{0x04}) }, "rcvd_truncated", 1},
		{"unknown address family", func() udp.FakeMessage {
			m := msg(send)
			m.Name = append([]byte{0x77, 0}, src[2:]...)
			return m
		}, "rcvd_bad_source", 1},
		{"IPv6 sender on an IPv4 socket", func() udp.FakeMessage { m := msg(send); m.Name, m.NameLen = in6, len(in6); return m }, "rcvd_bad_source", 1},
		{"sockaddr shorter than its family's", func() udp.FakeMessage { m := msg(send); m.NameLen = 4; return m }, "rcvd_bad_source", 1},
		{"sockaddr longer than the buffer", func() udp.FakeMessage { m := msg(send); m.NameLen = 1 << 16; return m }, "rcvd_bad_source", 1},
		{"GRO segment size 0", func() udp.FakeMessage { m := msg(send); m.Control = groCmsg(0); m.CtlLen = len(m.Control); return m }, "rcvd_pkts", 1},
		{"GRO segment size 1", func() udp.FakeMessage {
			m := msg(send)
			m.Control = groCmsg(1)
			m.CtlLen = len(m.Control)
			return m
		}, "rcvd_truncated", uint64(len(send))},
		{"GRO segment larger than the datagram", func() udp.FakeMessage {
			m := msg(send)
			m.Control = groCmsg(60000)
			m.CtlLen = len(m.Control)
			return m
		}, "rcvd_pkts", 1},
		{"GRO segment not dividing the datagram", func() udp.FakeMessage {
			two := append(append([]byte{}, send...), send[:10]...)
			m := msg(two)
			m.Control = groCmsg(len(send))
			m.CtlLen = len(m.Control)
			return m
		}, "", 2},
		{"control length beyond the buffer", func() udp.FakeMessage {
			m := msg(send)
			m.Control = groCmsg(4)
			m.CtlLen = 1 << 20
			return m
		}, "", uint64((len(send) + 3) / 4)},
		{"control message with a lying cmsg_len", func() udp.FakeMessage {
			m := msg(send)
			m.Control = groCmsg(4)
			binary.NativeEndian.PutUint64(m.Control[0:], 1<<40)
			m.CtlLen = len(m.Control)
			return m
		}, "rcvd_pkts", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.target.Reconnect(t)
			before, _ := r.target.Dev.Counters.Get(tt.counter)
			handed, counted := r.deliver(t, []udp.FakeMessage{tt.m()})
			require.Equal(t, tt.want, handed, "datagrams handed to the device")
			require.Equal(t, handed, counted, "every datagram handled or dropped and counted")
			if tt.counter != "" {
				after, ok := r.target.Dev.Counters.Get(tt.counter)
				require.True(t, ok, tt.counter)
				require.NotZero(t, after-before, "counted as %s", tt.counter)
			}
			require.True(t, r.target.Unchanged())
		})
	}
}

// FuzzReceive feeds fuzzed recvmmsg batches to the UDP backend with a
// device and a live RC QP behind it: nothing panics, every datagram handed
// to the device is handled or dropped and counted, and the QP's guarded
// memory is unchanged.
func FuzzReceive(f *testing.F) {
	f.Add([]byte{0x00, 0x00, 0x00})                                      // one empty datagram
	f.Add([]byte{0x01 | 0x02, 0x00, 0x11, 0x04, 0x00, 0x00, 0xff, 0xff}) // a short sealed packet
	f.Add([]byte{0x08 | 0x02 | 0x01, 0x00, 0x40, 0x00, 0x00})            // GRO segment size 0
	f.Add([]byte{0x10, 0x00, 0x20, 0x0a, 0x1c})                          // an AF_INET6 sender
	f.Add([]byte{0x40, 0x00, 0x08, 0x00, 0x02})                          // MSG_TRUNC
	r := newRig(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		r.target.Reconnect(t)
		var batch []udp.FakeMessage
		for _, m := range hostile.Messages(in) {
			batch = append(batch, r.fake(m))
		}
		if len(batch) == 0 {
			return
		}
		handed, counted := r.deliver(t, batch)
		if handed != counted {
			t.Fatalf("%d datagrams handed to the device, %d handled or counted", handed, counted)
		}
		if !r.target.Unchanged() {
			t.Fatalf("guarded memory changed by % x", in)
		}
	})
}

// fake turns a decoded fuzz message into what the stand-in kernel reports.
func (r *rig) fake(m hostile.Message) udp.FakeMessage {
	data := m.Data
	if m.Aim {
		data = r.target.Aim(data)
	}
	if m.Seal && len(data) >= rocev2.ICRCLen {
		f := rocev2.NewFlow(peer, r.be.LocalAddr())
		f.SealICRC(data)
	}
	name := sockaddrIn(peer)
	if m.Family != unix.AF_INET || m.Addr != nil {
		name = binary.NativeEndian.AppendUint16(nil, m.Family)
		name = append(name, m.Addr...)
	}
	fm := udp.FakeMessage{Data: data, Len: len(data), Name: name, NameLen: len(name), Control: m.Control, CtlLen: len(m.Control), Flags: int32(m.Flags)}
	if m.Len >= 0 {
		fm.Len = m.Len
	}
	if m.NameLen >= 0 {
		fm.NameLen = m.NameLen
	}
	if m.Control == nil && m.GRO != 0 {
		fm.Control = groCmsg(m.GRO)
		fm.CtlLen = len(fm.Control)
	}
	if m.CtlLen >= 0 && m.Control != nil {
		fm.CtlLen = m.CtlLen
	}
	return fm
}

var _ = device.Counters{}
