//go:build !linux

package main

import (
	"errors"
	"net/netip"
	"time"
)

var errRawUnsupported = errors.New("raw UDP baseline: needs Linux (sendmmsg, GSO, GRO), as goroce's UDP backend does; run with -raw=false")

// rawSocket is the baseline's socket; it exists only on Linux.
type rawSocket struct{ gso, gro bool }

func openRaw(netip.AddrPort, bool, bool) (*rawSocket, error) { return nil, errRawUnsupported }

func (s *rawSocket) port() uint16                                   { return 0 }
func (s *rawSocket) close() error                                   { return nil }
func (s *rawSocket) sendData(netip.AddrPort, int, int) (int, error) { return 0, errRawUnsupported }
func (s *rawSocket) recvBatch() (int, error)                        { return 0, errRawUnsupported }
func (s *rawSocket) msg(int) ([]byte, int, netip.AddrPort)          { return nil, 1, netip.AddrPort{} }
func (s *rawSocket) sendCtl(netip.AddrPort, byte, int64) error      { return errRawUnsupported }
func (s *rawSocket) setReadDeadline(time.Time) error                { return errRawUnsupported }
func (s *rawSocket) setSpin(bool)                                   {}
func (s *rawSocket) write([]byte, netip.AddrPort) error             { return errRawUnsupported }
func (s *rawSocket) read([]byte) (int, netip.AddrPort, error) {
	return 0, netip.AddrPort{}, errRawUnsupported
}
