// Package control is what rdma-core's and perftest's tools share about
// where they run: the TCP control port a server listens on (the device's
// own address, so that servers on two addresses of one host each have
// theirs), the device name they print (goroce0, which -d takes as
// rdma-core's tools take theirs), and what to say when the device or the
// port cannot be had.
package control

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
)

// DeviceName is the name the tools print for their device, which -d
// accepts as well as an address (meaning the default address).
const DeviceName = "goroce0"

// Listen opens the TCP control port on the device's address. A device on
// an IPv6 link-local address is the exception: its clients reach the
// control port by another address (an IPv4 or global one, as rdma-core's
// tools are used with RoCEv2 over link-local GIDs), so it listens on every
// address, as the originals always do.
func Listen(addr netip.Addr, port int) (net.Listener, error) {
	host := addr.String()
	if addr.Is6() && addr.IsLinkLocalUnicast() {
		host = ""
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("%w\nhint: TCP control port %d on %v is in use (another server on this address?): pass -p with another port on both sides", err, port, addr)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return nil, fmt.Errorf("%w\nhint: %v is not an address of this host: pass -d with one of its addresses (ip -brief address)", err, addr)
	}
	return ln, err
}

// OpenHint says why a device on addr and UDP port could not be opened,
// for the errors a user can do something about; "" for others.
func OpenHint(err error, addr netip.Addr, udpPort uint16) string {
	switch {
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Sprintf("\nhint: %v is not an address of this host: pass -d with one of its addresses (ip -brief address)", addr)
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Sprintf("\nhint: another RoCE device (a kernel rxe or RNIC, or another goroce process on %v) holds UDP port %d: pass -d with another address (e.g. 127.0.0.2) or -udp-port", addr, udpPort)
	}
	return ""
}
