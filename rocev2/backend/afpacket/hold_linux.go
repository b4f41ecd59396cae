package afpacket

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rocev2"
)

// The host's own stack sees every frame the device consumes: the kernel
// hands a copy to the packet socket and goes on to deliver the datagram
// itself. With no socket on UDP port 4791 it would answer each RoCE packet
// with an ICMP port unreachable, which a peer may take for a dead path. So
// the backend holds the port: a UDP socket bound to the device's address
// and port 4791 whose socket filter drops every datagram before it is
// queued. The host then neither answers nor keeps anything. That socket is
// the backend's only change to the host; closing the backend closes it,
// and so does the end of the process, however it ends.

// holdPort binds the port-holding socket for addr.
func holdPort(addr netip.Addr) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		// The filter is in place before bind, so nothing is ever queued.
		var err error
		cerr := c.Control(func(fd uintptr) { err = attachFilter(int(fd), holdFilter()) })
		if cerr != nil {
			return cerr
		}
		return err
	}}
	network := "udp4"
	if addr.Is6() {
		network = "udp6"
	}
	ap := netip.AddrPortFrom(addr, rocev2.UDPPort)
	pc, err := lc.ListenPacket(context.Background(), network, ap.String())
	if err != nil {
		if errors.Is(err, unix.EADDRINUSE) {
			return nil, fmt.Errorf("afpacket: hold UDP port %d on %v for the device: %w: a kernel rdma_rxe device or another RoCE program (a goroce UDP backend) already serves RoCEv2 there, and both would answer; stop it or use another address", rocev2.UDPPort, addr, err)
		}
		return nil, fmt.Errorf("afpacket: hold UDP port %d on %v for the device: %w", rocev2.UDPPort, addr, err)
	}
	return pc.(*net.UDPConn), nil
}
