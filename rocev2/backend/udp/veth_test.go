//go:build linux

package udp

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/internal/vethtest"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// The GSO test runs the backend over a veth pair between two network
// namespaces (internal/vethtest), and captures what leaves the sending side with an
// AF_PACKET socket: on lo the kernel never cuts a GSO super-datagram on the
// way out, so only a real device path shows the IPv4 IDs the segments get.
//
//	netns A                                   netns B
//	backend 198.18.N.1:4791 ── vethA ═══ vethB ── backend 198.18.N.2:4791
//	            AF_PACKET capture ┘
//
// Only 198.18.0.0/15 (benchmarking) addresses are used, and only inside the
// namespaces; deleting a namespace deletes its end of the pair.

// capture is an AF_PACKET socket on one interface.
type capture struct{ fd int }

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// openCapture opens a capture on ifname; call it inside the namespace.
func openCapture(ifname string) (*capture, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, err
	}
	c := &capture{fd: fd}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		c.Close()
		return nil, err
	}
	// A bounded wait per read, so the collecting loop can honour its deadline.
	tv := unix.Timeval{Usec: 100000}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *capture) Close() error { return unix.Close(c.fd) }

// outgoing collects outgoing RoCE frames to port until their UDP payloads
// add up to bytes, or fails at the deadline.
func (c *capture) outgoing(t *testing.T, port uint16, bytes int, timeout time.Duration) [][]byte {
	t.Helper()
	buf := make([]byte, 1<<17)
	var frames [][]byte
	deadline := time.Now().Add(timeout)
	for got := 0; got < bytes; {
		require.True(t, time.Now().Before(deadline), "captured %d of %d bytes", got, bytes)
		k, from, err := unix.Recvfrom(c.fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		require.NoError(t, err)
		if ll, ok := from.(*unix.SockaddrLinklayer); !ok || ll.Pkttype != unix.PACKET_OUTGOING {
			continue
		}
		var fr rocev2.Frame
		if rocev2.ParseEthernetFrame(buf[:k], port, &fr) != nil {
			continue // ARP, IPv6 neighbour discovery, …
		}
		got += len(fr.Payload)
		frames = append(frames, append([]byte(nil), buf[:k]...))
	}
	return frames
}

func totalLen(pkts []backend.Outgoing) (n int) {
	for _, p := range pkts {
		n += len(p.Buf)
	}
	return n
}

func TestGSOSegmentsOnVeth(t *testing.T) {
	p := vethtest.New(t)
	var a, b *Backend
	var capA *capture
	require.NoError(t, vethtest.In(p.NSA, func() (err error) {
		if a, err = Open(Config{Addr: netip.AddrPortFrom(p.A, rocev2.UDPPort)}); err != nil {
			return err
		}
		capA, err = openCapture(p.IfA)
		return err
	}))
	t.Cleanup(func() { a.Close() })
	t.Cleanup(func() { capA.Close() })
	require.NoError(t, vethtest.In(p.NSB, func() (err error) {
		b, err = Open(Config{Addr: netip.AddrPortFrom(p.B, rocev2.UDPPort)})
		return err
	}))
	t.Cleanup(func() { b.Close() })
	assert.Equal(t, 1500, a.LinkMTU(), "the veth's MTU, seen from inside the namespace")

	// Resolve the neighbour first, so the batch below is not parked on ARP.
	rng := rand.New(rand.NewPCG(13, 14))
	require.NoError(t, a.Send(packets(t, rng, b.LocalAddr(), []int{8})))
	receiveN(t, b, 1, 5*time.Second)
	capA.outgoing(t, rocev2.UDPPort, rocev2.PacketLen(rocev2.RCSendOnly, 8), 5*time.Second)

	for _, tc := range []struct {
		name    string
		gsoSegs string // vethA's gso_max_segs; "" leaves the default
		sizes   []int
		wantIDs []uint16
		cut     bool // the capture must show each segment
	}{
		{
			// veth accepts UDP GSO super-packets (it forwards them to its
			// peer as they are; Linux 6.18 does): the capture may show one
			// frame carrying every segment. The receiver still gets them
			// with the IDs the segmentation at its socket gives them.
			name: "offloaded", sizes: []int{1000, 1000, 1000, 1000, 500},
			wantIDs: []uint16{0, 1, 2, 3, 4},
		},
		{
			// Capping gso_max_segs makes the kernel segment in software
			// before the device, as for a NIC without USO: the wire shows
			// each segment with its own ID.
			name: "software", gsoSegs: "1", sizes: []int{1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 200},
			wantIDs: []uint16{0, 1, 2, 3, 4, 5, 6, 7, 8}, cut: true,
		},
		{
			name: "plain", gsoSegs: "1", sizes: []int{700, 800, 900, 1000}, // each longer: no runs
			wantIDs: []uint16{0, 0, 0, 0}, cut: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.gsoSegs != "" {
				vethtest.Run(t, "-n", p.NSA, "link", "set", p.IfA, "gso_max_segs", tc.gsoSegs)
			}
			pkts := packets(t, rng, b.LocalAddr(), tc.sizes)
			require.NoError(t, a.Send(pkts))
			ids := make([]uint16, len(pkts))
			for i := range pkts {
				ids[i] = pkts[i].Wire.IPv4ID
			}
			assert.Equal(t, tc.wantIDs, ids, "IDs Send sealed for")

			frames := capA.outgoing(t, rocev2.UDPPort, totalLen(pkts), 5*time.Second)
			if tc.cut {
				require.Len(t, frames, len(pkts), "one frame per segment")
			}
			if len(frames) == len(pkts) {
				for i, f := range frames {
					var fr rocev2.Frame
					require.NoError(t, rocev2.ParseEthernetFrame(f, rocev2.UDPPort, &fr))
					id := uint16(fr.IP[4])<<8 | uint16(fr.IP[5])
					assert.Equal(t, tc.wantIDs[i], id, "IPv4 ID of frame %d on the wire", i)
					assert.Equal(t, uint16(rocev2.IPv4DontFragment), uint16(fr.IP[6])<<8|uint16(fr.IP[7]), "DF")
					match, ok := fr.VerifyICRC()
					assert.True(t, ok && match, "ICRC of frame %d", i)
					assert.Equal(t, pkts[i].Buf, fr.Payload, "frame %d", i)
				}
			} else {
				t.Logf("%s: %d packets left as %d frames (the device took the GSO super-packet)", p.IfA, len(pkts), len(frames))
			}

			got := receiveN(t, b, len(pkts), 5*time.Second)
			for i, d := range got {
				assert.Equal(t, pkts[i].Buf, d.Buf, "packet %d", i)
				assert.Equal(t, backend.ICRCOK, d.ICRC, "packet %d", i)
				assert.Equal(t, tc.wantIDs[i], d.IPv4ID, "ID recovered by the receiver, packet %d", i)
			}
		})
	}
}
