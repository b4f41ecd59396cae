package qp

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/race"
)

// A SEND round trip, an RDMA WRITE and a READ of a few packets each, end to
// end through the requester, the responder, the completer, the outbox and
// the in-memory link: nothing allocates per message.
func TestDataPathDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates; make test runs this without it")
	}
	a, b := newPair(t, pairConfig{bufSize: 1 << 16, depth: 16})
	wcs := make([]cq.WC, 8)
	reap := func(n *node, want int) {
		for got := 0; got < want; {
			k := n.poll.Poll(wcs)
			for _, wc := range wcs[:k] {
				if wc.Status != cq.Success {
					t.Fatalf("completion %+v", wc)
				}
			}
			got += k
			if k == 0 {
				// AllocsPerRun runs on one P: let the peer's receive
				// goroutine have it.
				runtime.Gosched()
			}
		}
	}
	recv := []RecvWR{{WRID: 1, SGL: []SGE{b.sge(0, 8192)}}}
	send := []SendWR{{WRID: 2, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{a.sge(0, 3000)}}}
	write := []SendWR{{WRID: 3, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{a.sge(0, 5000)}, RemoteAddr: b.mr.VA() + 8192, RKey: b.mr.RKey()}}
	read := []SendWR{{WRID: 4, Opcode: WRRDMARead, Flags: SendSignaled, SGL: []SGE{a.sge(16384, 5000)}, RemoteAddr: b.mr.VA() + 8192, RKey: b.mr.RKey()}}
	round := func() {
		if _, err := b.qp.PostRecv(recv); err != nil {
			t.Fatal(err)
		}
		for _, wr := range [][]SendWR{send, write, read} {
			if _, err := a.qp.PostSend(wr); err != nil {
				t.Fatal(err)
			}
			reap(a, 1)
		}
		reap(b, 1)
	}
	round() // warm up: first-use growth of the devices' tables
	require.Zero(t, testing.AllocsPerRun(100, round))
}

// A UD SEND and a UC SEND of two packets and a UC WRITE, end to end: nothing
// allocates per message (the GRH area is built in the QP, the WQE taken
// from an SRQ is copied into the QP's own).
func TestDatagramPathsDoNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates; make test runs this without it")
	}
	for _, cfg := range []dgConfig{
		{typ: UD}, {typ: UC}, {typ: UD, srq: &SRQAttr{MaxWR: 16}}, {typ: UC, srq: &SRQAttr{MaxWR: 16}},
	} {
		a, b := newDgPair(t, cfg)
		wcs := make([]cq.WC, 8)
		reap := func(n *dgNode, want int) {
			for got := 0; got < want; {
				k := n.poll.Poll(wcs)
				for _, wc := range wcs[:k] {
					if wc.Status != cq.Success {
						t.Fatalf("completion %+v", wc)
					}
				}
				got += k
				if k == 0 {
					runtime.Gosched()
				}
			}
		}
		recv := []RecvWR{{WRID: 1, SGL: []SGE{b.sge(0, 4096)}}}
		var sends [][]SendWR
		if cfg.typ == UD {
			sends = [][]SendWR{{a.udSend(2, b, 0, 1000)}}
		} else {
			sends = [][]SendWR{
				{{WRID: 2, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{a.sge(0, 1500)}}},
				{{WRID: 3, Opcode: WRRDMAWriteWithImm, Flags: SendSignaled, SGL: []SGE{a.sge(0, 1500)}, RemoteAddr: b.mr.VA() + 8192, RKey: b.mr.RKey()}},
			}
		}
		round := func() {
			for _, wr := range sends {
				var err error
				if b.srq != nil {
					_, err = b.srq.PostRecv(recv)
				} else {
					_, err = b.qp.PostRecv(recv)
				}
				if err != nil {
					t.Fatal(err)
				}
				if _, err := a.qp.PostSend(wr); err != nil {
					t.Fatal(err)
				}
				reap(a, 1)
				reap(b, 1)
			}
		}
		round()
		require.Zero(t, testing.AllocsPerRun(100, round), "%v srq %v", cfg.typ, cfg.srq != nil)
	}
}
