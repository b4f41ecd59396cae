//go:build !linux

package udp

import (
	"errors"
	"net/netip"

	"github.com/goroce/goroce/rocev2/backend"
)

// errUnsupported: the backend needs Linux's sendmmsg, recvmmsg and UDP
// segmentation offload; other systems use memlink or a backend of their own.
var errUnsupported = errors.New("udp: backend is implemented for Linux only")

// Backend is a backend.Backend on a UDP socket (Linux only).
type Backend struct{}

var _ backend.Backend = (*Backend)(nil)

// Open fails on this system.
func Open(cfg Config) (*Backend, error) { return nil, errUnsupported }

func (b *Backend) Send([]backend.Outgoing) error           { return errUnsupported }
func (b *Backend) Receive([]backend.Incoming) (int, error) { return 0, errUnsupported }
func (b *Backend) LocalAddr() netip.AddrPort               { return netip.AddrPort{} }
func (b *Backend) BatchSize() int                          { return DefaultBatchSize }
func (b *Backend) LinkMTU() int                            { return defaultMTU }
func (b *Backend) Features() (gso, gro bool)               { return false, false }
func (b *Backend) Close() error                            { return nil }

func (b *Backend) WaitReadable() error                        { return errUnsupported }
func (b *Backend) TryReceive([]backend.Incoming) (int, error) { return 0, errUnsupported }
