package smcr

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/goroce/goroce/smcr/smcwire"
)

// CLC messages run over the TCP connection. The peer is untrusted: a
// message is read as its 8-byte header first, whose length is checked
// against maxCLCLen before anything else is read, and every wait is bounded
// by the handshake timeout.

// maxCLCLen bounds a CLC message. The largest Linux sends is a v2 Proposal
// with eight user EIDs (a few hundred bytes); a peer announcing more is
// broken or hostile.
const maxCLCLen = 1024

var (
	// errNotCLC: the peer's first bytes are not a CLC message (a plain
	// TCP peer, in configured signalling): they are application data.
	errNotCLC = errors.New("smcr: the peer's first bytes are not an SMC CLC message")
	// errCLCTimeout: no CLC message within the handshake timeout.
	errCLCTimeout = errors.New("smcr: timed out waiting for a CLC message")
)

// clcReader reads CLC messages from a TCP connection into one buffer.
type clcReader struct {
	c       net.Conn
	buf     [maxCLCLen]byte
	read    []byte // bytes read before they turned out not to be CLC
	started bool   // some byte came from the peer
}

// next reads one CLC message, waiting at most wait. The message is valid
// until the next call. A message whose first bytes are not an eyecatcher
// returns errNotCLC with those bytes kept in r.read.
func (r *clcReader) next(wait time.Duration) (smcwire.CLC, error) {
	_ = r.c.SetReadDeadline(time.Now().Add(wait))
	defer r.c.SetReadDeadline(time.Time{})
	h := r.buf[:smcwire.CLCHeaderLen]
	n, err := io.ReadFull(r.c, h)
	r.started = r.started || n > 0
	if err != nil {
		r.read = h[:n]
		if n > 0 && !eyecatcherPrefix(h[:n]) {
			return nil, errNotCLC
		}
		return nil, readErr(err)
	}
	if !smcwire.IsCLC(h) {
		r.read = h
		return nil, errNotCLC
	}
	n = int(h[5])<<8 | int(h[6])
	if n < smcwire.CLCHeaderLen || n > maxCLCLen {
		return nil, fmt.Errorf("smcr: a CLC message announces %d bytes, out of range %d..%d", n, smcwire.CLCHeaderLen, maxCLCLen)
	}
	if _, err := io.ReadFull(r.c, r.buf[smcwire.CLCHeaderLen:n]); err != nil {
		return nil, readErr(err)
	}
	m, err := smcwire.ParseCLC(r.buf[:n])
	if err != nil {
		return nil, fmt.Errorf("smcr: a malformed CLC message: %w", err)
	}
	return m, nil
}

// eyecatcherPrefix reports whether b could be the start of a CLC message.
func eyecatcherPrefix(b []byte) bool {
	r := [4]byte{0xE2, 0xD4, 0xC3, 0xD9}
	d := [4]byte{0xE2, 0xD4, 0xC3, 0xC4}
	b = b[:min(len(b), 4)]
	return string(b) == string(r[:len(b)]) || string(b) == string(d[:len(b)])
}

func readErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errCLCTimeout
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("smcr: the peer closed the connection in the middle of a CLC message: %w", err)
	}
	return fmt.Errorf("smcr: reading a CLC message: %w", err)
}

// writeCLC sends one CLC message, waiting at most wait.
func writeCLC(c net.Conn, m []byte, wait time.Duration) error {
	_ = c.SetWriteDeadline(time.Now().Add(wait))
	defer c.SetWriteDeadline(time.Time{})
	if _, err := c.Write(m); err != nil {
		return fmt.Errorf("smcr: sending a CLC message: %w", err)
	}
	return nil
}
