//go:build linux

package afpacket_test

import (
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/internal/vethtest"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/afpacket"
)

// BenchmarkVethReceive: the receive path alone, recvmmsg against the
// TPACKET_V3 ring. One backend sends 1 KiB RC SENDs (the packets of a
// WRITE at IB MTU 1024) over a veth pair in batches of 64, at most 512
// frames ahead of what the other has received (so that nothing is dropped
// and the receiver sets the pace); the other receives them in the mode
// under test. ns/op is per frame, and so is cpu-ns/frame: the process's
// user and system time, both ends and the kernel's work for them (the
// ring's copy into a block runs in the sender's softirq, recvmmsg's in the
// receiver's call). To interleave the modes, run the test binary once per
// round: go test -c, then ./afpacket.test -test.run '^$' -test.bench
// VethReceive -test.benchtime 200000x, several times.
func BenchmarkVethReceive(b *testing.B) {
	for _, mode := range []afpacket.ReceiveMode{afpacket.ReceiveMmsg, afpacket.ReceiveRing} {
		b.Run(mode.String(), func(b *testing.B) { benchReceive(b, mode) })
	}
}

func benchReceive(b *testing.B, mode afpacket.ReceiveMode) {
	const window, batch = 512, 64
	p := vethtest.New(b)
	var tx, rx *afpacket.Backend
	for _, o := range []struct {
		be  **afpacket.Backend
		ns  string
		cfg afpacket.Config
	}{{&tx, p.NSA, afpacket.Config{Interface: p.IfA}}, {&rx, p.NSB, afpacket.Config{Interface: p.IfB, Receive: mode}}} {
		if err := vethtest.In(o.ns, func() (err error) { *o.be, err = afpacket.Open(o.cfg); return err }); err != nil {
			b.Fatal(err)
		}
		be := *o.be
		b.Cleanup(func() { be.Close() })
	}
	pkt, err := (&rocev2.Fields{Opcode: rocev2.RCWriteMiddle, PKey: 0xffff, DestQP: 0x11}).Append(nil, make([]byte, 1024))
	if err != nil {
		b.Fatal(err)
	}
	pkts := make([]backend.Outgoing, batch) // each its own buffer: Send seals each ICRC for its own IPv4 ID
	for i := range pkts {
		pkts[i] = backend.Outgoing{Buf: append([]byte(nil), pkt...), Dst: rx.LocalAddr(), Sender: backend.Sender{QPN: 0x11}}
	}
	// The first frame waits for the neighbour; after it, none does.
	if err := tx.Send(pkts[:1]); err != nil {
		b.Fatal(err)
	}
	got := make([]backend.Incoming, batch)
	if _, err := rx.Receive(got); err != nil {
		b.Fatal(err)
	}

	var received atomic.Int64
	progress := make(chan struct{}, 1)
	done := make(chan error, 1)
	cpu0 := cpuTime(b)
	b.ResetTimer()
	go func() {
		var n int64
		for n < int64(b.N) {
			k, err := rx.Receive(got)
			if err != nil {
				done <- err
				return
			}
			for _, d := range got[:k] {
				if d.Drop != 0 || d.ICRC != backend.ICRCVerified {
					b.Errorf("a frame dropped (%v) or its ICRC %v", d.Drop, d.ICRC)
				}
			}
			n += int64(k)
			received.Store(n)
			select {
			case progress <- struct{}{}:
			default:
			}
		}
		done <- nil
	}()
	for sent := 0; sent < b.N; {
		for int64(sent)-received.Load() > window-batch {
			<-progress
		}
		k := min(batch, b.N-sent)
		if err := tx.Send(pkts[:k]); err != nil {
			b.Fatal(err)
		}
		sent += k
	}
	select {
	case err := <-done:
		if err != nil {
			b.Fatal(err)
		}
	case <-time.After(time.Minute): // a lost frame: the receiver would wait forever
		rx.Close()
		b.Fatalf("received %d of %d frames in a minute", received.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mframes/s")
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/frame")
}

// cpuTime returns the process's user and system time.
func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
