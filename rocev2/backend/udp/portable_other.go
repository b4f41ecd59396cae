//go:build !linux

package udp

import "net"

// configurePortable leaves the socket as the system makes it: there is no
// portable way to ask for DF (and with it IPv4 ID 0); see Portable.
func configurePortable(*net.UDPConn, bool) error { return nil }
