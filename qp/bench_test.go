package qp

import (
	"testing"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// BenchmarkWrite streams 64 KiB RDMA WRITEs (MTU 4096) between two devices
// on the in-memory link: the transport's own cost, no system calls.
func BenchmarkWrite(b *testing.B) {
	const size = 64 << 10
	a, p := newPair(b, pairConfig{mtu: rocev2.MTU4096, bufSize: 2 * size, depth: 64})
	wrs := []SendWR{{Opcode: WRRDMAWrite, SGL: []SGE{a.sge(0, size)}, RemoteAddr: p.mr.VA(), RKey: p.mr.RKey()}}
	wr := &wrs[0]
	wcs := make([]cq.WC, 16)
	inflight, signalEvery := 0, 8
	b.SetBytes(size)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		wr.Flags = 0
		if i%signalEvery == signalEvery-1 {
			wr.Flags = SendSignaled
		}
		i++
		for {
			if _, err := a.qp.PostSend(wrs); err == nil {
				break
			}
			inflight -= reap(b, a.poll, wcs) * signalEvery
		}
		inflight++
	}
	for inflight > signalEvery {
		inflight -= reap(b, a.poll, wcs) * signalEvery
	}
	b.ReportMetric(float64(a.dev.Counters.SentPkts.Load())/b.Elapsed().Seconds(), "pkts/s")
}

// reap busy-polls for completions (receiving on this goroutine when the CQ
// is empty), sleeping on the CQ's event only when nothing is waiting.
func reap(b *testing.B, c *device.Poller, wcs []cq.WC) int {
	for {
		n := c.Poll(wcs)
		for _, wc := range wcs[:n] {
			if wc.Status != cq.Success {
				b.Fatalf("completion %+v", wc)
			}
		}
		if n > 0 {
			return n
		}
		if !c.Arm(false) {
			<-c.CQ().Events()
		}
	}
}

// BenchmarkSendPingPong measures a 64-byte SEND round trip on the in-memory link.
func BenchmarkSendPingPong(b *testing.B) {
	a, p := newPair(b, pairConfig{})
	wcs := make([]cq.WC, 4)
	recvs := map[*node][]RecvWR{
		a: {{SGL: []SGE{a.sge(4096, 64)}}},
		p: {{SGL: []SGE{p.sge(4096, 64)}}},
	}
	sends := map[*node][]SendWR{
		a: {{Opcode: WRSend, Flags: SendSignaled | SendInline, Inline: a.buf[:64]}},
		p: {{Opcode: WRSend, Flags: SendSignaled | SendInline, Inline: p.buf[:64]}},
	}
	post := func(n *node) {
		if _, err := n.qp.PostRecv(recvs[n]); err != nil {
			b.Fatal(err)
		}
	}
	post(a)
	post(p)
	send := func(n *node) {
		if _, err := n.qp.PostSend(sends[n]); err != nil {
			b.Fatal(err)
		}
	}
	wait := func(n *node, want int) {
		for got := 0; got < want; {
			got += reap(b, n.poll, wcs)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		send(a)
		wait(p, 1) // p's receive (its send completion comes with the reply)
		post(p)
		send(p)
		wait(a, 2) // a's send completion and receive
		post(a)
		wait(p, 1)
	}
}
