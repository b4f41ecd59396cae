//go:build !linux

package udp

import "github.com/goroce/goroce/rocev2/backend"

// Backend is a backend.Backend on a UDP socket. On this system it is the
// Portable one: one datagram per system call, no GSO or GRO, no receiving
// without blocking.
type Backend struct{ *Portable }

var _ backend.Backend = (*Backend)(nil)

// Open binds a UDP socket to cfg.Addr and returns a backend on it.
func Open(cfg Config) (*Backend, error) {
	p, err := OpenPortable(cfg)
	if err != nil {
		return nil, err
	}
	return &Backend{p}, nil
}

// Features reports that neither UDP GSO nor GRO is used on this system.
func (b *Backend) Features() (gso, gro bool) { return false, false }
