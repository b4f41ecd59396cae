package device

import (
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/rocev2/backend/udp"
)

// OpenUDP opens a device on the default backend: a UDP socket bound to addr
// (port 0 means 4791, RoCEv2's port). Two processes on one host use two
// loopback addresses, e.g. 127.0.0.1 and 127.0.0.2.
func OpenUDP(addr netip.Addr, port uint16, cfg Config) (*Device, error) {
	if port == 0 {
		port = 4791
	}
	b, err := udp.Open(udp.Config{Addr: netip.AddrPortFrom(addr, port)})
	if err != nil {
		return nil, fmt.Errorf("device: open on %v port %d: %w", addr, port, err)
	}
	cfg.Backend = b
	d, err := New(cfg)
	if err != nil {
		b.Close()
		return nil, err
	}
	return d, nil
}
