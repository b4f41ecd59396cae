//go:build !linux

package afpacket

import (
	"errors"
	"net/netip"

	"github.com/goroce/goroce/rocev2/backend"
)

// errUnsupported: AF_PACKET is Linux's.
var errUnsupported = errors.New("afpacket: the AF_PACKET backend is Linux only; use the UDP backend")

// ErrNoCapNetRaw is wrapped by Open's error when the process may not open
// a packet socket (Linux only).
var ErrNoCapNetRaw = errors.New("the AF_PACKET backend needs CAP_NET_RAW; without it, use the UDP backend (-backend udp)")

// Backend is a backend.Backend on an AF_PACKET socket (Linux only).
type Backend struct{}

var _ backend.Backend = (*Backend)(nil)

// Open fails on this system.
func Open(cfg Config) (*Backend, error) { return nil, errUnsupported }

func (b *Backend) Send([]backend.Outgoing) error           { return errUnsupported }
func (b *Backend) Receive([]backend.Incoming) (int, error) { return 0, errUnsupported }
func (b *Backend) LocalAddr() netip.AddrPort               { return netip.AddrPort{} }
func (b *Backend) BatchSize() int                          { return DefaultBatchSize }
func (b *Backend) LinkMTU() int                            { return 1500 }
func (b *Backend) HardwareAddr() [6]byte                   { return [6]byte{} }
func (b *Backend) Close() error                            { return nil }
func (b *Backend) Interface() (string, int)                { return "", 0 }
func (b *Backend) Stats() Stats                            { return Stats{} }
