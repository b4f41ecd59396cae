package tcpopt

import (
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// capture reads the TCP segments to or from one port on lo through an
// AF_PACKET socket: what really went on the wire, independent of the
// code under test.
type capture struct {
	fd   int
	port uint16
}

// handshake is the TCP options of a captured SYN and SYN-ACK.
type handshake struct {
	syn, synack []byte
}

// startCapture opens the packet socket before the test dials. A classic
// BPF filter (IPv4, TCP, port) is attached before the socket is bound, so
// that nothing else queues on it; closing is left to t.Cleanup.
func startCapture(t *testing.T, port uint16) *capture {
	t.Helper()
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err, "AF_PACKET socket (needs CAP_NET_RAW)")
	t.Cleanup(func() { unix.Close(fd) })

	p := uint32(port)
	filter := []unix.SockFilter{
		{Code: 0x28, K: 12},                    // ldh [12] (ethertype)
		{Code: 0x15, Jt: 0, Jf: 10, K: 0x0800}, // IPv4?
		{Code: 0x30, K: 23},                    // ldb [23] (protocol)
		{Code: 0x15, Jt: 0, Jf: 8, K: 6},       // TCP?
		{Code: 0x28, K: 20},                    // ldh [20] (fragment offset)
		{Code: 0x45, Jt: 6, Jf: 0, K: 0x1fff},
		{Code: 0xb1, K: 14}, // ldxb 4*([14]&0xf)
		{Code: 0x48, K: 14}, // ldh [x+14] (source port)
		{Code: 0x15, Jt: 2, Jf: 0, K: p},
		{Code: 0x48, K: 16}, // ldh [x+16] (destination port)
		{Code: 0x15, Jt: 0, Jf: 1, K: p},
		{Code: 0x06, K: 0x40000}, // accept
		{Code: 0x06, K: 0},       // drop
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	require.NoError(t, unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog))
	require.NoError(t, unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100_000}))

	lo, err := net.InterfaceByName("lo")
	require.NoError(t, err)
	require.NoError(t, unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: lo.Index}))
	return &capture{fd: fd, port: port}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// handshake reads until it has the SYN to the port and the SYN-ACK from
// it, or fails the test after a few seconds.
func (c *capture) handshake(t *testing.T) handshake {
	t.Helper()
	var h handshake
	var haveSYN, haveSYNACK bool
	buf := make([]byte, 65536)
	deadline := time.Now().Add(5 * time.Second)
	for !(haveSYN && haveSYNACK) {
		require.False(t, time.Now().After(deadline), "no SYN and SYN-ACK on port %d within 5s (SYN %v, SYN-ACK %v)", c.port, haveSYN, haveSYNACK)
		n, from, err := unix.Recvfrom(c.fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		require.NoError(t, err)
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue // lo shows every frame twice: sent and received
		}
		src, dst, flags, opts, ok := parseFrame(buf[:n])
		if !ok {
			continue
		}
		switch {
		case flags&0x12 == 0x02 && dst == c.port && !haveSYN:
			h.syn, haveSYN = opts, true
		case flags&0x12 == 0x12 && src == c.port && !haveSYNACK:
			h.synack, haveSYNACK = opts, true
		}
	}
	return h
}

// parseFrame takes an Ethernet frame apart down to the TCP options.
func parseFrame(f []byte) (src, dst uint16, flags byte, opts []byte, ok bool) {
	if len(f) < 14+20 || binary.BigEndian.Uint16(f[12:]) != 0x0800 {
		return
	}
	ip := f[14:]
	ihl := int(ip[0]&0xf) * 4
	if ihl < 20 || len(ip) < ihl+20 || ip[9] != 6 {
		return
	}
	tcp := ip[ihl:]
	doff := int(tcp[12]>>4) * 4
	if doff < 20 || doff > len(tcp) {
		return
	}
	return binary.BigEndian.Uint16(tcp[0:]), binary.BigEndian.Uint16(tcp[2:]), tcp[13],
		append([]byte(nil), tcp[20:doff]...), true
}
