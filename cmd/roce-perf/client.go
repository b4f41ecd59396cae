package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2/device"
)

// runClient connects to the server, runs the tests one after the other and
// prints each, then the summary.
func runClient(ctx context.Context, cfg *config, n *node, stdout io.Writer) error {
	out := stdout
	if cfg.jsonOut {
		out = io.Discard
	}
	addr := net.JoinHostPort(cfg.server, strconv.Itoa(cfg.oobPort))
	d := net.Dialer{Timeout: cfg.timeout, LocalAddr: &net.TCPAddr{IP: cfg.local.AsSlice()}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("connect to the server at %s: %w (start it first: roce-perf -d %s)", addr, err, cfg.server)
	}
	defer conn.Close()
	defer context.AfterFunc(ctx, func() { conn.Close() })() // a signal ends the test in progress
	o := newOOB(conn, cfg.timeout)
	if err := o.send(&message{Kind: msgHello, Version: protocolVersion, Device: n.dev.Name(), MTU: n.dev.Port().ActiveMTU.Bytes()}); err != nil {
		return err
	}
	hello, err := o.recv(msgHello, cfg.timeout)
	if err != nil {
		return err
	}
	if hello.Version != protocolVersion {
		return fmt.Errorf("the server speaks control protocol %d, this client %d: run the same roce-perf on both sides", hello.Version, protocolVersion)
	}
	mtu, err := negotiateMTU(cfg.mtu, n.dev.Port().ActiveMTU.Bytes(), hello.MTU)
	if err != nil {
		o.fail(err)
		return err
	}
	rep := &report{Role: "client", Device: n.dev.Name(), Local: n.dev.LocalAddr().String(), Peer: addr}
	for _, kind := range cfg.tests {
		r, err := clientTest(ctx, cfg, n, o, kind, mtu.Bytes(), out)
		if err != nil {
			err = fmt.Errorf("%s: %w", kind, err)
			o.fail(err)
			return err
		}
		rep.Results = append(rep.Results, *r)
	}
	if err := o.send(&message{Kind: msgBye}); err != nil {
		return err
	}
	if cfg.jsonOut {
		return printJSON(stdout, rep)
	}
	fmt.Fprintln(out, resultLine)
	for i := range rep.Results {
		fmt.Fprintln(out, summaryLine(&rep.Results[i]))
	}
	return nil
}

// specFor builds the test the client asks for.
func specFor(cfg *config, kind string, mtu int) *testSpec {
	sp := &testSpec{
		Kind: kind, Size: cfg.size, Iters: cfg.iters, Duration: cfg.duration, MTU: mtu,
		TxDepth: cfg.txDepth, RxDepth: cfg.rxDepth, CQMod: cfg.cqMod, Raw: cfg.raw && kind != kindDemo,
	}
	switch kind {
	case kindLat:
		if sp.Size == 0 {
			sp.Size = defaultLatSize
		}
		sp.TxDepth = min(sp.TxDepth, 16)
	case kindDemo:
		sp.Size, sp.Iters, sp.Duration, sp.TxDepth = demoBufLen, 0, 0, 16
	case kindUD:
		if sp.Size == 0 {
			sp.Size = mtu
		}
	default:
		if sp.Size == 0 {
			sp.Size = defaultBWSize
		}
	}
	return sp
}

// queueDepths returns a test's send and receive queue sizes on one side.
func queueDepths(sp *testSpec, server bool) (send, recv int) {
	switch {
	case sp.Kind == kindLat || sp.Kind == kindDemo:
		return sp.TxDepth, latRecvs + 1
	case sp.Kind == kindUD && server:
		return udCtlRecvs + 1, udRecvDepth(sp)
	case sp.Kind == kindUD:
		return sp.TxDepth + 1, udCtlRecvs
	case server && sp.Kind == kindSend:
		return 1, sp.RxDepth
	case server:
		return 1, 1
	}
	return sp.TxDepth, 1
}

// clientTest runs one test from the client's side (see oob.go for the
// exchange) and returns its result.
func clientTest(ctx context.Context, cfg *config, n *node, o *oob, kind string, mtu int, out io.Writer) (*result, error) {
	sp := specFor(cfg, kind, mtu)
	limit := sp.limit(cfg.timeout)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err := o.send(&message{Kind: msgTest, Test: sp}); err != nil {
		return nil, err
	}
	m, err := o.recv(msgEndpoint, cfg.timeout)
	if err != nil {
		return nil, err
	}
	peer := m.Endpoint
	if kind == kindUD && sp.Size > sp.MTU {
		return nil, fmt.Errorf("-s %d: a UD message is one packet, at most the path MTU (%d)", sp.Size, sp.MTU)
	}
	sendDepth, recvDepth := queueDepths(sp, false)
	c, err := newQPConn(n.dev, qpType(kind), bufLen(sp, false), sendDepth, recvDepth)
	if err != nil {
		return nil, err
	}
	defer c.close()
	gso, gro := n.features()
	ep, raw, err := localEndpoint(cfg, n, c, sp.Raw)
	if err != nil {
		return nil, err
	}
	if raw != nil {
		defer raw.close()
	}
	mtuEnum := mtuOf(sp.MTU)
	if err := c.connect(peer, mtuEnum); err != nil {
		return nil, err
	}
	if kind == kindLat {
		if err := c.postRecvs(latRecvs, 0, sp.Size, 0); err != nil {
			return nil, err
		}
	}
	if err := o.send(&message{Kind: msgEndpoint, Endpoint: ep}); err != nil {
		return nil, err
	}
	if _, err := o.recv(msgReady, cfg.timeout); err != nil {
		return nil, err
	}
	printBanner(out, n.dev.Name(), sp, ep, peer)

	r := &result{Test: kind, Size: sp.Size, MTU: sp.MTU, GSO: gso, GRO: gro}
	if kind == kindLat {
		r.Wait = waitEvents
		if cfg.spinFor(kindLat) > 0 {
			r.Wait = waitBusy
		}
	}
	before := n.dev.Counters.Snapshot()
	switch kind {
	case kindWrite, kindSend, kindRead:
		r.TxDepth, r.CQMod = sp.TxDepth, sp.CQMod
		if r.GoRoCE, err = runBW(ctx, c, sp, peer, cfg.spinFor(sp.Kind)); err != nil {
			return nil, err
		}
		if err := o.send(&message{Kind: msgDone, Count: r.GoRoCE.Msgs}); err != nil {
			return nil, err
		}
		m, err := o.recv(msgDone, limit)
		if err != nil {
			return nil, err
		}
		if kind == kindSend && m.Count != r.GoRoCE.Msgs {
			return nil, fmt.Errorf("the server received %d SENDs, %d completed here", m.Count, r.GoRoCE.Msgs)
		}
	case kindUD:
		r.TxDepth, r.CQMod = sp.TxDepth, sp.CQMod
		if r.GoRoCE, err = runUD(ctx, c, sp, peer, cfg.spinFor(sp.Kind)); err != nil {
			return nil, err
		}
		if err := o.send(&message{Kind: msgDone, Count: r.GoRoCE.Msgs}); err != nil {
			return nil, err
		}
		if _, err := o.recv(msgDone, limit); err != nil {
			return nil, err
		}
	case kindLat:
		if r.GoRoCELat, err = runLat(ctx, c, sp, cfg.spinFor(sp.Kind)); err != nil {
			return nil, err
		}
		if err := o.send(&message{Kind: msgDone, Count: int64(r.GoRoCELat.Iters)}); err != nil {
			return nil, err
		}
		if _, err := o.recv(msgDone, limit); err != nil {
			return nil, err
		}
	case kindDemo:
		if r.Demo, err = runDemo(ctx, c, o, out, cfg.timeout); err != nil {
			return nil, err
		}
		if _, err := o.recv(msgDone, cfg.timeout); err != nil {
			return nil, err
		}
	}
	r.Counters = counterDelta(before, n.dev.Counters.Snapshot())

	if raw != nil {
		if err := clientRaw(ctx, o, raw, sp, peer, r, limit); err != nil {
			return nil, err
		}
	}
	if err := o.send(&message{Kind: msgResult, Result: r}); err != nil {
		return nil, err
	}
	printResult(out, r)
	return r, nil
}

// clientRaw runs the raw UDP baseline of a test from the client's side.
func clientRaw(ctx context.Context, o *oob, raw *rawSocket, sp *testSpec, peer *endpoint, r *result, limit time.Duration) error {
	gid, err := parseGID(peer.GID)
	if err != nil {
		return err
	}
	dst := netip.AddrPortFrom(gid.Addr(), peer.RawPort)
	seg, perMsg := rawShape(sp.Size, sp.MTU)
	var recvDone chan error
	if sp.Kind == kindRead { // the server sends: receive before asking
		recvDone = make(chan error, 1)
		go func() { recvDone <- rawRecvBW(raw) }()
		defer func() {
			if recvDone != nil {
				_ = raw.setReadDeadline(time.Now())
				<-recvDone
			}
		}()
	}
	if err := o.send(&message{Kind: msgRaw}); err != nil {
		return err
	}
	if _, err := o.recv(msgRaw, limit); err != nil {
		return err
	}
	switch sp.Kind {
	case kindWrite, kindSend, kindUD:
		if r.Raw, err = rawSendBW(ctx, raw, dst, seg, perMsg, rawPackets(sp.Iters, perMsg), sp.Duration); err != nil {
			return err
		}
	case kindRead:
		m, err := o.recv(msgDone, limit)
		if err != nil {
			return err
		}
		if m.Raw == nil {
			return fmt.Errorf("the server sent no raw UDP result")
		}
		r.Raw = m.Raw
		_ = raw.setReadDeadline(time.Now())
		err, recvDone = <-recvDone, nil
		_ = raw.setReadDeadline(time.Time{})
		if err != nil {
			return err
		}
	case kindLat:
		if r.RawLat, err = rawPing(ctx, raw, dst, sp.Size, sp.Iters, sp.Duration); err != nil {
			return err
		}
	}
	if sp.Kind != kindRead {
		if err := o.send(&message{Kind: msgDone}); err != nil {
			return err
		}
		if _, err := o.recv(msgDone, limit); err != nil {
			return err
		}
	}
	switch {
	case r.Raw != nil && r.Raw.Gbits > 0:
		r.Ratio = r.GoRoCE.Gbits / r.Raw.Gbits
	case r.RawLat != nil && r.RawLat.TTypical > 0:
		r.Ratio = r.GoRoCELat.TTypical / r.RawLat.TTypical
	}
	return nil
}

// parseGID decodes an endpoint's GID.
func parseGID(s string) (device.GID, error) {
	var g device.GID
	if len(s) != 2*len(g) {
		return g, fmt.Errorf("the peer's GID %q is not 32 hex digits", s)
	}
	for i := range g {
		v, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			return g, fmt.Errorf("the peer's GID %q is not 32 hex digits", s)
		}
		g[i] = byte(v)
	}
	return g, nil
}

// qpType is the transport of a test's QPs.
func qpType(kind string) qp.Type {
	if kind == kindUD {
		return qp.UD
	}
	return qp.RC
}

// bufLen is a test's buffer on one side: the message, and for UD the GRH
// area of the receives and the client's acknowledgement slots.
func bufLen(sp *testSpec, server bool) int {
	switch {
	case sp.Kind != kindUD:
		return sp.Size
	case server:
		return udRecvLen(max(sp.Size, ctlLen))
	}
	return sp.Size + udCtlRecvs*udRecvLen(ctlLen)
}
