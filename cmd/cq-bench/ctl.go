package main

import (
	"fmt"
	"net"

	"github.com/goroce/goroce/internal/ctlmsg"
)

// The control connection between the two processes is a TCP stream of JSON
// messages, one per line. Per measurement the client sends a request with
// the test; the server answers with its endpoint (TCP port or RDMA QPs), the
// client sends its own endpoint (RDMA), both run traffic, and the client's
// "stop" is answered with the server's CPU time and pool counters.
type msg struct {
	Kind    string   `json:"kind"` // test, endpoint, stop, stats, quit, error
	Test    *test    `json:"test,omitempty"`
	Port    uint16   `json:"port,omitempty"`
	GID     []byte   `json:"gid,omitempty"`
	QPNs    []uint32 `json:"qpns,omitempty"`
	PSNs    []uint32 `json:"psns,omitempty"`
	CPU     float64  `json:"cpu,omitempty"` // server CPU seconds during the run
	Wakeups uint64   `json:"wakeups,omitempty"`
	Comps   uint64   `json:"comps,omitempty"`
	Err     string   `json:"err,omitempty"`
}

// test is one measurement.
type test struct {
	Mode    string `json:"mode"` // tcp, legacy, legacy-rtc, pooled, nodim
	Clients int    `json:"clients"`
	Req     int    `json:"req"`  // request bytes
	Resp    int    `json:"resp"` // response bytes
}

type ctl struct {
	c    net.Conn
	msgs *ctlmsg.Conn // bounded: the peer is untrusted
}

func newCtl(c net.Conn) *ctl { return &ctl{c: c, msgs: ctlmsg.New(c)} }

func (c *ctl) send(m msg) error { return c.msgs.Write(m) }

// recv reads the next message and turns a peer's error message into an error.
func (c *ctl) recv(want string) (msg, error) {
	var m msg
	if err := c.msgs.Read(&m); err != nil {
		return m, fmt.Errorf("control: %w", err)
	}
	if m.Kind == "error" || (m.Err != "" && m.Kind != "stats") {
		return m, fmt.Errorf("peer: %s", m.Err)
	}
	if want != "" && m.Kind != want {
		return m, fmt.Errorf("control: got %q, want %q", m.Kind, want)
	}
	return m, nil
}
