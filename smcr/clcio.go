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
	// errNotCLC: the peer's first bytes are not a CLC message (its
	// protocol is another).
	errNotCLC = errors.New("smcr: the peer's first bytes are not an SMC CLC message")
	// errCLCTimeout: no CLC message within the handshake timeout.
	errCLCTimeout = errors.New("smcr: timed out waiting for a CLC message")

	// ErrPeerNotSMC is the error of a dial whose peer answered the CLC
	// Proposal with bytes that are not CLC: the peer does not speak SMC.
	ErrPeerNotSMC = errors.New("smcr: the peer does not speak SMC")
)

// clcReader reads CLC messages from a TCP connection into one buffer.
type clcReader struct {
	c    net.Conn
	buf  [maxCLCLen]byte
	read []byte // the first bytes, when they turned out not to be CLC
}

// next reads one CLC message, waiting at most wait. The message is valid
// until the next call. The header is read as it comes: as soon as its
// bytes cannot begin a CLC message, next returns errNotCLC (those bytes
// kept in r.read) without waiting for more (a peer of another protocol
// may answer with a few bytes and wait).
func (r *clcReader) next(wait time.Duration) (smcwire.CLC, error) {
	_ = r.c.SetReadDeadline(time.Now().Add(wait))
	defer r.c.SetReadDeadline(time.Time{})
	h := r.buf[:smcwire.CLCHeaderLen]
	for n := 0; n < len(h); {
		k, err := r.c.Read(h[n:])
		n += k
		if !eyecatcherPrefix(h[:n]) {
			r.read = h[:n]
			return nil, errNotCLC
		}
		if err != nil {
			if err == io.EOF && n > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, readErr(err)
		}
	}
	n := int(h[5])<<8 | int(h[6])
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
