package main

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/goroce/goroce/internal/ctlmsg"
)

// The control connection is a TCP stream of JSON objects, one per line,
// each a message with a kind. It is not perftest's wire format (that one
// only talks to perftest); it carries the same things: the test parameters,
// each side's QP number, PSN, GID, rkey and buffer address, and barriers.
//
// A test runs as a fixed exchange, the client leading:
//
//	client                          server
//	test {spec}               →
//	                          ←     endpoint {its QP, rkey, VA, raw port}
//	endpoint {its QP…}        →     (connects its QP to RTS)
//	                          ←     ready
//	(goroce phase)
//	done {count}              →     (waits for count, if it receives)
//	                          ←     done {count}
//	raw                       →     (starts the raw UDP peer)
//	                          ←     raw
//	(raw UDP phase)
//	done                      →
//	                          ←     done {its result, if it sent}
//	result {result}           →     (prints it)
//
// and the session ends with bye. Either side reports a failure with an
// error message before it exits, so the other does not wait out its
// timeout.

// Message kinds.
const (
	msgHello    = "hello"
	msgTest     = "test"
	msgEndpoint = "endpoint"
	msgReady    = "ready"
	msgDone     = "done"
	msgRaw      = "raw"
	msgResult   = "result"
	msgDemo     = "demo"
	msgBye      = "bye"
	msgError    = "error"
)

// protocolVersion changes whenever the exchange does.
const protocolVersion = 1

// message is one control message; Kind says which fields are set.
type message struct {
	Kind     string    `json:"kind"`
	Version  int       `json:"version,omitempty"`
	Device   string    `json:"device,omitempty"`
	MTU      int       `json:"mtu,omitempty"` // hello: the port's active MTU
	Test     *testSpec `json:"test,omitempty"`
	Endpoint *endpoint `json:"endpoint,omitempty"`
	Count    int64     `json:"count,omitempty"`
	Result   *result   `json:"result,omitempty"`
	Demo     *demoStep `json:"demo,omitempty"`
	Raw      *bwStats  `json:"raw,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// testSpec is what the client asks the server to run.
type testSpec struct {
	Kind     string        `json:"kind"`
	Size     int           `json:"size"`
	Iters    int           `json:"iters,omitempty"`
	Duration time.Duration `json:"duration_ns,omitempty"`
	MTU      int           `json:"mtu"`
	TxDepth  int           `json:"tx_depth"`
	RxDepth  int           `json:"rx_depth"`
	CQMod    int           `json:"cq_mod"`
	Raw      bool          `json:"raw"`
}

// limit is how long a test may take at most: its duration (or a generous
// bound for its iterations) plus the control timeout.
func (s *testSpec) limit(timeout time.Duration) time.Duration {
	if s.Duration > 0 {
		return 2*s.Duration + timeout
	}
	return timeout + time.Duration(s.Iters)*time.Millisecond
}

// endpoint is one side's half of a connection: perftest's destination
// record (QPN, PSN, GID, rkey, VA) plus the ports goroce and the raw
// baseline listen on.
type endpoint struct {
	QPN     uint32 `json:"qpn"`
	PSN     uint32 `json:"psn"`
	GID     string `json:"gid"` // 32 hex digits, as rc_pingpong sends it
	Port    uint16 `json:"port"`
	RKey    uint32 `json:"rkey"`
	VA      uint64 `json:"va"`
	Len     int    `json:"len"`
	RawPort uint16 `json:"raw_port,omitempty"`
}

// peerError is a failure the other side reported.
type peerError struct{ msg string }

func (e *peerError) Error() string { return "peer: " + e.msg }

// oob is the control connection.
type oob struct {
	c       net.Conn
	msgs    *ctlmsg.Conn // bounded: the peer is untrusted
	timeout time.Duration
}

func newOOB(c net.Conn, timeout time.Duration) *oob {
	return &oob{c: c, msgs: ctlmsg.New(c), timeout: timeout}
}

// send writes one message.
func (o *oob) send(m *message) error {
	_ = o.c.SetWriteDeadline(time.Now().Add(o.timeout))
	if err := o.msgs.Write(m); err != nil {
		return fmt.Errorf("control connection: send %s: %w", m.Kind, err)
	}
	return nil
}

// recv reads the next message, which must be of the given kind (any kind
// if kind is ""), waiting at most wait. A peer's error message comes back
// as a *peerError.
func (o *oob) recv(kind string, wait time.Duration) (*message, error) {
	_ = o.c.SetReadDeadline(time.Now().Add(wait))
	var m message
	if err := o.msgs.Read(&m); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("control connection: no %s message from the peer within %v (is it still running? raise -timeout if the test is long)", orAny(kind), wait)
		}
		return nil, fmt.Errorf("control connection: waiting for %s: %w (the peer closed the connection or exited)", orAny(kind), err)
	}
	if m.Kind == msgError {
		return nil, &peerError{m.Error}
	}
	if kind != "" && m.Kind != kind {
		return nil, fmt.Errorf("control connection: got %q, expected %q (are both sides the same roce-perf version?)", m.Kind, kind)
	}
	return &m, nil
}

// recvAsync reads one message in the background; the result arrives on the
// returned channel. Only one read may be in progress at a time.
func (o *oob) recvAsync(kind string, wait time.Duration) <-chan asyncMsg {
	ch := make(chan asyncMsg, 1)
	go func() {
		m, err := o.recv(kind, wait)
		ch <- asyncMsg{m, err}
	}()
	return ch
}

type asyncMsg struct {
	m   *message
	err error
}

// fail tells the peer why this side gives up; it is best effort.
func (o *oob) fail(err error) {
	var pe *peerError
	if errors.As(err, &pe) {
		return // the peer knows
	}
	_ = o.send(&message{Kind: msgError, Error: err.Error()})
}

func orAny(kind string) string {
	if kind == "" {
		return "control"
	}
	return fmt.Sprintf("%q", kind)
}
