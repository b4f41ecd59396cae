//go:build linux

package afpacket_test

import (
	"context"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/hostile"
	"github.com/goroce/goroce/internal/vethtest"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend/afpacket"
	"github.com/goroce/goroce/rocev2/device"
)

// Hostile frames on a real interface: a raw socket in namespace A sends B
// frames no RoCE peer sends, and B's device drops and counts each under
// its reason. (Frames the kernel itself refuses to carry, such as ones
// shorter than an Ethernet header or longer than the MTU, are fed through
// the stand-in kernel instead: TestHostileMessages.)
func TestVethHostileFrames(t *testing.T) { forModes(t, testVethHostileFrames) }

func testVethHostileFrames(t *testing.T, mode afpacket.ReceiveMode) {
	p := vethtest.New(t)
	b := open(t, p.NSB, afpacket.Config{Receive: mode, Interface: p.IfB})
	dev, err := device.New(device.Config{Backend: b})
	require.NoError(t, err)
	t.Cleanup(func() { dev.Close() })
	s := newRawSender(t, p)
	pkt, err := (&rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x11}).Append(nil, make([]byte, 64))
	require.NoError(t, err)
	valid := ethernet(p, pkt)
	mut := func(f func([]byte) []byte) []byte { return f(append([]byte(nil), valid...)) }
	for _, tc := range []struct {
		name    string
		frame   []byte
		counter string
	}{
		{"IPv4 options", mut(func(b []byte) []byte {
			out := append(append(append([]byte{}, b[:34]...), 1, 1, 1, 1), b[34:]...)
			out[14] = 0x46
			binary.BigEndian.PutUint16(out[16:], binary.BigEndian.Uint16(out[16:])+4)
			return refresh4(out)
		}), "rcvd_bad_encap"},
		{"first fragment", mut(func(b []byte) []byte { b[20] = 0x20; return refresh4(b) }), "rcvd_bad_encap"},
		{"later fragment", mut(func(b []byte) []byte { b[20], b[21] = 0, 0x10; return refresh4(b) }), "rcvd_bad_encap"},
		// The kernel takes the tag off, and with no device for VLAN 5
		// marks the frame as another host's.
		{"VLAN tag", mut(func(b []byte) []byte {
			return append(append(append([]byte{}, b[:12]...), 0x81, 0x00, 0x00, 0x05), b[12:]...)
		}), "rcvd_not_roce"},
		{"IPv4 header checksum", mut(func(b []byte) []byte { b[24] ^= 0x40; return b }), "rcvd_bad_checksum"},
		{"UDP checksum", mut(func(b []byte) []byte { b[40], b[41] = 0x12, 0x34; return b }), "rcvd_bad_checksum"},
		{"IPv4 total length beyond the frame", mut(func(b []byte) []byte { b[17] += 8; return refresh4(b) }), "rcvd_truncated"},
		{"UDP length lies", mut(func(b []byte) []byte { b[39] -= 4; return b }), "rcvd_truncated"},
		{"UDP header cut", mut(func(b []byte) []byte {
			b = b[:14+20+6]
			binary.BigEndian.PutUint16(b[16:], 26)
			return refresh4(b)
		}), "rcvd_truncated"},
		{"ICRC wrong", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), "rcvd_icrc_err"},
		{"payload too short for a BTH", mut(func(b []byte) []byte {
			b = b[:14+20+8+6]
			binary.BigEndian.PutUint16(b[16:], 34)
			binary.BigEndian.PutUint16(b[38:], 14)
			return refresh4(b)
		}), "rcvd_truncated"},
		{"to another host's MAC", mut(func(b []byte) []byte { b[5] ^= 0x10; return b }), "rcvd_not_roce"},
		{"from the device's own address", mut(func(b []byte) []byte { copy(b[26:30], b[30:34]); return refresh4(b) }), "rcvd_bad_source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := dev.Counters.Get(tc.counter)
			s.sendAll(t, [][]byte{tc.frame})
			require.True(t, hostile.WaitFor(context.Background(), 10*time.Second, func() bool {
				after, _ := dev.Counters.Get(tc.counter)
				return after > before
			}), "counted as %s", tc.counter)
		})
	}
	v, _ := dev.Counters.Get("rcvd_pkts")
	require.Zero(t, v, "nothing delivered")
}

// The receive path from the socket up, fed by a stand-in kernel with what a
// hostile sender, or a kernel that lies, could make recvmmsg report, with a
// device and a live RC QP behind it (hostile.Target).

var (
	fakeLocal = netip.MustParseAddr("198.18.0.1")
	fakePeer  = netip.MustParseAddr("198.18.0.66")
)

type fakeRig struct {
	be     *afpacket.Backend
	kernel *afpacket.FakeKernel
	target *hostile.Target
}

func newFakeRig(tb testing.TB) *fakeRig {
	tb.Helper()
	be, k, _ := afpacket.OpenFake(tb, fakeLocal, fakePeer)
	r := &fakeRig{be: be, kernel: k}
	r.target = hostile.NewTarget(tb, be, fakePeer)
	return r
}

// deliver pushes one batch and waits until the device has handled it; it
// returns how many datagrams the device's counters account for.
func (r *fakeRig) deliver(tb testing.TB, batch []afpacket.FakeMessage) uint64 {
	tb.Helper()
	c0 := hostile.Received(&r.target.Dev.Counters)
	n := r.kernel.Push(batch)
	if !hostile.WaitFor(context.Background(), 20*time.Second, func() bool { return r.kernel.IdleAfter(n) }) {
		tb.Fatal("the device did not finish the batch (receive path stuck?)")
	}
	return hostile.Received(&r.target.Dev.Counters) - c0
}

// message wraps a frame as the kernel reports it: a zero virtio_net_hdr in
// front, to this host, with PACKET_AUXDATA.
func message(frame []byte) afpacket.FakeMessage {
	data := append(make([]byte, afpacket.VnetHdrLen), frame...)
	name, aux := afpacket.Sockaddr(afpacket.PacketHost), afpacket.AuxData(0)
	return afpacket.FakeMessage{Data: data, Len: len(data), Name: name, NameLen: len(name), Control: aux, CtlLen: len(aux)}
}

func TestHostileMessages(t *testing.T) {
	r := newFakeRig(t)
	send, err := (&rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: r.target.QP.QPN(), PSN: hostile.RQPSN}).Append(nil, []byte("hello"))
	require.NoError(t, err)
	valid := afpacket.Frame(fakeLocal, fakePeer, 0xC000, 7, send)
	jumbo, err := (&rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: r.target.QP.QPN()}).Append(nil, make([]byte, 3000))
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		m       func() afpacket.FakeMessage
		counter string
	}{
		{"a valid frame", func() afpacket.FakeMessage { return message(valid) }, "rcvd_pkts"},
		{"empty", func() afpacket.FakeMessage { m := message(nil); m.Len = 0; return m }, "rcvd_bad_datagram"},
		{"no virtio_net_hdr", func() afpacket.FakeMessage { m := message(nil); m.Len = 4; return m }, "rcvd_bad_datagram"},
		{"Ethernet header cut", func() afpacket.FakeMessage { return message(valid[:10]) }, "rcvd_truncated"},
		{"length beyond the buffer", func() afpacket.FakeMessage { m := message(valid); m.Len = 1 << 20; return m }, "rcvd_bad_datagram"},
		{"negative length", func() afpacket.FakeMessage { m := message(valid); m.Len = -1; return m }, "rcvd_bad_datagram"},
		{"cut by the kernel", func() afpacket.FakeMessage { m := message(valid); m.Flags = 0x20; return m }, "rcvd_bad_datagram"}, // MSG_TRUNC
		{"jumbo frame beyond the MTU", func() afpacket.FakeMessage { return message(afpacket.Frame(fakeLocal, fakePeer, 0xC000, 7, jumbo)) }, "rcvd_bad_datagram"},
		{"no sockaddr", func() afpacket.FakeMessage { m := message(valid); m.NameLen = 0; return m }, "rcvd_not_roce"},
		{"sockaddr longer than its buffer", func() afpacket.FakeMessage { m := message(valid); m.NameLen = 1 << 16; return m }, "rcvd_not_roce"},
		{"broadcast", func() afpacket.FakeMessage { m := message(valid); m.Name = afpacket.Sockaddr(1); return m }, "rcvd_not_roce"},
		{"VLAN tag taken off", func() afpacket.FakeMessage {
			m := message(valid)
			m.Control = afpacket.AuxData(afpacket.StatusVLANValid)
			return m
		}, "rcvd_bad_encap"},
		{"control length beyond the buffer", func() afpacket.FakeMessage { m := message(valid); m.CtlLen = 1 << 20; return m }, "rcvd_pkts"},
		{"control message with a lying cmsg_len", func() afpacket.FakeMessage {
			m := message(valid)
			binary.NativeEndian.PutUint64(m.Control[0:], 1<<40)
			return m
		}, "rcvd_pkts"},
		{"GSO type TCP", func() afpacket.FakeMessage { m := message(valid); m.Data[1] = 1; return m }, "rcvd_bad_encap"},
		{"GSO segment size 1", func() afpacket.FakeMessage {
			m := message(valid)
			m.Data[1] = 5
			binary.NativeEndian.PutUint16(m.Data[4:], 1)
			return m
		}, "rcvd_truncated"},
		{"GSO more segments than a send makes", func() afpacket.FakeMessage {
			m := message(afpacket.Frame(fakeLocal, fakePeer, 0xC000, 7, jumbo[:1000]))
			m.Data[1] = 5
			binary.NativeEndian.PutUint16(m.Data[4:], 10)
			return m
		}, "rcvd_bad_datagram"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.target.Reconnect(t)
			before, _ := r.target.Dev.Counters.Get(tc.counter)
			counted := r.deliver(t, []afpacket.FakeMessage{tc.m()})
			require.NotZero(t, counted, "handled or dropped and counted")
			after, ok := r.target.Dev.Counters.Get(tc.counter)
			require.True(t, ok, tc.counter)
			require.NotZero(t, after-before, "counted as %s", tc.counter)
			require.True(t, r.target.Unchanged())
		})
	}
}

// FuzzReceive feeds fuzzed recvmmsg batches to the backend with a device
// and a live RC QP behind it: nothing panics, every frame handed to the
// device is handled or dropped and counted, and the QP's guarded memory is
// unchanged.
func FuzzReceive(f *testing.F) {
	f.Add([]byte{0x00, 0x00, 0x00})
	f.Add([]byte{0x01 | 0x02, 0x00, 0x11, 0x04, 0x00, 0x00, 0xff, 0xff})
	f.Add([]byte{0x08 | 0x02 | 0x01, 0x00, 0x40, 0x00, 0x00})
	f.Add([]byte{0x40, 0x00, 0x08, 0x00, 0x02})
	r := newFakeRig(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		r.target.Reconnect(t)
		var batch []afpacket.FakeMessage
		for _, m := range hostile.Messages(in) {
			batch = append(batch, r.fake(m))
		}
		if len(batch) == 0 {
			return
		}
		r.deliver(t, batch)
		if !r.target.Unchanged() {
			t.Fatalf("guarded memory changed by % x", in)
		}
	})
}

// fake turns a decoded fuzz message into what the stand-in kernel reports:
// Seal frames the data as a RoCE peer would (else the data is the whole
// frame, raw), Family's low byte is the packet type, GRO a GSO segment
// size.
func (r *fakeRig) fake(m hostile.Message) afpacket.FakeMessage {
	data := m.Data
	if m.Aim {
		data = r.target.Aim(data)
	}
	if m.Seal {
		data = afpacket.Frame(fakeLocal, fakePeer, 0xC000, uint16(m.Flags), data)
	}
	fm := message(data)
	fm.Name = afpacket.Sockaddr(uint8(m.Family) & 7)
	if m.GRO != 0 {
		fm.Data[1] = 5
		binary.NativeEndian.PutUint16(fm.Data[4:], uint16(m.GRO))
	}
	if m.Len >= 0 {
		fm.Len = m.Len
	}
	if m.NameLen >= 0 {
		fm.NameLen = m.NameLen
	}
	if m.Control != nil {
		fm.Control, fm.CtlLen = m.Control, len(m.Control)
		if m.CtlLen >= 0 {
			fm.CtlLen = m.CtlLen
		}
	}
	fm.Flags = int32(m.Flags & 0x20) // MSG_TRUNC or nothing
	return fm
}
