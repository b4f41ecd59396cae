package device

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/race"
	"github.com/goroce/goroce/rocev2/backend"
)

// discard is a backend that takes every send and receives nothing.
type discard struct{ closed chan struct{} }

func (d *discard) Send([]backend.Outgoing) error { return nil }
func (d *discard) Receive([]backend.Incoming) (int, error) {
	<-d.closed
	return 0, backend.ErrBackendClosed
}
func (d *discard) LocalAddr() netip.AddrPort { return netip.MustParseAddrPort("127.0.0.1:4791") }
func (d *discard) BatchSize() int            { return 16 }
func (d *discard) LinkMTU() int              { return 1500 }
func (d *discard) Close() error              { close(d.closed); return nil }

// Posting, and sending from runs, holds and full outboxes, allocates
// nothing: the outbox's slots are the device's, preallocated.
func TestOutboxDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates; make test runs this without it")
	}
	d, err := New(Config{Backend: &discard{closed: make(chan struct{})}, HoldLimit: time.Hour})
	require.NoError(t, err)
	defer d.Close()
	c, err := cq.New(4, cq.Config{})
	require.NoError(t, err)
	p := d.NewPoller(c)
	wcs := make([]cq.WC, 4)
	allocs := testing.AllocsPerRun(200, func() {
		post(d, "a") // at once
		d.BeginRun() // a run of 40 posts: two sends when full
		for range 40 {
			post(d, "b")
		}
		d.EndRun()
		p.Poll(wcs) // nothing waits: no hold
		p.Arm(false)
	})
	require.Zero(t, allocs)
}
