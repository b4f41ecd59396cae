//go:build !linux

package shm

import (
	"errors"
	"net/netip"

	"github.com/goroce/goroce/rocev2/backend"
)

// errUnsupported: the shared-memory link needs Linux's memfd, eventfd and
// SCM_RIGHTS.
var errUnsupported = errors.New("shm: the shared-memory link needs Linux (memfd, eventfd, SCM_RIGHTS); use the UDP backend (rocev2/udp) instead")

// Backend is a backend.Backend through shared memory (Linux only).
type Backend struct{}

var _ backend.Backend = (*Backend)(nil)

// Open fails on this system.
func Open(cfg Config) (*Backend, error) {
	if cfg.Fallback != nil {
		cfg.Fallback.Close()
	}
	return nil, errUnsupported
}

func (b *Backend) Send([]backend.Outgoing) error              { return errUnsupported }
func (b *Backend) Receive([]backend.Incoming) (int, error)    { return 0, errUnsupported }
func (b *Backend) TryReceive([]backend.Incoming) (int, error) { return 0, errUnsupported }
func (b *Backend) Serve(func() bool) error                    { return errUnsupported }
func (b *Backend) ServeUntil(func() bool, func() bool) error  { return errUnsupported }
func (b *Backend) Interrupt()                                 {}
func (b *Backend) LocalAddr() netip.AddrPort                  { return netip.AddrPort{} }
func (b *Backend) BatchSize() int                             { return DefaultBatchSize }
func (b *Backend) LinkMTU() int                               { return linkMTU }
func (b *Backend) Close() error                               { return nil }
func (b *Backend) Stats() Stats                               { return Stats{} }
func (b *Backend) LinkTo(netip.AddrPort) string               { return LinkNone }
func (b *Backend) Peers() []netip.AddrPort                    { return nil }
func (b *Backend) SocketPath() string                         { return "" }
func (b *Backend) Fallback() backend.Backend                  { return nil }
