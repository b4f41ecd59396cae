package qp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/faulty"
)

// The reliability proof: thousands of mixed operations over a link that
// loses, duplicates, reorders, corrupts or delays packets (deterministically,
// from a seed) arrive exactly once, in order, with the right data; atomics
// run exactly once.
func TestRCUnderFaults(t *testing.T) {
	ops := 2000
	if testing.Short() {
		ops = 400
	}
	for _, tc := range []struct {
		name string
		cfg  faulty.Config
	}{
		{"10% loss", faulty.Config{Loss: 0.10}},
		{"loss", faulty.Config{Loss: 0.03}},
		{"duplication", faulty.Config{Duplicate: 0.10}},
		{"reordering", faulty.Config{Reorder: 0.10}},
		{"corruption", faulty.Config{Corrupt: 0.05}},
		{"delay", faulty.Config{Delay: 2 * time.Millisecond, DelayRate: 0.10}},
		{"everything", faulty.Config{Loss: 0.03, Duplicate: 0.03, Reorder: 0.03, Corrupt: 0.03, Delay: time.Millisecond, DelayRate: 0.03}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed := uint64(len(tc.name))
			var injectors []*faulty.Backend
			cfg := pairConfig{
				// A 67 ms local ACK timeout (as rc_pingpong uses): shorter ones make a slow
				// receiver (this runs under -race, beside other tests) look
				// like loss, and retries that pile onto its backlog exhaust
				// retry_cnt without any packet being lost.
				mtu: rocev2.MTU1024, bufSize: 8 << 20, depth: 256, timeout: 14, retry: 7, rnrRetry: 7, rnrTimer: 1,
				wrap: func(b backend.Backend) backend.Backend {
					c := tc.cfg
					seed++
					c.Seed = seed
					f := faulty.Wrap(b, c)
					injectors = append(injectors, f)
					return f.Backend() // busy pollers drive the device: held ACKs under faults too
				},
			}
			a, b := newPair(t, cfg)
			// Transport events, formatted only if the test fails.
			type event struct {
				at     time.Time
				format string
				args   []any
			}
			traces := map[string]*[]event{}
			for name, n := range map[string]*node{"a": a, "b": b} {
				ev := new([]event)
				traces[name] = ev
				n.qp.mu.Lock()
				n.qp.trace = func(format string, args ...any) {
					*ev = append(*ev, event{time.Now(), format, args})
					if len(*ev) > 8000 {
						*ev = append((*ev)[:0], (*ev)[4000:]...)
					}
				}
				n.qp.mu.Unlock()
			}
			defer func() {
				if !t.Failed() {
					return
				}
				for name, n := range map[string]*node{"a": a, "b": b} {
					n.qp.mu.Lock()
					ev := *traces[name]
					for _, e := range ev[max(0, len(ev)-400):] {
						t.Log(name, e.at.Format("05.000000"), fmt.Sprintf(e.format, e.args...))
					}
					n.qp.mu.Unlock()
				}
			}()
			runMixedWorkload(t, a, b, ops, seed)
			for _, f := range injectors {
				t.Logf("faults: %+v", f.Stats())
			}
			t.Logf("memlink: %+v", a.net.Stats())
			t.Logf("requester: retransmitted %d, retries %d, seq NAKs %d; responder: duplicates %d, out of seq %d",
				a.dev.Counters.RetransmittedPkts.Load(), a.dev.Counters.CompleterRetryErr.Load(),
				a.dev.Counters.RcvdSeqErr.Load(), b.dev.Counters.DuplicateRequest.Load(), b.dev.Counters.OutOfSeqRequest.Load())
		})
	}
}

// Layout of the 8 MiB buffers.
const (
	recvSlot   = 8192
	recvSlots  = 512          // b: receive buffers [0, 4 MiB)
	writeBase  = 4 << 20      // b: WRITE targets, one 4 KiB slot per op
	readBase   = 6 << 20      // b: source of READs
	counterOff = 8<<20 - 64   // b: the fetch-add counter
	casOff     = 8<<20 - 56   // b: the compare-swap chain
	readDst    = 4 << 20      // a: READ destinations, 512 slots
	atomicDst  = 8<<20 - 4096 // a: atomic results
	slot       = 4096
	srcSlots   = readDst / slot // a: send/write sources, 1024 slots
	writeSlots = 512
	readSlots  = 512
)

type expectRecv struct {
	seq   int
	imm   bool
	write bool // WRITE_WITH_IMM: no data in the receive buffer
	data  []byte
}

type readCheck struct{ dst, src, n int }

type lastWrite struct{ seq, size int }

// runMixedWorkload posts ops mixed work requests from a to b (SQ depth 256,
// so a source slot is never reused while a request using it is in flight)
// and checks everything b receives and a gets back.
func runMixedWorkload(t *testing.T, a, b *node, ops int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	fill(b.buf[readBase:readBase+1<<20], seed)
	nativePut(b.buf[counterOff:], 0)
	nativePut(b.buf[casOff:], 0)

	postRecv := func(i int) {
		_, err := b.qp.PostRecv([]RecvWR{{WRID: uint64(i), SGL: []SGE{b.sge((i%recvSlots)*recvSlot, recvSlot)}}})
		require.NoError(t, err)
	}
	nextRecv := 255
	for i := 0; i < nextRecv; i++ {
		postRecv(i)
	}

	var (
		wantRecv          []expectRecv
		ops_              []WROpcode
		recvGot, sendGot  []cq.WC
		checked           int
		reads             = map[uint64]readCheck{}
		writes            = map[int]lastWrite{}
		fetchAdds, casRun int
		wcbuf             = make([]cq.WC, 64)
	)
	// drain collects completions; receive buffers are checked and reposted,
	// READ destinations checked before their slot can be reused.
	drain := func() {
		for {
			n := a.poll.Poll(wcbuf)
			sendGot = append(sendGot, wcbuf[:n]...)
			m := b.poll.Poll(wcbuf)
			for _, wc := range wcbuf[:m] {
				k := len(recvGot)
				recvGot = append(recvGot, wc)
				require.Equal(t, cq.Success, wc.Status, "recv %d: %+v", k, wc)
				require.Less(t, k, len(wantRecv), "more receives than messages sent")
				exp := wantRecv[k]
				if exp.imm {
					require.Equal(t, uint32(exp.seq), wc.Imm, "recv %d: immediate out of order or duplicated", k)
				}
				if !exp.write {
					off := int(wc.WRID%recvSlots) * recvSlot
					require.Equal(t, uint32(len(exp.data)), wc.ByteLen, "recv %d (seq %d)", k, exp.seq)
					require.True(t, bytes.Equal(exp.data, b.buf[off:off+len(exp.data)]), "recv %d (seq %d) data", k, exp.seq)
				}
				postRecv(nextRecv)
				nextRecv++
			}
			for ; checked < len(sendGot); checked++ {
				wc := sendGot[checked]
				if rc, ok := reads[wc.WRID]; ok && wc.Status == cq.Success {
					require.True(t, bytes.Equal(b.buf[rc.src:rc.src+rc.n], a.buf[rc.dst:rc.dst+rc.n]), "READ %d data", wc.WRID)
					delete(reads, wc.WRID)
				}
			}
			if n == 0 && m == 0 {
				return
			}
		}
	}

	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < ops; i++ {
		wr := SendWR{WRID: uint64(i), Flags: SendSignaled}
		size := []int{0, 1, 100, 1023, 1024, 1025, 3000, 4096}[rng.IntN(8)]
		src := (i % srcSlots) * slot
		switch k := rng.IntN(10); {
		case k < 3: // SEND carrying its sequence number
			wr.Opcode = WRSend
			size = max(size, 4)
			fill(a.buf[src:src+size], uint64(i))
			binary.BigEndian.PutUint32(a.buf[src:], uint32(i))
			wr.SGL = splitSGL(a, src, size)
			wantRecv = append(wantRecv, expectRecv{seq: i, data: bytes.Clone(a.buf[src : src+size])})
		case k < 4: // SEND_WITH_IMM, inline when small
			wr.Opcode, wr.Imm = WRSendWithImm, uint32(i)
			fill(a.buf[src:src+size], uint64(i))
			if size <= 256 {
				wr.Flags |= SendInline
				wr.Inline = a.buf[src : src+size]
			} else {
				wr.SGL = []SGE{a.sge(src, size)}
			}
			wantRecv = append(wantRecv, expectRecv{seq: i, imm: true, data: append([]byte{}, a.buf[src:src+size]...)})
		case k < 6: // WRITE (checked at the end), sometimes with immediate
			wr.Opcode = WRRDMAWrite
			fill(a.buf[src:src+size], uint64(i))
			wr.SGL = splitSGL(a, src, size)
			ws := i % writeSlots
			wr.RemoteAddr, wr.RKey = b.mr.VA()+uint64(writeBase+ws*slot), b.mr.RKey()
			writes[ws] = lastWrite{i, size}
			if k == 5 {
				wr.Opcode, wr.Imm = WRRDMAWriteWithImm, uint32(i)
				wantRecv = append(wantRecv, expectRecv{seq: i, imm: true, write: true})
			}
		case k < 8: // READ, checked when it completes
			wr.Opcode = WRRDMARead
			off := rng.IntN(1<<20 - size)
			dst := readDst + (i%readSlots)*slot
			wr.SGL = splitSGL(a, dst, size)
			wr.RemoteAddr, wr.RKey = b.mr.VA()+uint64(readBase+off), b.mr.RKey()
			reads[wr.WRID] = readCheck{dst: dst, src: readBase + off, n: size}
		case k < 9:
			wr.Opcode = WRAtomicFetchAdd
			wr.SGL = []SGE{a.sge(atomicDst+(i%64)*8, 8)}
			wr.RemoteAddr, wr.RKey, wr.CompareAdd = b.mr.VA()+counterOff, b.mr.RKey(), 1
			fetchAdds++
		default: // a compare-swap chain: each succeeds only if every earlier one ran exactly once
			wr.Opcode = WRAtomicCmpAndSwp
			wr.SGL = []SGE{a.sge(atomicDst+(i%64)*8, 8)}
			wr.RemoteAddr, wr.RKey = b.mr.VA()+casOff, b.mr.RKey()
			wr.CompareAdd, wr.Swap = uint64(casRun), uint64(casRun+1)
			casRun++
		}
		ops_ = append(ops_, wr.Opcode)
		for {
			_, err := a.qp.PostSend([]SendWR{wr})
			if err == nil {
				break
			}
			require.True(t, errors.Is(err, ErrQueueFull), "%v", err)
			drain()
			require.True(t, time.Now().Before(deadline), "stalled: %d sends, %d receives done; a %v b %v",
				len(sendGot), len(recvGot), a.qp.State(), b.qp.State())
			if a.qp.State() != RTS {
				t.Logf("memlink: %+v", a.net.Stats())
				buf := make([]byte, 1<<20)
				t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
				drain()
				for _, wc := range sendGot {
					if wc.Status != cq.Success {
						require.FailNow(t, "requester left RTS", "%v: first error %+v (after %d sends); a %v b %v",
							a.qp.State(), wc, len(sendGot), a.dev.Counters.Snapshot()[:20], b.dev.Counters.Snapshot()[:20])
					}
				}
				require.FailNow(t, "requester left RTS", "%v", a.qp.State())
			}
		}
		if i%32 == 0 {
			drain()
		}
	}
	for len(sendGot) < ops || len(recvGot) < len(wantRecv) {
		if !time.Now().Before(deadline) {
			buf := make([]byte, 1<<20)
			t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		}
		require.True(t, time.Now().Before(deadline), "stalled: %d/%d sends, %d/%d receives;\n%v\n%v",
			len(sendGot), ops, len(recvGot), len(wantRecv), a.qp, b.qp)
		drain()
		if len(sendGot) < ops || len(recvGot) < len(wantRecv) {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			if !a.cq.Arm(false) {
				_ = a.cq.Wait(ctx) // a wake-up or the timeout: the loop re-checks
			}
			cancel()
		}
	}
	drain()

	require.Len(t, sendGot, ops)
	for i, wc := range sendGot {
		require.Equal(t, cq.Success, wc.Status, "send wr %d: %+v", i, wc)
		require.Equal(t, uint64(i), wc.WRID, "send completions out of order")
		require.Equal(t, ops_[i].wcOpcode(), wc.Opcode)
	}
	require.Empty(t, reads, "READs not verified")
	require.Len(t, recvGot, len(wantRecv))
	tmp := make([]byte, slot)
	for ws, w := range writes {
		fill(tmp[:w.size], uint64(w.seq))
		off := writeBase + ws*slot
		require.True(t, bytes.Equal(tmp[:w.size], b.buf[off:off+w.size]), "WRITE %d data", w.seq)
	}
	assert.Equal(t, uint64(fetchAdds), nativeGet(b.buf[counterOff:]), "every fetch-add ran exactly once")
	assert.Equal(t, uint64(casRun), nativeGet(b.buf[casOff:]), "every compare-swap ran exactly once, in order")
	assert.Equal(t, RTS, a.qp.State())
	assert.Equal(t, RTS, b.qp.State())
}
