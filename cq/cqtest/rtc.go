package cqtest

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
)

// ReceiveBatchRunsTheCQsItFired: given a device, the CQs that a receive
// batch fires run on the receive goroutine when the batch ends, inside one
// run of the device; moderation does not hold them back there; and a
// completion pushed outside a batch still reaches its handler (a poller
// goroutine runs it). (A poller goroutine that happens to be awake, as when
// it starts, may take a fired CQ before the batch ends: allowed, it runs
// once either way.)
func ReceiveBatchRunsTheCQsItFired(t *testing.T, d Design) {
	dev := NewRxDevice()
	p := newAlloc(t, d, dev)
	require.Equal(t, 1, dev.Registered())
	var leases []cq.Reservation
	qpns := map[cq.Reservation]uint32{}
	for i := 0; i < 3; i++ { // CQs on both vectors
		l, err := d.Reserve(p, 16)
		require.NoError(t, err)
		l.Bind(uint32(i + 1))
		qpns[l] = uint32(i + 1)
		if d.Moderate != nil {
			d.Moderate(l, 8, time.Hour) // would hold a lone completion for an hour
		}
		leases = append(leases, l)
	}
	var inRun, outside atomic.Int64
	e := &CountEntry{Then: func(*cq.WC) {
		if dev.Open.Load() > 0 {
			inRun.Add(1)
		} else {
			outside.Add(1)
		}
	}}
	pushN := func(l cq.Reservation, n int, st cq.Status) {
		for i := 0; i < n; i++ {
			wrid, entry := l.Tag(e)
			require.NoError(t, push(l.RecvCQ(), &cq.WC{WRID: wrid, Entry: entry, QPNum: qpns[l], Status: st}, false))
		}
	}
	ctx := guardCtx(t)
	for round := 1; round <= 50; round++ {
		dev.Rx(func() {
			for _, l := range leases {
				pushN(l, 1, cq.Success)
			}
		})
		// An hour of moderation would hang here.
		waitFor(t, ctx, "completions of a receive batch", func() bool { return e.N.Load() == int64(3*round) })
	}
	st := p.Stats()
	assert.Greater(t, st.InlineRuns, st.Wakeups*3/4, "the runs were on the receive goroutine: %+v", st)
	assert.EqualValues(t, 150, inRun.Load(), "every handler ran inside a run of the device")
	assert.Zero(t, outside.Load())
	assert.Zero(t, dev.Open.Load(), "every BeginRun was ended")

	// Outside a receive batch a poller goroutine runs it (after the
	// period, for a moderated design: lower it first).
	if d.Moderate != nil {
		d.Moderate(leases[0], 8, time.Microsecond)
	}
	pushN(leases[0], 1, cq.Success)
	waitFor(t, ctx, "a completion pushed outside a receive batch", func() bool { return e.N.Load() == 151 })

	require.NoError(t, p.Close())
	assert.Zero(t, dev.Registered(), "Close removes the hooks")
	dev.Rx(func() {}) // a batch after Close runs nothing and does not panic
}

// ReceiveBatchEndingAfterCloseRunsNothing: a receive batch that began
// before Close and ends after it runs no handler: Close waits for batches
// running CQs, and later ends do nothing. (A poller goroutine that is
// awake may run the fired CQ before Close returns; nothing may run after.)
func ReceiveBatchEndingAfterCloseRunsNothing(t *testing.T, d Design) {
	dev := NewRxDevice()
	p := d.New([]cq.Device{dev})
	l, err := d.Reserve(p, 16)
	require.NoError(t, err)
	l.Bind(7)
	e := &CountEntry{}
	var atClose int64
	dev.Rx(func() {
		wrid, entry := l.Tag(e)
		require.NoError(t, push(l.RecvCQ(), &cq.WC{WRID: wrid, Entry: entry, QPNum: 7}, false))
		require.NoError(t, p.Close())
		atClose = e.N.Load()
	})
	assert.Equal(t, atClose, e.N.Load(), "a handler ran after Close")
	NoGoroutines(t, d.Goroutines...)
}

// ArmMissedEventStress is the poll/arm race: a completion pushed after the
// poller's last short poll but before its re-arm raises no event; only
// "report missed events" makes the poller run again for it. Producers push
// tiny bursts and wait for them each round, so the poller goes idle and
// re-arms thousands of times, with pushes landing on either side of the
// arm; a stranded completion hangs the round (and fails at the hang
// guard). moderation > 0 forces that moderation; with rtc half the
// producers push inside receive batches of a device the design runs on.
func ArmMissedEventStress(t *testing.T, d Design, moderation int, rtc bool) {
	dev := NewRxDevice()
	var devs []cq.Device
	if rtc {
		devs = []cq.Device{dev}
	}
	a := newAlloc(t, d, devs...)
	l, err := d.Reserve(a, 64)
	require.NoError(t, err)
	l.Bind(1)
	if moderation > 0 {
		d.Moderate(l, moderation, 2*time.Microsecond)
	}
	const producers, rounds = 4, 1500
	var handled atomic.Int64
	e := &CountEntry{Then: func(*cq.WC) { handled.Add(1) }}
	ctx := guardCtx(t)
	want := int64(0)
	for r := 0; r < rounds; r++ {
		var wg sync.WaitGroup
		for i := 0; i < producers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 1 {
					runtime.Gosched() // spread pushes around the arm
				}
				pushOne := func() {
					wrid, entry := l.Tag(e)
					if err := push(l.SendCQ(), &cq.WC{WRID: wrid, Entry: entry, QPNum: 1}, false); err != nil {
						t.Error(err)
					}
				}
				if rtc && i < producers/2 {
					dev.Rx(pushOne) // concurrent batches, as from several devices
				} else {
					pushOne()
				}
			}()
		}
		wg.Wait()
		want += producers
		waitFor(t, ctx, "a stranded completion", func() bool { return handled.Load() == want })
	}
	assert.Equal(t, uint64(want), a.Stats().Completions)
}
