package qp

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
)

const wait = 10 * time.Second

func fill(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

// splitSGL cuts [off, off+n) of a node's buffer into up to three SGEs.
func splitSGL(nd *node, off, n int) []SGE {
	if n < 3 {
		return []SGE{nd.sge(off, n)}
	}
	a, b := n/3, n/2
	return []SGE{nd.sge(off, a), nd.sge(off+a, b-a), nd.sge(off+b, n-b)}
}

func TestRCOperationsBySize(t *testing.T) {
	// Over memlink a 4.3 s local ACK timeout (code 20): nothing is lost, so
	// a retransmission could only be the transport's own doing, not a
	// goroutine scheduled late on a busy machine.
	t.Run("memlink", func(t *testing.T) { testOperationsBySize(t, pairConfig{mtu: rocev2.MTU1024, timeout: 20}) })
	t.Run("udp", func(t *testing.T) { testOperationsBySize(t, pairConfig{mtu: rocev2.MTU4096, udp: true}) })
	t.Run("portable udp", func(t *testing.T) {
		testOperationsBySize(t, pairConfig{mtu: rocev2.MTU4096, udp: true, portable: true})
	})
}

// testOperationsBySize runs every data operation with sizes around the MTU
// and a multi-megabyte one, with scatter/gather lists on both sides.
func testOperationsBySize(t *testing.T, cfg pairConfig) {
	mtu := cfg.mtu.Bytes()
	sizes := []int{0, 1, mtu - 1, mtu, mtu + 1, 5*mtu + 3, 3 << 20}
	ops := []WROpcode{WRSend, WRSendWithImm, WRRDMAWrite, WRRDMAWriteWithImm, WRRDMARead}
	cfg.bufSize = 2*(3<<20) + 64
	a, b := newPair(t, cfg)
	half := len(a.buf) / 2
	for _, op := range ops {
		for _, size := range sizes {
			t.Run(op.String()+"/"+itoa(size), func(t *testing.T) {
				fill(a.buf[:half], uint64(size)+uint64(op))
				clear(b.buf)
				if op == WRRDMARead {
					// READ pulls b's first half into a's second half.
					fill(b.buf[:half], uint64(size)^0xabc)
					clear(a.buf[half:])
				}
				needsRecv := op == WRSend || op == WRSendWithImm || op == WRRDMAWriteWithImm
				if needsRecv {
					_, err := b.qp.PostRecv([]RecvWR{{WRID: 77, SGL: splitSGL(b, 0, max(size, 1))}})
					require.NoError(t, err)
				}
				wr := SendWR{WRID: 42, Opcode: op, Flags: SendSignaled, Imm: 0xfeedbeef, RKey: b.mr.RKey(), RemoteAddr: b.mr.VA()}
				wr.SGL = splitSGL(a, 0, size)
				if op == WRRDMARead {
					wr.SGL = splitSGL(a, half, size)
				}
				_, err := a.qp.PostSend([]SendWR{wr})
				require.NoError(t, err)

				wcs := waitWCs(t, a.cq, 1, wait)
				require.Equal(t, cq.Success, wcs[0].Status, "%+v\na: %v\nb: %v\n%v\n%v", wcs[0],
					a.dev.Counters.Snapshot(), b.dev.Counters.Snapshot(), a.qp, b.qp)
				assert.Equal(t, uint64(42), wcs[0].WRID)
				assert.Equal(t, op.wcOpcode(), wcs[0].Opcode)
				assert.Equal(t, uint32(size), wcs[0].ByteLen)
				if needsRecv {
					rw := waitWCs(t, b.cq, 1, wait)
					require.Equal(t, cq.Success, rw[0].Status, "%+v", rw[0])
					assert.Equal(t, uint64(77), rw[0].WRID)
					assert.Equal(t, uint32(size), rw[0].ByteLen)
					if op == WRSend {
						assert.Equal(t, cq.OpRecv, rw[0].Opcode)
						assert.Zero(t, rw[0].Flags)
					} else {
						assert.Equal(t, cq.WithImm, rw[0].Flags)
						assert.Equal(t, uint32(0xfeedbeef), rw[0].Imm)
					}
					if op == WRRDMAWriteWithImm {
						assert.Equal(t, cq.OpRecvRDMAWithImm, rw[0].Opcode)
					}
				}
				// The responder's device wrote (or read) b.buf on its own
				// goroutine; a SEND it completes orders that before our
				// look at b.buf (over UDP, no Go synchronisation links the
				// requester's completion to the responder's loop).
				barrier(t, a, b)
				if op == WRRDMARead {
					require.True(t, bytes.Equal(b.buf[:size], a.buf[half:half+size]), "READ data differs")
				} else {
					require.True(t, bytes.Equal(a.buf[:size], b.buf[:size]), "data differs")
					require.True(t, allZero(b.buf[size:size+16]), "wrote past the message")
				}
				requireNoWC(t, a.cq)
				requireNoWC(t, b.cq)
			})
		}
	}
	if !cfg.udp {
		// The in-memory link loses nothing; a retransmission would be
		// the transport's own doing. (Over UDP under -race, a socket can
		// overflow or a timer fire late: recovering is then correct.)
		assert.Zero(t, a.dev.Counters.RetransmittedPkts.Load(), "no loss, no retransmission")
		assert.Zero(t, b.dev.Counters.SentNAKs.Load())
	}
	t.Logf("retransmitted %d, NAKs sent %d", a.dev.Counters.RetransmittedPkts.Load(), b.dev.Counters.SentNAKs.Load())
}

// barrier sends a zero-length SEND from a to b and waits for both
// completions: everything b's device did for a before it happened-before the
// return.
func barrier(t *testing.T, a, b *node) {
	t.Helper()
	_, err := b.qp.PostRecv([]RecvWR{{WRID: 0xba}})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]SendWR{{WRID: 0xba, Opcode: WRSend, Flags: SendSignaled}})
	require.NoError(t, err)
	require.Equal(t, cq.Success, waitWCs(t, a.cq, 1, wait)[0].Status)
	require.Equal(t, cq.Success, waitWCs(t, b.cq, 1, wait)[0].Status)
}

func allZero(b []byte) bool {
	for _, v := range b {
		if v != 0 {
			return false
		}
	}
	return true
}

func itoa(n int) string {
	return string(rune('0'+n/1000000%10)) + string(rune('0'+n/100000%10)) + string(rune('0'+n/10000%10)) +
		string(rune('0'+n/1000%10)) + string(rune('0'+n/100%10)) + string(rune('0'+n/10%10)) + string(rune('0'+n%10))
}

func TestRCAtomics(t *testing.T) {
	a, b := newPair(t, pairConfig{})
	put := func(off int, v uint64) { nativePut(b.buf[off:], v) }
	put(64, 100)
	_, err := a.qp.PostSend([]SendWR{
		{WRID: 1, Opcode: WRAtomicFetchAdd, Flags: SendSignaled, SGL: []SGE{a.sge(0, 8)}, RemoteAddr: b.mr.VA() + 64, RKey: b.mr.RKey(), CompareAdd: 5},
		{WRID: 2, Opcode: WRAtomicCmpAndSwp, Flags: SendSignaled, SGL: []SGE{a.sge(8, 8)}, RemoteAddr: b.mr.VA() + 64, RKey: b.mr.RKey(), CompareAdd: 105, Swap: 7},
		{WRID: 3, Opcode: WRAtomicCmpAndSwp, Flags: SendSignaled, SGL: []SGE{a.sge(16, 8)}, RemoteAddr: b.mr.VA() + 64, RKey: b.mr.RKey(), CompareAdd: 999, Swap: 1},
	})
	require.NoError(t, err)
	wcs := waitWCs(t, a.cq, 3, wait)
	for i, wc := range wcs {
		require.Equal(t, cq.Success, wc.Status)
		assert.Equal(t, uint64(i+1), wc.WRID)
	}
	assert.Equal(t, cq.OpFetchAdd, wcs[0].Opcode)
	assert.Equal(t, cq.OpCompSwap, wcs[1].Opcode)
	assert.Equal(t, uint64(100), nativeGet(a.buf[0:]), "fetch-add returns the old value")
	assert.Equal(t, uint64(105), nativeGet(a.buf[8:]), "cmp-swap returns the old value")
	assert.Equal(t, uint64(7), nativeGet(a.buf[16:]), "failed cmp-swap returns the current value")
	assert.Equal(t, uint64(7), nativeGet(b.buf[64:]))
}
