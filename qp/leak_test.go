package qp

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/faulty"
)

// Every goroutine a device, its backends and its QPs start stops on Close.
func TestNoGoroutineOutlivesClose(t *testing.T) {
	before := runtime.NumGoroutine()
	for _, cfg := range []pairConfig{
		{},
		{udp: true},
		{wrap: func(b backend.Backend) backend.Backend {
			return faulty.Wrap(b, faulty.Config{Seed: 1, Reorder: 0.1, Delay: time.Millisecond, DelayRate: 0.1})
		}},
	} {
		t.Run("", func(t *testing.T) {
			a, b := newPair(t, cfg)
			_, err := b.qp.PostRecv([]RecvWR{{SGL: []SGE{b.sge(0, 64)}}})
			require.NoError(t, err)
			_, err = a.qp.PostSend([]SendWR{{Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{a.sge(0, 64)}}})
			require.NoError(t, err)
			waitWCs(t, a.cq, 1, wait)
		}) // the pair's Cleanup closes both devices
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
	}
}
