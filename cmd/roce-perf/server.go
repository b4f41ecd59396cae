package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// runServer serves one client: it runs whatever tests the client asks for
// and returns when the client says bye.
func runServer(ctx context.Context, cfg *config, n *node, stdout, stderr io.Writer) error {
	out, info := stdout, stdout
	if cfg.jsonOut {
		out, info = io.Discard, stderr
	}
	laddr := net.JoinHostPort(cfg.local.String(), strconv.Itoa(cfg.oobPort))
	ln, err := net.Listen("tcp", laddr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("control port: %w: another server is listening; stop it, or pass -p 0 for a free port", err)
		}
		return fmt.Errorf("control port: %w", err)
	}
	defer ln.Close()
	if err := announce(cfg, ln.Addr()); err != nil {
		return err
	}
	fmt.Fprintf(info, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
	fmt.Fprintf(info, " control %v, RoCE device %s on %v\n", ln.Addr(), n.dev.Name(), n.dev.LocalAddr())
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(cfg.timeout))
	stop := context.AfterFunc(ctx, func() { ln.Close() }) // a signal stops the wait
	conn, err := ln.Accept()
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("stopped while waiting for a client: %w", ctx.Err())
		}
		return fmt.Errorf("no client connected within %v: %w (raise -timeout, or start the client)", cfg.timeout, err)
	}
	ln.Close()
	defer conn.Close()
	// A signal ends a test in progress too: every wait on the client
	// (and every test loop, through ctx) returns at once.
	defer context.AfterFunc(ctx, func() { conn.Close() })()

	o := newOOB(conn, cfg.timeout)
	hello, err := o.recv(msgHello, cfg.timeout)
	if err != nil {
		return err
	}
	if err := o.send(&message{Kind: msgHello, Version: protocolVersion, Device: n.dev.Name(), MTU: n.dev.Port().ActiveMTU.Bytes()}); err != nil {
		return err
	}
	if hello.Version != protocolVersion {
		return fmt.Errorf("the client speaks control protocol %d, this server %d: run the same roce-perf on both sides", hello.Version, protocolVersion)
	}
	rep := &report{Role: "server", Device: n.dev.Name(), Local: n.dev.LocalAddr().String(), Peer: conn.RemoteAddr().String()}
	for {
		m, err := o.recv("", cfg.timeout)
		if err != nil {
			return err
		}
		switch m.Kind {
		case msgTest:
			if m.Test == nil {
				return errors.New("the client sent a test message without a test")
			}
			r, err := serverTest(ctx, cfg, n, o, m.Test, out)
			if err != nil {
				err = fmt.Errorf("%s: %w", m.Test.Kind, err)
				o.fail(err)
				return err
			}
			rep.Results = append(rep.Results, *r)
		case msgBye:
			if cfg.jsonOut {
				return printJSON(stdout, rep)
			}
			fmt.Fprintln(out, resultLine)
			for i := range rep.Results {
				fmt.Fprintln(out, summaryLine(&rep.Results[i]))
			}
			return nil
		default:
			return fmt.Errorf("the client sent %q between tests", m.Kind)
		}
	}
}

// announce tells whoever waits for the server where it listens: the -ready
// file (written whole, then renamed into place, so a reader never sees
// half of it) and the test hook.
func announce(cfg *config, addr net.Addr) error {
	if cfg.onListen != nil {
		cfg.onListen(addr)
	}
	if cfg.ready == "" {
		return nil
	}
	tmp := cfg.ready + ".tmp"
	if err := os.WriteFile(tmp, []byte(addr.String()+"\n"), 0o644); err != nil {
		return fmt.Errorf("-ready: %w", err)
	}
	if err := os.Rename(tmp, cfg.ready); err != nil {
		return fmt.Errorf("-ready: %w", err)
	}
	return nil
}

// Bounds on a test a client may ask for.
const (
	maxTestSize     = 64 << 20
	maxTestIters    = 1 << 30
	maxTestDuration = time.Hour
)

// checkSpec refuses tests this server cannot run as asked.
func checkSpec(sp *testSpec, activeMTU int) error {
	switch sp.Kind {
	case kindWrite, kindSend, kindRead, kindLat, kindDemo, kindUD:
	default:
		return fmt.Errorf("unknown test %q", sp.Kind)
	}
	if sp.MTU > activeMTU || rocev2.MTUFromBytes(sp.MTU).Bytes() != sp.MTU {
		return fmt.Errorf("path MTU %d: not an IB MTU up to this port's %d", sp.MTU, activeMTU)
	}
	// The client is untrusted: its numbers size this server's buffers and
	// queues, so they are bounded before anything is allocated.
	if sp.Size < 0 || sp.Size > maxTestSize || sp.TxDepth < 1 || sp.TxDepth > device.MaxQPWR ||
		sp.RxDepth < 1 || sp.RxDepth > device.MaxQPWR || sp.CQMod < 1 || sp.CQMod > device.MaxQPWR ||
		sp.Iters < 0 || sp.Iters > maxTestIters || sp.Duration < 0 || sp.Duration > maxTestDuration {
		return fmt.Errorf("bad test parameters %+v (size 0..%d, depths 1..%d, iterations up to %d, duration up to %v)",
			*sp, maxTestSize, device.MaxQPWR, maxTestIters, maxTestDuration)
	}
	if sp.Kind == kindUD && sp.Size > sp.MTU {
		return fmt.Errorf("UD message of %d bytes: above the path MTU %d", sp.Size, sp.MTU)
	}
	return nil
}

// serverTest runs one test from the server's side (see oob.go).
func serverTest(ctx context.Context, cfg *config, n *node, o *oob, sp *testSpec, out io.Writer) (*result, error) {
	if err := checkSpec(sp, n.dev.Port().ActiveMTU.Bytes()); err != nil {
		return nil, err
	}
	limit := sp.limit(cfg.timeout)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	sendDepth, recvDepth := queueDepths(sp, true)
	c, err := newQPConn(n.dev, qpType(sp.Kind), bufLen(sp, true), sendDepth, recvDepth)
	if err != nil {
		return nil, err
	}
	defer c.close()
	ep, raw, err := localEndpoint(cfg, n, c, sp.Raw)
	if err != nil {
		return nil, err
	}
	if raw != nil {
		defer raw.close()
	}
	if err := o.send(&message{Kind: msgEndpoint, Endpoint: ep}); err != nil {
		return nil, err
	}
	m, err := o.recv(msgEndpoint, cfg.timeout)
	if err != nil {
		return nil, err
	}
	peer := m.Endpoint
	// Reach RTS before saying ready: the client sends as soon as it hears.
	if err := c.connect(peer, mtuOf(sp.MTU)); err != nil {
		return nil, err
	}
	switch sp.Kind {
	case kindSend:
		err = c.postRecvs(sp.RxDepth, 0, sp.Size, 0)
	case kindLat:
		err = c.postRecvs(latRecvs, 0, sp.Size, 0)
	case kindUD:
		err = c.postRecvs(udRecvDepth(sp), 0, bufLen(sp, true), 0)
	}
	if err != nil {
		return nil, err
	}
	if err := o.send(&message{Kind: msgReady}); err != nil {
		return nil, err
	}
	printBanner(out, n.dev.Name(), sp, ep, peer)

	var count int64
	switch sp.Kind {
	case kindWrite, kindRead:
		_, err = o.recv(msgDone, limit) // one-sided: nothing to do here
	case kindSend:
		count, err = serveSendBW(ctx, c, sp, newStopper(o.recvAsync(msgDone, limit)), cfg.spinFor(sp.Kind))
	case kindLat:
		count, err = serveLat(ctx, c, sp, newStopper(o.recvAsync(msgDone, limit)), cfg.spinFor(sp.Kind))
	case kindUD:
		count, err = serveUD(ctx, c, sp, peer, newStopper(o.recvAsync(msgDone, limit)), cfg.spinFor(sp.Kind))
	case kindDemo:
		var checks int
		checks, err = serveDemo(ctx, c, o, cfg.timeout)
		count = int64(checks)
		if err == nil {
			fmt.Fprintf(out, " responder: %d checks passed\n", checks)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := o.send(&message{Kind: msgDone, Count: count}); err != nil {
		return nil, err
	}

	if raw != nil {
		if err := serverRaw(ctx, o, raw, sp, peer, limit); err != nil {
			return nil, err
		}
	}
	m, err = o.recv(msgResult, limit)
	if err != nil {
		return nil, err
	}
	if m.Result == nil {
		return nil, errors.New("the client sent no result")
	}
	printResult(out, m.Result)
	return m.Result, nil
}

// serverRaw runs the raw UDP baseline from the server's side: the receiver
// of write and send, the sender of read, the echo of latency.
func serverRaw(ctx context.Context, o *oob, raw *rawSocket, sp *testSpec, peer *endpoint, limit time.Duration) error {
	if _, err := o.recv(msgRaw, limit); err != nil {
		return err
	}
	if sp.Kind == kindRead {
		gid, err := parseGID(peer.GID)
		if err != nil {
			return err
		}
		if err := o.send(&message{Kind: msgRaw}); err != nil {
			return err
		}
		seg, perMsg := rawShape(sp.Size, sp.MTU)
		st, err := rawSendBW(ctx, raw, netip.AddrPortFrom(gid.Addr(), peer.RawPort), seg, perMsg, rawPackets(sp.Iters, perMsg), sp.Duration)
		if err != nil {
			return err
		}
		return o.send(&message{Kind: msgDone, Raw: st})
	}
	done := make(chan error, 1)
	go func() {
		if sp.Kind == kindLat {
			done <- rawEcho(raw)
		} else {
			done <- rawRecvBW(raw)
		}
	}()
	err := o.send(&message{Kind: msgRaw})
	if err == nil {
		_, err = o.recv(msgDone, limit)
	}
	_ = raw.setReadDeadline(time.Now())
	if rerr := <-done; err == nil {
		err = rerr
	}
	if err != nil {
		return err
	}
	return o.send(&message{Kind: msgDone})
}
