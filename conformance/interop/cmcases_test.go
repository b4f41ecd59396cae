//go:build linux

package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCMCases(t *testing.T) {
	var loss, big int
	for _, c := range cmCases() {
		c := c
		args := strings.Join(c.tool.args(&c, 18515), " ")
		if c.tool == rping {
			assert.Equal(t, c.size <= rpingVerboseMax, strings.Contains(args, "-v"), args)
			iters, results := c.expect(true)
			assert.Equal(t, c.size <= rpingVerboseMax, results)
			if results {
				assert.Equal(t, c.iters, iters)
			} else {
				big++
			}
		}
		if c.madLoss {
			loss++
			assert.True(t, c.lossy())
			assert.Contains(t, c.name(), "madloss=1/2")
		}
	}
	assert.Equal(t, 2, loss, "the MAD loss case both ways")
	assert.Equal(t, 2, big, "rping -S 65000 both ways")
	// The qdisc sends the REP, RTU and DREP to netem, never the REQ or DREQ.
	for _, attr := range []string{"0x0013", "0x0014", "0x0016"} {
		assert.Contains(t, madLossQdisc, "match u16 "+attr+" 0xffff at 64")
	}
	assert.NotContains(t, madLossQdisc, "0x0010 0xffff")
	assert.NotContains(t, madLossQdisc, "0x0015 0xffff")
	assert.Contains(t, madLossQdisc, "gemodel 100% 100% 0% 100%")
}

func TestParseCmatose(t *testing.T) {
	ok := "cmatose: starting server\ninitiating data transfers\ncompleting sends\nreceiving data transfers\ndata transfers complete\ncmatose: disconnecting\ndisconnected\ntest complete\nreturn status 0"
	assert.Equal(t, perf{ok: true, iters: 1}, parseCmatose(ok), "the kernel's ends without a newline")
	assert.Equal(t, perf{ok: true, iters: 1}, parseCmatose(ok+"\n"))
	assert.False(t, parseCmatose(strings.Replace(ok, "status 0", "status 10", 1)).ok)
	assert.False(t, parseCmatose("cmatose: event: RDMA_CM_EVENT_REJECTED, error: 8\ntest complete\nreturn status 8\n").ok)
}

func TestParseRping(t *testing.T) {
	var sb strings.Builder
	for i := range 3 {
		fmt.Fprintf(&sb, "ping data: rdma-ping-%d: ABC\n", i)
	}
	assert.Equal(t, perf{ok: true, iters: 3}, parseRping(sb.String()))
	assert.Equal(t, perf{ok: true, iters: 2}, parseRping("server ping data: rdma-ping-0: A\nserver ping data: rdma-ping-1: B\n"))
	assert.False(t, parseRping("ping data: rdma-ping-1: B\n").ok, "out of order")
}

func TestRpingPings(t *testing.T) {
	c := testCase{tool: rping, server: guestServer, size: 65000, iters: 2}
	cc := newCaptureCheck()
	var sb strings.Builder
	for i, psn := range []int{10, 10, 12} { // a READ request resent: counted once
		fmt.Fprintf(&sb, "%d.0 198.18.0.11.4791 > 198.18.0.1.4791: RC RDMA_READ_REQUEST qp 0x11 psn %d ackreq\n", i, psn)
	}
	fmt.Fprintf(&sb, "4.0 198.18.0.11.4791 > 198.18.0.1.4791: RC RDMA_WRITE_FIRST qp 0x11 psn 11 ackreq\n")
	cc.addText(sb.String())
	assert.Len(t, rpingPings(&c, cc), 1, "one WRITE for two pings")
	cc.addText("5.0 198.18.0.11.4791 > 198.18.0.1.4791: RC RDMA_WRITE_ONLY qp 0x11 psn 13 ackreq\n")
	assert.Empty(t, rpingPings(&c, cc))
	c.server = goroceServer
	assert.Len(t, rpingPings(&c, cc), 1, "goroce's server sent nothing")
}

func TestMADResent(t *testing.T) {
	assert.False(t, madResent(map[string]int64{"cm_tx_msgs/rep": 2, "rcvd_pkts": 100}))
	assert.True(t, madResent(map[string]int64{"cm_tx_retries/rep": 1}))
	assert.True(t, madResent(map[string]int64{"cm_rx_duplicates/rep": 1}))
}
