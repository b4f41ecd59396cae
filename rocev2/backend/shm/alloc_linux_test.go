package shm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/race"
	"github.com/goroce/goroce/rocev2/backend"
)

// Neither Send nor Receive allocates per packet: a batch into the ring and
// out of it, and a ping-pong whose receivers sleep on their doorbells
// (eventfd, epoll, the netpoller) between packets.
func TestDataPathDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates; make test runs this without it")
	}
	a, b := pairedBackends(t, Config{})
	batch := make([]backend.Outgoing, 8)
	for i := range batch {
		batch[i] = backend.Outgoing{Buf: packet(64+i*500, byte(i)), Dst: b.LocalAddr()}
	}
	rx := make([]backend.Incoming, 16)
	receive := func(be *Backend, want int) {
		for got := 0; got < want; {
			n, err := be.Receive(rx)
			if err != nil {
				panic(err)
			}
			got += n
		}
	}
	t.Run("batch", func(t *testing.T) {
		allocs := testing.AllocsPerRun(1000, func() {
			require.NoError(t, a.Send(batch))
			receive(b, len(batch))
		})
		assert.Zero(t, allocs)
	})
	t.Run("ping-pong", func(t *testing.T) {
		ping := []backend.Outgoing{{Buf: packet(64, 1), Dst: b.LocalAddr()}}
		pong := []backend.Outgoing{{Buf: packet(64, 2), Dst: a.LocalAddr()}}
		brx := make([]backend.Incoming, 16)
		done := make(chan struct{})
		go func() { // b answers every ping
			defer close(done)
			for {
				if _, err := b.Receive(brx); err != nil {
					return
				}
				if err := b.Send(pong); err != nil {
					return
				}
			}
		}()
		allocs := testing.AllocsPerRun(1000, func() {
			require.NoError(t, a.Send(ping))
			receive(a, 1)
		})
		assert.Zero(t, allocs)
		b.Close()
		<-done
	})
}
