package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2/device"
)

// The demo runs every RC operation a few times and checks each one where
// its effect is visible: the requester checks what comes back (READ data,
// an atomic's original value), the responder checks what arrived (receive
// completions, immediates, invalidations, memory) and reports over the
// control connection. Sizes span one to several packets, so a capture
// shows the FIRST/MIDDLE/LAST/ONLY opcodes.
//
// The responder's receives land in its connection's buffer. What the
// requester writes, reads and runs atomics on is a separate target region
// that the responder registers afresh for each operation and deregisters
// to check it: registration publishes what the responder wrote to the
// device, and deregistration waits for the device's accesses to end, so
// the responder's own reads and writes never race with the device's (the
// race detector sees the same order the wire imposes).
const (
	demoAreaLen  = 16 << 10 // room for the largest message
	demoRecvOff  = 0        // responder: receives land here
	demoWriteOff = 0        // target: WRITE destination
	demoReadOff  = 16 << 10 // target: READ source
	demoWordOff  = 32 << 10 // target: the atomic word
	demoTgtLen   = 40 << 10
	demoBufLen   = 64 << 10
	demoResOff   = 32 << 10 // requester: READ destination
	demoOrigOff  = 48 << 10 // requester: an atomic's returned value
)

// demoOp is one operation type of the demo.
type demoOp struct {
	name  string
	op    qp.WROpcode
	sizes []int
	recv  bool   // consumes a receive at the responder
	what  string // what the checks establish
}

var demoOps = []demoOp{
	{"SEND", qp.WRSend, []int{64, 6000, 12345}, true, "data and length verified by the responder"},
	{"SEND_WITH_IMM", qp.WRSendWithImm, []int{64, 6000, 12345}, true, "data and immediate verified by the responder"},
	{"SEND_WITH_INV", qp.WRSendWithInv, []int{64, 6000}, true, "data verified, the responder's rkey invalidated"},
	{"RDMA_WRITE", qp.WRRDMAWrite, []int{64, 6000, 12345}, false, "data verified in the responder's memory"},
	{"RDMA_WRITE_WITH_IMM", qp.WRRDMAWriteWithImm, []int{64, 6000, 12345}, true, "data and immediate verified by the responder"},
	{"RDMA_READ", qp.WRRDMARead, []int{64, 6000, 12345}, false, "data verified by the requester"},
	{"ATOMIC_CMP_AND_SWP", qp.WRAtomicCmpAndSwp, []int{8, 8, 8}, false, "original returned, swap verified (the 3rd compares unequal: word kept)"},
	{"ATOMIC_FETCH_AND_ADD", qp.WRAtomicFetchAdd, []int{8, 8, 8}, false, "original returned, sum verified at the responder"},
}

// demoStep is one step of the demo's exchange: prep (the responder gets
// ready for an operation), ready, check (the responder verifies it), ok.
type demoStep struct {
	Phase  string `json:"phase"`
	Op     string `json:"op"`
	Iter   int    `json:"iter"`
	Size   int    `json:"size"`
	Seed   uint64 `json:"seed"`
	Imm    uint32 `json:"imm,omitempty"`
	Word   uint64 `json:"word,omitempty"`        // prep: the atomic word's value
	Want   uint64 `json:"want,omitempty"`        // check: the atomic word expected
	RKey   uint32 `json:"rkey,omitempty"`        // ready: the rkey SEND_WITH_INV may invalidate
	TKey   uint32 `json:"target_rkey,omitempty"` // ready: the target region
	TVA    uint64 `json:"target_va,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// demoOutcome is the result of one operation type.
type demoOutcome struct {
	Op      string  `json:"op"`
	Count   int     `json:"count"`
	Sizes   []int   `json:"sizes"`
	OK      bool    `json:"ok"`
	Detail  string  `json:"detail"`
	AvgUsec float64 `json:"avg_usec"` // post to completion at the requester
}

// pattern fills b with bytes derived from seed; both sides derive the same.
func pattern(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := 0; i < len(b); i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(b[i:], w[:])
	}
}

func demoSeed(op, iter int) uint64 { return uint64(op+1)<<32 | uint64(iter+1)*0x1234567 }

// runDemo is the requester side. It returns the outcomes; an operation
// that fails its check ends the demo with an error.
func runDemo(ctx context.Context, c *qpConn, o *oob, out io.Writer, timeout time.Duration) ([]demoOutcome, error) {
	p := newPoller(c.dev, c.cq, 0)
	var outs []demoOutcome
	for oi, d := range demoOps {
		res := demoOutcome{Op: d.name, Sizes: d.sizes}
		var total time.Duration
		for it, size := range d.sizes {
			seed := demoSeed(oi, it)
			step := &demoStep{Phase: "prep", Op: d.name, Iter: it, Size: size, Seed: seed, Word: seed % 1000000}
			if err := o.send(&message{Kind: msgDemo, Demo: step}); err != nil {
				return outs, err
			}
			m, err := o.recv(msgDemo, timeout)
			if err != nil {
				return outs, err
			}
			wr := qp.SendWR{WRID: uint64(it), Opcode: d.op, Flags: qp.SendSignaled, SGL: []qp.SGE{c.sge(0, size)}}
			check := &demoStep{Phase: "check", Op: d.name, Iter: it, Size: size, Seed: seed}
			switch d.op {
			case qp.WRSend:
				pattern(c.buf[:size], seed)
			case qp.WRSendWithImm:
				pattern(c.buf[:size], seed)
				wr.Imm, check.Imm = uint32(seed), uint32(seed)
			case qp.WRRDMAWriteWithImm:
				pattern(c.buf[:size], seed)
				wr.Imm, check.Imm = uint32(seed), uint32(seed)
				wr.RemoteAddr, wr.RKey = m.Demo.TVA+demoWriteOff, m.Demo.TKey
			case qp.WRSendWithInv:
				pattern(c.buf[:size], seed)
				wr.Imm, check.Imm = m.Demo.RKey, m.Demo.RKey
			case qp.WRRDMAWrite:
				pattern(c.buf[:size], seed)
				wr.RemoteAddr, wr.RKey = m.Demo.TVA+demoWriteOff, m.Demo.TKey
			case qp.WRRDMARead:
				clear(c.buf[demoResOff : demoResOff+size])
				wr.SGL = []qp.SGE{c.sge(demoResOff, size)}
				wr.RemoteAddr, wr.RKey = m.Demo.TVA+demoReadOff, m.Demo.TKey
			case qp.WRAtomicCmpAndSwp:
				wr.SGL = []qp.SGE{c.sge(demoOrigOff, 8)}
				wr.RemoteAddr, wr.RKey = m.Demo.TVA+demoWordOff, m.Demo.TKey
				wr.CompareAdd, wr.Swap = step.Word, seed
				check.Want = seed
				if it == 2 {
					wr.CompareAdd = step.Word + 1 // unequal: the word stays
					check.Want = step.Word
				}
			case qp.WRAtomicFetchAdd:
				wr.SGL = []qp.SGE{c.sge(demoOrigOff, 8)}
				wr.RemoteAddr, wr.RKey = m.Demo.TVA+demoWordOff, m.Demo.TKey
				wr.CompareAdd = uint64(it + 1)
				check.Want = step.Word + uint64(it+1)
			}
			t0 := time.Now()
			if _, err := c.qp.PostSend([]qp.SendWR{wr}); err != nil {
				return outs, fmt.Errorf("%s #%d: %w", d.name, it+1, err)
			}
			wcs, err := p.wait(ctx, nil)
			if err != nil {
				return outs, fmt.Errorf("%s #%d: no completion: %w", d.name, it+1, err)
			}
			total += time.Since(t0)
			if len(wcs) != 1 || !wcs[0].Status.OK() || wcs[0].WRID != uint64(it) {
				return outs, fmt.Errorf("%s #%d: completions %+v, want one success", d.name, it+1, wcs)
			}
			if d.op != qp.WRAtomicCmpAndSwp && d.op != qp.WRAtomicFetchAdd && wcs[0].ByteLen != uint32(size) {
				return outs, fmt.Errorf("%s #%d: completion byte_len %d, want %d", d.name, it+1, wcs[0].ByteLen, size)
			}
			if err := checkLocal(c, d.op, size, seed, step.Word); err != nil {
				return outs, fmt.Errorf("%s #%d: %w", d.name, it+1, err)
			}
			if err := o.send(&message{Kind: msgDemo, Demo: check}); err != nil {
				return outs, err
			}
			if _, err := o.recv(msgDemo, timeout); err != nil {
				return outs, fmt.Errorf("%s #%d: %w", d.name, it+1, err)
			}
			res.Count++
		}
		res.OK, res.Detail = true, d.what
		res.AvgUsec = float64(total) / float64(time.Microsecond) / float64(res.Count)
		outs = append(outs, res)
		printDemoLine(out, &res)
	}
	return outs, o.send(&message{Kind: msgDone})
}

// checkLocal verifies what an operation brought back to the requester.
func checkLocal(c *qpConn, op qp.WROpcode, size int, seed, word uint64) error {
	switch op {
	case qp.WRRDMARead:
		want := make([]byte, size)
		pattern(want, seed)
		if !bytes.Equal(c.buf[demoResOff:demoResOff+size], want) {
			return fmt.Errorf("READ returned other data than the responder's")
		}
	case qp.WRAtomicCmpAndSwp, qp.WRAtomicFetchAdd:
		if got := binary.NativeEndian.Uint64(c.buf[demoOrigOff:]); got != word {
			return fmt.Errorf("the atomic returned %d, the word was %d", got, word)
		}
	}
	return nil
}

func printDemoLine(w io.Writer, r *demoOutcome) {
	sizes := make([]string, len(r.Sizes))
	for i, s := range r.Sizes {
		sizes[i] = strconv.Itoa(s)
	}
	status := "ok"
	if !r.OK {
		status = "FAILED"
	}
	fmt.Fprintf(w, " %-21s x%d  %-15s %-6s avg %7.1f usec  %s\n", r.Op, r.Count, strings.Join(sizes, "/")+" B", status, r.AvgUsec, r.Detail)
}

// demoResponder is the responder's state between the steps.
type demoResponder struct {
	c      *qpConn
	p      *poller
	tgt    []byte
	tgtMR  *device.MR // registered between prep and check
	victim *device.MR // SEND_WITH_INV's target
}

// serveDemo is the responder side: it prepares for and checks each
// operation the client announces, until the client is done.
func serveDemo(ctx context.Context, c *qpConn, o *oob, timeout time.Duration) (int, error) {
	r := &demoResponder{c: c, p: newPoller(c.dev, c.cq, 0), tgt: make([]byte, demoTgtLen)}
	defer r.release()
	checks := 0
	for {
		m, err := o.recv("", timeout)
		if err != nil {
			return checks, err
		}
		if m.Kind == msgDone {
			return checks, nil
		}
		if m.Kind != msgDemo || m.Demo == nil {
			return checks, fmt.Errorf("demo: unexpected %q message", m.Kind)
		}
		s := m.Demo
		reply := &demoStep{Phase: "ready", Op: s.Op, Iter: s.Iter}
		switch s.Phase {
		case "prep":
			err = r.prep(s, reply)
		case "check":
			reply.Phase = "ok"
			err = r.check(ctx, s)
			checks++
		default:
			err = fmt.Errorf("demo: unknown phase %q", s.Phase)
		}
		if err != nil {
			return checks, fmt.Errorf("%s #%d: %w", s.Op, s.Iter+1, err)
		}
		if err := o.send(&message{Kind: msgDemo, Demo: reply}); err != nil {
			return checks, err
		}
	}
}

// release deregisters what is still registered.
func (r *demoResponder) release() {
	for _, mr := range []*device.MR{r.tgtMR, r.victim} {
		if mr != nil {
			_ = mr.Deregister()
		}
	}
	r.tgtMR, r.victim = nil, nil
}

func demoOpByName(name string) (demoOp, bool) {
	for _, d := range demoOps {
		if d.name == name {
			return d, true
		}
	}
	return demoOp{}, false
}

// prep readies the responder for one operation.
func (r *demoResponder) prep(s, reply *demoStep) error {
	d, ok := demoOpByName(s.Op)
	if !ok {
		return fmt.Errorf("unknown operation")
	}
	if s.Size < 0 || s.Size > demoAreaLen {
		return fmt.Errorf("size %d outside 0..%d", s.Size, demoAreaLen)
	}
	r.release()
	c := r.c
	if d.recv {
		clear(c.buf[demoRecvOff : demoRecvOff+demoAreaLen])
		if err := c.postRecvs(1, demoRecvOff, demoAreaLen, uint64(s.Iter)); err != nil {
			return err
		}
	}
	clear(r.tgt)
	switch d.op {
	case qp.WRRDMARead:
		pattern(r.tgt[demoReadOff:demoReadOff+s.Size], s.Seed)
	case qp.WRAtomicCmpAndSwp, qp.WRAtomicFetchAdd:
		binary.NativeEndian.PutUint64(r.tgt[demoWordOff:], s.Word)
	case qp.WRSendWithInv:
		mr, err := c.pd.RegisterMR(make([]byte, 4096), device.AccessLocalWrite|device.AccessRemoteWrite)
		if err != nil {
			return err
		}
		r.victim, reply.RKey = mr, mr.RKey()
	}
	mr, err := c.pd.RegisterMR(r.tgt, allAccess)
	if err != nil {
		return err
	}
	r.tgtMR, reply.TKey, reply.TVA = mr, mr.RKey(), mr.VA()
	return nil
}

// check verifies one operation's effect at the responder.
func (r *demoResponder) check(ctx context.Context, s *demoStep) error {
	d, _ := demoOpByName(s.Op)
	if r.tgtMR == nil {
		return fmt.Errorf("check without prep")
	}
	// Deregistering waits for the device to be done with the region.
	if err := r.tgtMR.Deregister(); err != nil {
		return err
	}
	r.tgtMR = nil
	want := make([]byte, s.Size)
	pattern(want, s.Seed)
	if d.recv {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		wcs, err := r.p.wait(cctx, nil)
		cancel()
		if err != nil {
			return fmt.Errorf("no receive completion: %w", err)
		}
		if len(wcs) != 1 {
			return fmt.Errorf("%d completions, want 1", len(wcs))
		}
		if err := checkRecvWC(&wcs[0], d.op, s, r.victim); err != nil {
			return err
		}
	}
	switch d.op {
	case qp.WRSend, qp.WRSendWithImm, qp.WRSendWithInv:
		if !bytes.Equal(r.c.buf[demoRecvOff:demoRecvOff+s.Size], want) {
			return fmt.Errorf("received data differs from what was sent")
		}
	case qp.WRRDMAWrite, qp.WRRDMAWriteWithImm:
		if !bytes.Equal(r.tgt[demoWriteOff:demoWriteOff+s.Size], want) {
			return fmt.Errorf("written data differs from what was sent")
		}
		if got := r.tgt[demoWriteOff+s.Size]; got != 0 {
			return fmt.Errorf("the WRITE went past its %d bytes", s.Size)
		}
	case qp.WRAtomicCmpAndSwp, qp.WRAtomicFetchAdd:
		if got := binary.NativeEndian.Uint64(r.tgt[demoWordOff:]); got != s.Want {
			return fmt.Errorf("the word is %d, want %d", got, s.Want)
		}
	}
	return nil
}

// checkRecvWC verifies the receive completion of a SEND or WRITE_WITH_IMM.
func checkRecvWC(wc *cq.WC, op qp.WROpcode, s *demoStep, victim *device.MR) error {
	if !wc.Status.OK() {
		return wcError(wc)
	}
	wantOp, wantLen, wantFlags := cq.OpRecv, uint32(s.Size), cq.Flags(0)
	switch op {
	case qp.WRSendWithImm:
		wantFlags = cq.WithImm
	case qp.WRSendWithInv:
		wantFlags = cq.WithInv
	case qp.WRRDMAWriteWithImm:
		wantOp, wantFlags = cq.OpRecvRDMAWithImm, cq.WithImm
	}
	if wc.Opcode != wantOp || wc.ByteLen != wantLen || wc.Flags != wantFlags || wc.WRID != uint64(s.Iter) {
		return fmt.Errorf("receive completion %v len %d flags %d wr_id %d, want %v len %d flags %d wr_id %d",
			wc.Opcode, wc.ByteLen, wc.Flags, wc.WRID, wantOp, wantLen, wantFlags, s.Iter)
	}
	if wantFlags != 0 && wc.Imm != s.Imm {
		return fmt.Errorf("immediate %#x, want %#x", wc.Imm, s.Imm)
	}
	if op == qp.WRSendWithInv && (victim == nil || victim.Valid()) {
		return fmt.Errorf("rkey %#x is still valid after SEND_WITH_INV", s.Imm)
	}
	return nil
}
