package main

import (
	"context"
	"net/netip"
	"sync"

	"github.com/goroce/goroce/cmd/internal/cmtool"
	"github.com/goroce/goroce/rdmacm"
)

// listenBacklog is what rping_bind_server passes to rdma_listen.
const listenBacklog = 3

// listening, if set (by tests), is called once the server listens.
var listening func()

// runServer is rping_run_server (or rping_run_persistent_server with -P).
func runServer(ctx context.Context, cfg *config, st *cmtool.Stack, o *out) int {
	l, err := st.CM.Listen(rdmacm.ListenConfig{Addr: netip.AddrPortFrom(cfg.addr, cfg.port), Backlog: listenBacklog})
	if err != nil {
		o.print(o.stderr, "rdma_listen: %v\n", err)
		return exitFail
	}
	defer l.Close()
	b := &cb{cfg: cfg, o: o}
	b.debugf("rdma_bind_addr successful\n")
	b.debugf("rdma_listen\n") // after it: the line says the server listens
	if listening != nil {
		listening()
	}
	if !cfg.persistent {
		req, err := l.Accept(ctx)
		if err != nil {
			o.print(o.stderr, "wait for CONNECT_REQUEST state %d\n", stIdle)
			return exitFail
		}
		ret := serveOne(ctx, cfg, req, o)
		if ret != 0 {
			return exitFail
		}
		return 0
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		req, err := l.Accept(ctx)
		if err != nil {
			o.print(o.stderr, "wait for CONNECT_REQUEST state %d\n", stIdle)
			return exitFail
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveOne(ctx, cfg, req, o)
		}()
	}
}

// serveOne accepts one connection and runs the server's loop on it.
func serveOne(ctx context.Context, cfg *config, req *rdmacm.Request, o *out) int {
	b := newCB(ctx, cfg, o)
	b.state = stConnectRequest
	b.debugf("accepting client connection request\n")
	param := connParam
	conn, err := req.Accept(ctx, rdmacm.AcceptConfig{QP: qpConfig, Param: &param, Prepare: b.setup})
	if err != nil {
		o.print(o.stderr, "rdma_accept: %v\n", err)
		o.print(o.stderr, "connect error %d\n", -1)
		return -1
	}
	defer conn.Close()
	ret := b.testServer()
	if ret != 0 {
		o.print(o.stderr, "rping server failed: %d\n", ret)
	}
	_ = conn.Disconnect() // rping_disconnect: the DREP, if the client asked
	return ret
}

// testServer is rping_test_server.
func (b *cb) testServer() int {
	for {
		b.wait() // the client's source buffer
		if b.state != stRDMAReadAdv {
			b.o.print(b.o.stderr, "wait for RDMA_READ_ADV state %d\n", b.state)
			break
		}
		b.debugf("server received sink adv\n")
		if b.postRDMA(opRead, b.remoteLen) != nil {
			break
		}
		b.debugf("server posted rdma read req \n")
		b.wait()
		if b.state != stRDMAReadComplete {
			b.o.print(b.o.stderr, "wait for RDMA_READ_COMPLETE state %d\n", b.state)
			break
		}
		b.debugf("server received read complete\n")
		if b.cfg.verbose {
			b.o.print(b.o.stdout, "server ping data: %s\n", cString(b.rdmaBuf))
		}
		if b.postSend() != nil {
			break
		}
		b.debugf("server posted go ahead\n")
		b.wait() // the client's sink buffer
		if b.state != stRDMAWriteAdv {
			b.o.print(b.o.stderr, "wait for RDMA_WRITE_ADV state %d\n", b.state)
			break
		}
		b.debugf("server received sink adv\n")
		if b.postRDMA(opWrite, uint32(min(len(cString(b.rdmaBuf))+1, len(b.rdmaBuf)))) != nil {
			break
		}
		b.wait()
		if b.state != stRDMAWriteComplete {
			b.o.print(b.o.stderr, "wait for RDMA_WRITE_COMPLETE state %d\n", b.state)
			break
		}
		b.debugf("server rdma write complete \n")
		if b.postSend() != nil {
			break
		}
		b.debugf("server posted go ahead\n")
	}
	if b.state == stDisconnected {
		return 0
	}
	return -1
}
