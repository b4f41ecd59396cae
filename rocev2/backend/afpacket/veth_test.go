//go:build linux

package afpacket_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/internal/hostile"
	"github.com/goroce/goroce/internal/vethtest"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/afpacket"
	"github.com/goroce/goroce/rocev2/backend/backendtest"
	"github.com/goroce/goroce/rocev2/backend/udp"
)

// The backend over a veth pair between two namespaces the tests create
// (internal/vethtest; 198.18.0.0/15 and 2001:db8::/32 only, inside them).

// open opens a backend in namespace ns.
func open(t *testing.T, ns string, cfg afpacket.Config) *afpacket.Backend {
	t.Helper()
	var b *afpacket.Backend
	require.NoError(t, vethtest.In(ns, func() (err error) {
		b, err = afpacket.Open(cfg)
		return err
	}))
	t.Cleanup(func() { b.Close() })
	return b
}

// packets returns n RC SEND_ONLY packets to dst from QP qpn of sizes
// 8, 16, ... bytes, ICRCs unsealed.
func packets(t *testing.T, dst netip.AddrPort, qpn uint32, n int) []backend.Outgoing {
	var out []backend.Outgoing
	for i := range n {
		f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x11, PSN: rocev2.PSN(i)}
		pl := make([]byte, 8*(i%100+1))
		pl[0] = byte(i)
		b, err := f.Append(nil, pl)
		require.NoError(t, err)
		out = append(out, backend.Outgoing{Buf: b, Dst: dst, Sender: backend.Sender{QPN: qpn}})
	}
	return out
}

// receiveN receives n datagrams from b, or fails after limit (a hang
// guard: the packets were sent before).
func receiveN(t *testing.T, b backend.Backend, n int, limit time.Duration) []backend.Incoming {
	t.Helper()
	type result struct {
		got []backend.Incoming
		err error
	}
	done := make(chan result, 1)
	go func() {
		var got []backend.Incoming
		batch := make([]backend.Incoming, 64)
		for len(got) < n {
			k, err := b.Receive(batch)
			if err != nil {
				done <- result{got, err}
				return
			}
			for _, d := range batch[:k] {
				d.Buf = append([]byte(nil), d.Buf...)
				got = append(got, d)
			}
		}
		done <- result{got, nil}
	}()
	select {
	case r := <-done:
		require.NoError(t, r.err)
		return r.got
	case <-time.After(limit):
		b.Close() // ends the goroutine
		t.Fatalf("received fewer than %d datagrams in %v", n, limit)
		return nil
	}
}

func TestVethExchange(t *testing.T) { forModes(t, testVethExchange) }

func testVethExchange(t *testing.T, mode afpacket.ReceiveMode) {
	p := vethtest.New(t)
	for _, tc := range []struct {
		name string
		a, b netip.Addr
	}{
		{"IPv4", p.A, p.B},
		{"IPv6", p.A6, p.B6},
		{"IPv6 link-local", p.LinkLocalA, p.LinkLocalB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := open(t, p.NSA, afpacket.Config{Receive: mode, Interface: p.IfA, Addr: tc.a})
			b := open(t, p.NSB, afpacket.Config{Receive: mode, Interface: p.IfB, Addr: tc.b})
			assert.Equal(t, p.MACA, a.HardwareAddr())
			assert.Equal(t, 1500, a.LinkMTU())
			assert.Equal(t, tc.a.WithZone(""), a.LocalAddr().Addr().WithZone(""))

			// 150 packets: the first ones wait for the neighbour
			// (a fresh namespace's table is empty), and the batch
			// takes three sendmmsg.
			// They are sealed when Send returns all the same, for the
			// headers they then leave with, as a capture tap records
			// them (the first packets to a new neighbour once showed a
			// bad ICRC in every capture).
			pkts := packets(t, b.LocalAddr(), 0x11, 100)
			require.NoError(t, a.Send(pkts), "parked until the neighbour is known")
			got := receiveN(t, b, len(pkts), 10*time.Second)
			for i, d := range got {
				assert.Equal(t, pkts[i].Buf, d.Buf, "parked packet %d in order, sealed as it left", i)
				assert.Equal(t, backend.ICRCVerified, d.ICRC, "parked packet %d", i)
				assert.False(t, pkts[i].Wire.Unsealed, "parked packet %d", i)
				if tc.a.Is4() {
					assert.Equal(t, pkts[i].Wire.IPv4ID, d.IPv4ID, "parked packet %d: the IPv4 ID Send reported", i)
				}
			}
			// Resolved: these leave at once, and say with which ID.
			pkts = packets(t, b.LocalAddr(), 0x11, 150)
			require.NoError(t, a.Send(pkts))
			got = receiveN(t, b, len(pkts), 10*time.Second)
			wantPort, _ := rocev2.SourcePort(0x11, 0, pkts[0].Buf)
			for i, d := range got {
				require.Zero(t, d.Drop, "packet %d: %v", i, d.Drop)
				assert.Equal(t, pkts[i].Buf, d.Buf, "packet %d in order, intact", i)
				assert.Equal(t, backend.ICRCVerified, d.ICRC, "packet %d", i)
				assert.Equal(t, tc.a.WithZone(""), d.Src.Addr().WithZone(""), "sender")
				assert.Equal(t, wantPort, d.Src.Port(), "rxe's source port for QP 0x11 to 0x11")
				assert.Equal(t, wantPort, pkts[i].Wire.SrcPort, "Send records the port")
				if tc.a.Is4() {
					assert.Equal(t, pkts[i].Wire.IPv4ID, d.IPv4ID, "IPv4 ID seen on the wire, packet %d", i)
					if i > 0 {
						assert.Equal(t, pkts[i-1].Wire.IPv4ID+1, pkts[i].Wire.IPv4ID, "one ID sequence")
					}
				}
			}
			if tc.a.Is6() && tc.a.IsLinkLocalUnicast() {
				assert.Equal(t, p.IfB, got[0].Src.Addr().Zone(), "a link-local sender is zoned")
			}
		})
	}
}

// TestVethWithUDPBackend: the two backends talk to each other. The UDP
// backend sends runs as UDP GSO, which veth hands over unsegmented: the
// AF_PACKET side cuts the super-frame into its segments and verifies each
// one's ICRC over the ID segmentation gives it. The UDP side infers the
// AF_PACKET side's IDs.
func TestVethWithUDPBackend(t *testing.T) { forModes(t, testVethWithUDPBackend) }

func testVethWithUDPBackend(t *testing.T, mode afpacket.ReceiveMode) {
	p := vethtest.New(t)
	a := open(t, p.NSA, afpacket.Config{Receive: mode, Interface: p.IfA})
	var u *udp.Backend
	require.NoError(t, vethtest.In(p.NSB, func() (err error) {
		u, err = udp.Open(udp.Config{Addr: netip.AddrPortFrom(p.B, rocev2.UDPPort)})
		return err
	}))
	t.Cleanup(func() { u.Close() })

	require.NoError(t, a.Send(packets(t, u.LocalAddr(), 0x12, 1))) // resolve the neighbour
	receiveN(t, u, 1, 10*time.Second)
	toU := packets(t, u.LocalAddr(), 0x12, 20)
	require.NoError(t, a.Send(toU))
	for i, d := range receiveN(t, u, len(toU), 10*time.Second) {
		assert.Equal(t, toU[i].Buf, d.Buf)
		assert.Equal(t, backend.ICRCOK, d.ICRC, "the UDP backend recovers the ID from the ICRC")
		assert.Equal(t, toU[i].Wire.IPv4ID, d.IPv4ID)
	}

	var toA []backend.Outgoing
	for range 8 { // equal sizes: one GSO send
		f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x12}
		b, err := f.Append(nil, make([]byte, 1000))
		require.NoError(t, err)
		toA = append(toA, backend.Outgoing{Buf: b, Dst: a.LocalAddr()})
	}
	require.NoError(t, u.Send(toA))
	for i, d := range receiveN(t, a, len(toA), 10*time.Second) {
		require.Zero(t, d.Drop, "%v", d.Drop)
		assert.Equal(t, toA[i].Buf, d.Buf)
		assert.Equal(t, backend.ICRCVerified, d.ICRC, "packet %d", i)
		assert.Equal(t, toA[i].Wire.IPv4ID, d.IPv4ID, "packet %d", i)
	}
}

// snmp reads one counter of /proc/net/snmp in the namespace ns.
func snmp(t *testing.T, ns, proto, name string) uint64 {
	t.Helper()
	var v uint64
	require.NoError(t, vethtest.In(ns, func() error {
		f, err := os.Open("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		var head []string
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) == 0 || fields[0] != proto+":" {
				continue
			}
			if head == nil {
				head = fields
				continue
			}
			for i := range head {
				if head[i] == name && i < len(fields) {
					v, err = strconv.ParseUint(fields[i], 10, 64)
					return err
				}
			}
		}
		return fmt.Errorf("no %s %s in snmp", proto, name)
	}))
	return v
}

// holdDrops returns the drop count of the UDP socket on port 4791 in ns.
func holdDrops(t *testing.T, ns string) (uint64, bool) {
	t.Helper()
	var drops uint64
	found := false
	require.NoError(t, vethtest.In(ns, func() error {
		out, err := os.ReadFile("/proc/thread-self/net/udp")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(out), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 13 || !strings.HasSuffix(f[1], ":12B7") {
				continue
			}
			drops, err = strconv.ParseUint(f[len(f)-1], 10, 64)
			found = err == nil
			return err
		}
		return nil
	}))
	return drops, found
}

// TestVethHostStackSilent: while the backend is open, UDP to port 4791
// reaches the backend and the host's stack drops it silently (the holding
// socket's filter); once it is closed, the host answers such a datagram
// with an ICMP port unreachable again.
func TestVethHostStackSilent(t *testing.T) { forModes(t, testVethHostStackSilent) }

func testVethHostStackSilent(t *testing.T, mode afpacket.ReceiveMode) {
	p := vethtest.New(t)
	b := open(t, p.NSB, afpacket.Config{Receive: mode, Interface: p.IfB})
	var conn *net.UDPConn
	require.NoError(t, vethtest.In(p.NSA, func() (err error) {
		conn, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(b.LocalAddr()))
		return err
	}))
	defer conn.Close()

	unreach0 := snmp(t, p.NSB, "Icmp", "OutDestUnreachs")
	noPorts0 := snmp(t, p.NSB, "Udp", "NoPorts")
	const n = 5
	for range n {
		_, err := conn.Write([]byte("not RoCE, but to its port"))
		require.NoError(t, err)
	}
	got := receiveN(t, b, n, 10*time.Second)
	for _, d := range got {
		assert.Equal(t, backend.ICRCBad, d.ICRC, "the backend sees them (and the device will drop them)")
	}
	require.True(t, hostile.WaitFor(context.Background(), 10*time.Second, func() bool {
		d, ok := holdDrops(t, p.NSB)
		return ok && d >= n
	}), "the holding socket dropped them")
	assert.Equal(t, unreach0, snmp(t, p.NSB, "Icmp", "OutDestUnreachs"), "no ICMP port unreachable")
	assert.Equal(t, noPorts0, snmp(t, p.NSB, "Udp", "NoPorts"))

	require.NoError(t, b.Close())
	_, found := holdDrops(t, p.NSB)
	assert.False(t, found, "Close gives the port back")
	require.True(t, hostile.WaitFor(context.Background(), 10*time.Second, func() bool {
		_, _ = conn.Write([]byte("again"))
		return snmp(t, p.NSB, "Icmp", "OutDestUnreachs") > unreach0
	}), "without the backend the host answers port unreachable")
}

// rawSender is an AF_PACKET socket in namespace A that sends frames as they
// are.
type rawSender struct{ fd int }

func newRawSender(t *testing.T, p *vethtest.Pair) *rawSender {
	t.Helper()
	s := &rawSender{}
	require.NoError(t, vethtest.In(p.NSA, func() error {
		ifi, err := net.InterfaceByName(p.IfA)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		s.fd = fd
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: 0, Ifindex: ifi.Index})
	}))
	t.Cleanup(func() { unix.Close(s.fd) })
	return s
}

// sendAll sends frames in one sendmmsg, so that they arrive in order.
func (s *rawSender) sendAll(t *testing.T, frames [][]byte) {
	t.Helper()
	hdrs := make([]unix.Mmsghdr, len(frames))
	iovs := make([]unix.Iovec, len(frames))
	for i, f := range frames {
		iovs[i].Base = &f[0]
		iovs[i].SetLen(len(f))
		hdrs[i].Hdr.Iov = &iovs[i]
		hdrs[i].Hdr.SetIovlen(1)
	}
	for sent := 0; sent < len(hdrs); {
		n, err := sendmmsg(s.fd, hdrs[sent:])
		require.NoError(t, err)
		sent += n
	}
}

// ethernet frames pkt (BTH through ICRC) from A to B over IPv4 as a RoCE
// peer would, with its ICRC sealed.
func ethernet(p *vethtest.Pair, pkt []byte) []byte {
	fr := afpacket.Frame(p.B, p.A, 0xC000, 1, pkt)
	copy(fr[0:6], p.MACB[:])
	copy(fr[6:12], p.MACA[:])
	return fr
}

// refresh4 recomputes the IPv4 header checksum of a frame.
func refresh4(b []byte) []byte {
	ihl := int(b[14]&0xf) * 4
	b[24], b[25] = 0, 0
	binary.BigEndian.PutUint16(b[24:], rocev2.IPv4Checksum(b[14:14+ihl]))
	return b
}

// TestVethFilter: only RoCEv2 for the device's address reaches the
// backend; the host's other traffic on the interface never leaves the
// kernel.
func TestVethFilter(t *testing.T) { forModes(t, testVethFilter) }

func testVethFilter(t *testing.T, mode afpacket.ReceiveMode) {
	p := vethtest.New(t)
	b := open(t, p.NSB, afpacket.Config{Receive: mode, Interface: p.IfB})
	s := newRawSender(t, p)
	pkt, err := (&rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x11}).Append(nil, []byte("marker"))
	require.NoError(t, err)
	roce := ethernet(p, pkt)
	other := func(f func([]byte) []byte) []byte { return f(append([]byte(nil), roce...)) }
	s.sendAll(t, [][]byte{
		other(func(b []byte) []byte { b[37]++; return b }),                   // another UDP port
		other(func(b []byte) []byte { b[23] = 6; return refresh4(b) }),       // TCP
		other(func(b []byte) []byte { b[33] = 9; return refresh4(b) }),       // another address
		other(func(b []byte) []byte { b[12], b[13] = 0x86, 0xdd; return b }), // not IPv4
		roce,
	})
	got := receiveN(t, b, 1, 10*time.Second)
	assert.Equal(t, pkt, got[0].Buf, "the first thing the backend receives is the RoCE frame sent last")
	assert.Equal(t, backend.ICRCVerified, got[0].ICRC)
}

func TestVethBackendtest(t *testing.T) { forModes(t, testVethBackendtest) }

func testVethBackendtest(t *testing.T, mode afpacket.ReceiveMode) {
	p := vethtest.New(t)
	b := open(t, p.NSA, afpacket.Config{Receive: mode, Interface: p.IfA})
	backendtest.Run(t, b, packets(t, netip.AddrPortFrom(p.B, rocev2.UDPPort), 1, 2))
}

func TestOpenErrors(t *testing.T) {
	p := vethtest.New(t)
	for _, tc := range []struct {
		name string
		cfg  afpacket.Config
		want string
	}{
		{"no interface", afpacket.Config{}, "no interface"},
		{"unknown interface", afpacket.Config{Interface: "nosuch0"}, "nosuch0"},
		{"loopback", afpacket.Config{Interface: "lo"}, "use the UDP backend"},
		{"address not on the interface", afpacket.Config{Interface: p.IfA, Addr: netip.MustParseAddr("198.18.99.1")}, "not an address of"},
		{"ring block not whole pages", afpacket.Config{Interface: p.IfA, Receive: afpacket.ReceiveRing, Ring: afpacket.RingConfig{BlockSize: 5000}}, "multiple of the page size"},
		{"ring larger than the kernel maps", afpacket.Config{Interface: p.IfA, Receive: afpacket.ReceiveRing, Ring: afpacket.RingConfig{BlockSize: 1 << 20, Blocks: 1 << 16}}, "under 4 GiB"},
		{"unknown receive mode", afpacket.Config{Interface: p.IfA, Receive: 7}, "ReceiveMode(7)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := vethtest.In(p.NSA, func() error {
				b, err := afpacket.Open(tc.cfg)
				if err == nil {
					b.Close()
				}
				return err
			})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// The port is taken by a UDP backend on the same address.
	var u *udp.Backend
	require.NoError(t, vethtest.In(p.NSA, func() (err error) {
		u, err = udp.Open(udp.Config{Addr: netip.AddrPortFrom(p.A, rocev2.UDPPort)})
		return err
	}))
	defer u.Close()
	err := vethtest.In(p.NSA, func() error {
		b, err := afpacket.Open(afpacket.Config{Interface: p.IfA})
		if err == nil {
			b.Close()
		}
		return err
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "already serves RoCEv2 there")
}

// TestOpenWithoutCapNetRaw drops CAP_NET_RAW on a thread of its own: Open
// fails with ErrNoCapNetRaw, whose text names the UDP backend.
func TestOpenWithoutCapNetRaw(t *testing.T) {
	p := vethtest.New(t)
	err := vethtest.In(p.NSA, func() error {
		// The thread is never unlocked (vethtest.In), so the lowered
		// capabilities die with it.
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			return err
		}
		data[0].Effective &^= 1 << unix.CAP_NET_RAW
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			return err
		}
		b, err := afpacket.Open(afpacket.Config{Interface: p.IfA})
		if err == nil {
			b.Close()
			return errors.New("opened without CAP_NET_RAW")
		}
		return err
	})
	require.ErrorIs(t, err, afpacket.ErrNoCapNetRaw)
	assert.Contains(t, err.Error(), "-backend udp")
}

// forModes runs a veth test once per receive mode, each on its own pair.
func forModes(t *testing.T, test func(t *testing.T, mode afpacket.ReceiveMode)) {
	for _, mode := range []afpacket.ReceiveMode{afpacket.ReceiveMmsg, afpacket.ReceiveRing} {
		t.Run(mode.String(), func(t *testing.T) { test(t, mode) })
	}
}
