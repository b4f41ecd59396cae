//go:build !linux

package tcpopt

import (
	"net"
	"syscall"
)

// Signaller needs Linux; elsewhere Open reports ErrUnsupported.
type Signaller struct{}

// Open reports ErrUnsupported: sock_ops BPF programs are Linux only.
func Open() (*Signaller, error) { return nil, ErrUnsupported }

// Close does nothing.
func (s *Signaller) Close() error { return nil }

// Control reports ErrUnsupported.
func (s *Signaller) Control(network, address string, c syscall.RawConn) error {
	return ErrUnsupported
}

// PeerSignalled reports ErrUnsupported.
func (s *Signaller) PeerSignalled(c *net.TCPConn) (bool, error) { return false, ErrUnsupported }

// Forget does nothing.
func (s *Signaller) Forget(c *net.TCPConn) {}

// SaveSYN reports ErrUnsupported: TCP_SAVE_SYN is Linux only.
func SaveSYN(network, address string, c syscall.RawConn) error { return ErrUnsupported }

// SYNHasOption reports ErrUnsupported: TCP_SAVED_SYN is Linux only.
func SYNHasOption(c *net.TCPConn) (bool, error) { return false, ErrUnsupported }
