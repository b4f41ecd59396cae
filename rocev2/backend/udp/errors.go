package udp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/goroce/goroce/rocev2/backend"
)

var (
	errClosed = fmt.Errorf("udp: %w", backend.ErrBackendClosed)
	errDest   = errors.New("udp: send: destination is not a unicast address and port of the socket's family")
	errShort  = errors.New("udp: send: datagram shorter than an ICRC")
)

// rxBufSize is the receive buffer per message: a GRO super-datagram, or the
// largest UDP payload of a non-GRO one, fits.
const rxBufSize = 64 << 10

// listen binds an unconnected UDP socket of addr's family to addr.
func listen(addr netip.AddrPort) (*net.UDPConn, error) {
	network := "udp4"
	if addr.Addr().Is6() {
		network = "udp6"
	}
	return net.ListenUDP(network, net.UDPAddrFromAddrPort(addr))
}
