package pingpong

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/rocev2/device"
)

// msgSize is the size of the out-of-band message: the original's buffer is
// sizeof "0000:000000:000000:" followed by 32 zeros, i.e. 51 characters and
// the NUL, and exactly that many bytes are written and read each way.
const msgSize = len("0000:000000:000000:00000000000000000000000000000000") + 1

// doneMsg is the client's last message: "done" and its NUL, 5 bytes.
const doneMsg = "done\x00"

// dest is a QP's address as the ping-pong programs exchange it
// (struct pingpong_dest).
type dest struct {
	lid uint16
	qpn uint32
	psn uint32
	gid device.GID
}

// marshal formats d as "%04x:%06x:%06x:%s" with the GID as 32 lowercase hex
// digits in wire order, NUL-terminated and exactly msgSize bytes long.
func (d dest) marshal() []byte {
	s := fmt.Sprintf("%04x:%06x:%06x:%s", d.lid, d.qpn, d.psn, d.gid.Hex())
	b := make([]byte, msgSize)
	copy(b, s) // the values fit their widths, so the NUL lands at msgSize-1
	return b
}

// parseDest reads a message like the original's sscanf("%x:%x:%x:%s") plus
// wire_gid_to_gid, but rejects what those would silently misread.
func parseDest(b []byte) (dest, error) {
	s, _, _ := strings.Cut(string(b), "\x00")
	f := strings.Split(s, ":")
	if len(f) != 4 {
		return dest{}, fmt.Errorf("malformed address message %q: want LID:QPN:PSN:GID", s)
	}
	var d dest
	for i, p := range []struct {
		out  *uint32
		bits int
	}{{nil, 16}, {&d.qpn, 24}, {&d.psn, 24}} {
		v, err := strconv.ParseUint(f[i], 16, p.bits)
		if err != nil {
			return dest{}, fmt.Errorf("malformed address message %q: field %d: %w", s, i+1, err)
		}
		if p.out == nil {
			d.lid = uint16(v)
		} else {
			*p.out = uint32(v)
		}
	}
	if len(f[3]) != 32 {
		return dest{}, fmt.Errorf("malformed address message %q: GID has %d hex digits, want 32", s, len(f[3]))
	}
	if _, err := hex.Decode(d.gid[:], []byte(f[3])); err != nil {
		return dest{}, fmt.Errorf("malformed address message %q: GID: %w", s, err)
	}
	return d, nil
}

// stepError is a failure of one step of the exchange: msg is what the
// original prints for it, err the cause.
type stepError struct {
	msg string
	err error
}

// Error prints the messages in the original's order: a failure inside a
// step first (say "Failed to modify QP to RTR"), then the step's own
// ("Couldn't connect to remote QP"); a plain cause follows its message.
func (e *stepError) Error() string {
	var inner *stepError
	switch {
	case e.err == nil:
		return e.msg
	case errors.As(e.err, &inner):
		return e.err.Error() + "\n" + e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *stepError) Unwrap() error { return e.err }

func fail(msg string, err error) error { return &stepError{msg, err} }

// deadline returns the deadline for a wait of timeout (zero time: none).
func deadline(timeout time.Duration) time.Time {
	if timeout <= 0 {
		return time.Time{}
	}
	return time.Now().Add(timeout)
}

// clientExchange is pp_client_exch_dest: connect, send our addresses (one,
// or srq_pingpong's 256, each its own message), read as many of the
// server's (the server has connected its QPs before it answers), send
// "done", close.
func clientExchange(server string, port int, my []dest, timeout time.Duration) ([]dest, error) {
	addr := net.JoinHostPort(server, strconv.Itoa(port))
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, fail(fmt.Sprintf("Couldn't connect to %s:%d", server, port), err)
	}
	defer conn.Close()
	conn.SetDeadline(deadline(timeout))
	for _, d := range my {
		if _, err := conn.Write(d.marshal()); err != nil {
			return nil, fail("Couldn't send local address", err)
		}
	}
	rem := make([]dest, len(my))
	msg := make([]byte, msgSize)
	for i := range rem {
		if _, err := io.ReadFull(conn, msg); err != nil {
			return nil, fail("client read/write: "+readErr(err)+"\nCouldn't read/write remote address", nil)
		}
		if rem[i], err = parseDest(msg); err != nil {
			return nil, fail("Couldn't read/write remote address", err)
		}
	}
	if _, err := io.WriteString(conn, doneMsg); err != nil {
		return nil, fail("client read/write: "+err.Error()+"\nCouldn't read/write remote address", nil)
	}
	return rem, nil
}

// serverExchange is pp_server_exch_dest on an already bound listener:
// accept one client, read its addresses (as many as we send), connect our
// QPs to them (before answering, so that the client's first message finds
// us in RTR), send ours, wait for "done", close.
func serverExchange(ln net.Listener, my []dest, timeout time.Duration, connect func([]dest) error) ([]dest, error) {
	if tl, ok := ln.(*net.TCPListener); ok {
		tl.SetDeadline(deadline(timeout))
	}
	conn, err := ln.Accept()
	ln.Close() // one client, as the original
	if err != nil {
		return nil, fail("accept() failed", err)
	}
	defer conn.Close()
	conn.SetDeadline(deadline(timeout))
	rem := make([]dest, len(my))
	msg := make([]byte, msgSize)
	for i := range rem {
		if n, err := io.ReadFull(conn, msg); err != nil {
			return nil, fail(fmt.Sprintf("server read: %s\n%d/%d: Couldn't read remote address", readErr(err), n, msgSize), nil)
		}
		if rem[i], err = parseDest(msg); err != nil {
			return nil, fail("Couldn't read remote address", err)
		}
	}
	if err := connect(rem); err != nil {
		return nil, fail("Couldn't connect to remote QP", err)
	}
	for _, d := range my {
		if _, err := conn.Write(d.marshal()); err != nil {
			return nil, fail("Couldn't send/recv local address", err)
		}
	}
	if _, err := io.ReadFull(conn, msg[:len(doneMsg)]); err != nil {
		return nil, fail("Couldn't send/recv local address", fmt.Errorf("waiting for the client's \"done\": %s", readErr(err)))
	}
	return rem, nil
}

// readErr words a short read: EOF means the peer closed the connection,
// which is what a peer that failed to connect its QP does.
func readErr(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the peer closed the connection (did it fail? see its output)"
	}
	return err.Error()
}
