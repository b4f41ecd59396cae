package qp

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/faulty"
)

// A header bit flipped before the ICRC is sealed (a broken sender: the
// ICRC cannot catch it) may fail the connection, but never hangs it: every
// posted SEND completes, successfully or with an error that flushes the
// rest. (Not with retry_cnt 7 taken as "forever", rxe's reading: an ACK
// whose PSN was flipped forward, but not past the last PSN sent (beyond,
// it is a ghost and dropped), acknowledges packets the responder never
// got, its NAKs for them are then older than anything outstanding and
// ignored, as IBTA and rxe ignore them, and the requester retries forever.
// Only a finite retry count, or a liveness check above RC such as SMC-R's
// TEST_LINK, ends that.)
func TestRCMangledHeadersNeverHang(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			var injectors []*faulty.Backend
			cfg := pairConfig{
				mtu: rocev2.MTU1024, bufSize: 1 << 20, depth: 64, timeout: 12, retry: 7, rnrRetry: 7, rnrTimer: 1,
				wrap: func(b backend.Backend) backend.Backend {
					f := faulty.Wrap(b, faulty.Config{Seed: seed*10 + uint64(len(injectors)), Mangle: 0.02})
					injectors = append(injectors, f)
					return f.Backend()
				},
			}
			a, b := newPair(t, cfg)
			traces := map[string]*[]string{}
			for name, n := range map[string]*node{"a": a, "b": b} {
				ev := new([]string)
				traces[name] = ev
				n.qp.mu.Lock()
				n.qp.trace = func(format string, args ...any) {
					*ev = append(*ev, time.Now().Format("05.000000 ")+fmt.Sprintf(format, args...))
					if len(*ev) > 4000 {
						*ev = append((*ev)[:0], (*ev)[2000:]...)
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
					for _, e := range ev[max(0, len(ev)-300):] {
						t.Log(name, e)
					}
					n.qp.mu.Unlock()
				}
			}()
			const msgs = 400
			const size = 3000 // three packets
			var rwr []RecvWR
			for i := range 64 {
				rwr = append(rwr, RecvWR{WRID: uint64(i), SGL: []SGE{b.sge(i*8192, 8192)}})
			}
			_, err := b.qp.PostRecv(rwr)
			require.NoError(t, err)
			posted, done, recvd, ok := 0, 0, 0, 0
			buf := make([]cq.WC, 64)
			deadline := time.Now().Add(60 * time.Second) // hang guard
			for done < msgs {
				for posted < msgs && posted-done < 32 {
					_, err := a.qp.PostSend([]SendWR{{WRID: uint64(posted), Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{a.sge(0, size)}}})
					require.NoError(t, err)
					posted++
				}
				n := a.poll.Poll(buf)
				done += n
				for _, wc := range buf[:n] {
					if wc.Status == cq.Success {
						ok++
					}
				}
				m := b.poll.Poll(buf)
				for _, wc := range buf[:m] {
					recvd++
					if wc.Status == cq.Success {
						_, _ = b.qp.PostRecv([]RecvWR{{WRID: wc.WRID, SGL: []SGE{b.sge(int(wc.WRID)*8192, 8192)}}})
					}
				}
				if n+m == 0 {
					if time.Now().After(deadline) {
						st := []faulty.Stats{}
						for _, f := range injectors {
							st = append(st, f.Stats())
						}
						t.Fatalf("hung: %d of %d SENDs completed, %d posted, %d received; faults %+v", done, msgs, posted, recvd, st)
					}
					time.Sleep(100 * time.Microsecond)
				}
			}
			var mangled uint64
			for _, f := range injectors {
				mangled += f.Stats().Mangled
			}
			require.NotZero(t, mangled, "nothing was mangled: the test proved nothing")
			t.Logf("%d of %d SENDs succeeded, %d headers mangled", ok, msgs, mangled)
		})
	}
}
