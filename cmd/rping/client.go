package main

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/cmd/internal/cmtool"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rdmacm"
)

// runClient is rping_run_client: connect, ping -C times, disconnect.
func runClient(ctx context.Context, cfg *config, st *cmtool.Stack, o *out) int {
	if !cfg.addr.IsValid() {
		usage(o.stdout)
		return exitUsage
	}
	b := newCB(ctx, cfg, o)
	param := connParam
	d := rdmacm.Dialer{CM: st.CM, Source: netip.AddrPortFrom(cfg.source, 0), RoCEPort: cfg.goroce.PeerPort(),
		QP: qpConfig, Param: &param, Prepare: b.setup}
	conn, err := d.Dial(ctx, netip.AddrPortFrom(cfg.addr, cfg.port))
	if err != nil {
		return cmaError(o, err)
	}
	defer conn.Close()
	b.state = stConnected
	b.debugf("rdma_connect successful\n")
	ret := b.testClient()
	if ret != 0 {
		o.print(o.stderr, "rping client failed: %d\n", ret)
	}
	_ = conn.Disconnect() // rping_disconnect
	if ret != 0 {
		return exitFail
	}
	return 0
}

// testClient is rping_test_client.
func (b *cb) testClient() int {
	start := byte(65)
	ret := 0
	for ping := 0; b.cfg.count == 0 || ping < b.cfg.count; ping++ {
		b.state = stRDMAReadAdv
		prefix := fmt.Sprintf("rdma-ping-%d: ", ping)
		cc := copy(b.startBuf, prefix)
		c := start
		for i := cc; i < b.cfg.size; i++ {
			b.startBuf[i] = c
			if c++; c > 122 {
				c = 65
			}
		}
		if start++; start > 122 {
			start = 65
		}
		b.startBuf[b.cfg.size-1] = 0

		b.formatSend(b.startMR)
		if b.postSend() != nil {
			ret = -1
			break
		}
		b.wait() // the server's go-ahead after its READ
		if b.state != stRDMAWriteAdv {
			b.o.print(b.o.stderr, "wait for RDMA_WRITE_ADV state %d\n", b.state)
			ret = -1
			break
		}
		b.formatSend(b.rdmaMR)
		if b.postSend() != nil {
			ret = -1
			break
		}
		b.wait() // the server's go-ahead after its WRITE
		if b.state != stRDMAWriteComplete {
			b.o.print(b.o.stderr, "wait for RDMA_WRITE_COMPLETE state %d\n", b.state)
			ret = -1
			break
		}
		if b.cfg.validate && !bytes.Equal(b.startBuf, b.rdmaBuf) {
			b.o.print(b.o.stderr, "data mismatch!\n")
			ret = -1
			break
		}
		if b.cfg.verbose {
			b.o.print(b.o.stdout, "ping data: %s\n", cString(b.rdmaBuf))
		}
	}
	if b.state == stDisconnected {
		return 0
	}
	return ret
}

// the WRITE and READ opcodes, named as rping's wr opcodes.
var (
	opRead  = qp.WRRDMARead
	opWrite = qp.WRRDMAWrite
)
