//go:build !linux

package shm

import (
	"errors"
	"net/netip"

	"github.com/goroce/goroce/rocev2"
)

// errUnsupported: the shared-memory link needs Linux's memfd, eventfd and
// SCM_RIGHTS.
var errUnsupported = errors.New("shm: the shared-memory link needs Linux (memfd, eventfd, SCM_RIGHTS); use the UDP backend (rocev2/udp) instead")

// Backend is a rocev2.Backend through shared memory (Linux only).
type Backend struct{}

var _ rocev2.Backend = (*Backend)(nil)

// Open fails on this system.
func Open(cfg Config) (*Backend, error) {
	if cfg.Fallback != nil {
		cfg.Fallback.Close()
	}
	return nil, errUnsupported
}

func (b *Backend) Send([]rocev2.Datagram) error              { return errUnsupported }
func (b *Backend) Receive([]rocev2.Datagram) (int, error)    { return 0, errUnsupported }
func (b *Backend) TryReceive([]rocev2.Datagram) (int, error) { return 0, errUnsupported }
func (b *Backend) WaitReadable() error                       { return errUnsupported }
func (b *Backend) LocalAddr() netip.AddrPort                 { return netip.AddrPort{} }
func (b *Backend) BatchSize() int                            { return DefaultBatchSize }
func (b *Backend) LinkMTU() int                              { return linkMTU }
func (b *Backend) Close() error                              { return nil }
func (b *Backend) Stats() Stats                              { return Stats{} }
func (b *Backend) LinkTo(netip.AddrPort) string              { return LinkNone }
func (b *Backend) Peers() []netip.AddrPort                   { return nil }
func (b *Backend) SocketPath() string                        { return "" }
func (b *Backend) Fallback() rocev2.Backend                  { return nil }
