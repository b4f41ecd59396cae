package main

import (
	"fmt"
	"net"
	"net/netip"
)

// serverAddr is the server process's loopback address (the client uses
// 127.0.0.1), so the two devices have distinct GIDs as on two hosts.
var serverAddr = netip.MustParseAddr("127.0.0.2")

// serve runs the server side of every measurement the client asks for on
// one control connection, until quit or the connection ends.
func serve(c *ctl) error {
	for {
		m, err := c.recv("")
		if err != nil {
			return err
		}
		switch m.Kind {
		case "quit":
			return nil
		case "test":
			if err := serveTest(c, *m.Test); err != nil {
				c.send(msg{Kind: "error", Err: err.Error()})
				return err
			}
		default:
			return fmt.Errorf("unexpected %q", m.Kind)
		}
	}
}

// Bounds on what a client may ask for: the control peer is untrusted, and
// its numbers size the server's buffers and connections.
const (
	maxClients = 4096
	maxMsgSize = 1 << 20
)

// checkTest refuses a test the server will not run.
func checkTest(t test) error {
	switch t.Mode {
	case "tcp", "legacy", "legacy-rtc", "pooled", "nodim":
	default:
		return fmt.Errorf("unknown mode %q", t.Mode)
	}
	if t.Clients < 1 || t.Clients > maxClients || t.Req < 1 || t.Req > maxMsgSize || t.Resp < 1 || t.Resp > maxMsgSize {
		return fmt.Errorf("test %+v out of range (clients 1..%d, sizes 1..%d)", t, maxClients, maxMsgSize)
	}
	return nil
}

func serveTest(c *ctl, t test) error {
	if err := checkTest(t); err != nil {
		return err
	}
	cpu0 := cpuSeconds()
	if t.Mode == "tcp" {
		ln, err := net.Listen("tcp", net.JoinHostPort(serverAddr.String(), "0"))
		if err != nil {
			return err
		}
		done := make(chan struct{})
		go func() { tcpServe(ln, t.Req, t.Resp); close(done) }()
		port := ln.Addr().(*net.TCPAddr).Port
		if err := c.send(msg{Kind: "endpoint", Port: uint16(port)}); err != nil {
			ln.Close()
			return err
		}
		_, err = c.recv("stop")
		ln.Close()
		<-done // the client closed its connections before stop
		if err != nil {
			return err
		}
		return c.send(msg{Kind: "stats", CPU: cpuSeconds() - cpu0})
	}
	ep, err := openEndpoint(serverAddr, t, t.Resp, t.Req)
	if err != nil {
		return err
	}
	defer ep.close()
	ep.serve()
	if err := c.send(ep.endpointMsg()); err != nil {
		return err
	}
	peer, err := c.recv("endpoint")
	if err != nil {
		return err
	}
	if err := ep.connect(peer); err != nil {
		return err
	}
	if err := c.send(msg{Kind: "ready"}); err != nil {
		return err
	}
	if _, err := c.recv("stop"); err != nil {
		return err
	}
	st := ep.cqs.Stats()
	m := msg{Kind: "stats", CPU: cpuSeconds() - cpu0, Wakeups: st.Wakeups, Comps: st.Completions}
	if err := ep.err(); err != nil {
		m.Err = err.Error() // a failed point is reported, not fatal
	}
	return c.send(m)
}
