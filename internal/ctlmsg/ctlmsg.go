// Package ctlmsg reads and writes the control messages goroce's benchmark
// programs exchange over TCP: one JSON object per line. The peer is
// untrusted (anyone can connect to a listening control port), so a message
// is read only up to MaxLen bytes: a line without an end is refused, not
// buffered without bound, and what the message says must still be checked
// by its user before it sizes anything.
package ctlmsg

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLen bounds one message, newline included.
const MaxLen = 64 << 10

// ErrTooLong is returned for a message longer than MaxLen.
var ErrTooLong = fmt.Errorf("ctlmsg: control message longer than %d bytes (is the peer a program of the same version?)", MaxLen)

// Conn reads and writes messages on a stream.
type Conn struct {
	r *bufio.Reader
	w io.Writer
}

// New returns a Conn on rw.
func New(rw io.ReadWriter) *Conn {
	return &Conn{r: bufio.NewReaderSize(rw, MaxLen), w: rw}
}

// Write sends v as one line.
func (c *Conn) Write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b)+1 > MaxLen {
		return ErrTooLong
	}
	_, err = c.w.Write(append(b, '\n'))
	return err
}

// Read reads the next line into v. A line longer than MaxLen is
// ErrTooLong; a stream that ends mid-line is io.ErrUnexpectedEOF.
func (c *Conn) Read(v any) error {
	line, err := c.r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return ErrTooLong
	case errors.Is(err, io.EOF) && len(line) > 0:
		return io.ErrUnexpectedEOF
	case err != nil:
		return err
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("ctlmsg: bad control message: %w", err)
	}
	return nil
}
