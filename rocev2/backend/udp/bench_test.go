//go:build linux

package udp

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/rocev2/backend"
	"golang.org/x/sys/unix"
)

// BenchmarkLoopback sends a batch from 127.0.0.1 and receives it at
// 127.0.0.2, one batch in flight, so nothing is lost to a full socket buffer.
// pkts/s counts packets delivered with a good ICRC.
func BenchmarkLoopback(b *testing.B) {
	for _, size := range []int{64, 1024, 4096} {
		for _, tc := range []struct {
			name     string
			gso, gro bool
		}{
			{"gso+gro", true, true},
			{"gso", true, false},
			{"plain", false, false},
		} {
			b.Run(tc.name+"/"+sizeName(size), func(b *testing.B) {
				tx, rx, timedOut := loopbackPair(b, tc.gso, tc.gro, 5*time.Minute)
				sizes := make([]int, tx.BatchSize())
				for i := range sizes {
					sizes[i] = size
				}
				pkts := packets(b, rand.New(rand.NewPCG(17, 18)), rx.LocalAddr(), sizes)
				out := make([]backend.Incoming, rx.BatchSize())
				b.SetBytes(int64(len(pkts) * len(pkts[0].Buf)))
				b.ReportAllocs()
				start := time.Now()
				for b.Loop() {
					if bad, err := roundTrip(tx, rx, pkts, out); err != nil || bad != 0 {
						b.Fatalf("err %v, bad %d, timed out %v", err, bad, timedOut.Load())
					}
				}
				b.ReportMetric(float64(b.N*len(pkts))/time.Since(start).Seconds(), "pkts/s")
			})
		}
	}
}

func sizeName(n int) string {
	switch n {
	case 64:
		return "64B"
	case 1024:
		return "1KiB"
	}
	return "4KiB"
}

// BenchmarkSendPath is Send's own work for a batch of a 64 B SEND and an
// ACK (as a ping-pong reply goes out), the system call stubbed out: plan,
// seal both ICRCs, build the message headers.
func BenchmarkSendPath(b *testing.B) {
	be := open(b, Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	be.tx.write = func(hdrs []unix.Mmsghdr) (int, error) { return len(hdrs), nil }
	dst := netip.MustParseAddrPort("127.0.0.2:4791")
	pkts := packets(b, rand.New(rand.NewPCG(1, 2)), dst, []int{64 + 12, 4 + 12})
	b.ReportAllocs()
	for b.Loop() {
		if err := be.Send(pkts); err != nil {
			b.Fatal(err)
		}
	}
}
