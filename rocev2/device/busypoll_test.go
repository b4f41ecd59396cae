package device

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2/backend"
)

// busyOnly is a pollOnly that can be busy-polled: it counts BeginBusyPoll
// and EndBusyPoll, and can have a packet arrive during the first
// EndBusyPoll, as a peer's packet lands while the poller stops.
type busyOnly struct {
	*pollOnly
	begins, ends atomic.Int32
	lateQP       uint32 // nonzero: the first EndBusyPoll queues a packet for it
	t            testing.TB
}

func (b *busyOnly) BeginBusyPoll() { b.begins.Add(1) }

func (b *busyOnly) EndBusyPoll() bool {
	if b.ends.Add(1) == 1 && b.lateQP != 0 {
		b.queue(b.t, b.lateQP, "late")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.in) > 0
}

var _ backend.BusyPoller = (*busyOnly)(nil)

func TestBusyPoll(t *testing.T) {
	cases := []struct {
		name      string
		busy      bool          // the backend is a BusyPoller
		budget    time.Duration // BusyPoll's
		queued    int           // packets waiting before the call
		late      bool          // one more arrives during EndBusyPoll
		other     bool          // another goroutine busy-polls the device
		want      bool          // what BusyPoll reports
		batches   int32         // receive batches it handled (on the caller)
		beginsEnd [2]int32      // BeginBusyPoll, EndBusyPoll calls
		left      int           // packets still queued after it
	}{
		{name: "waiting packet", busy: true, budget: time.Hour, queued: 1, want: true, batches: 1, beginsEnd: [2]int32{1, 1}},
		{name: "nothing comes within the budget", busy: true, budget: time.Millisecond, want: false, beginsEnd: [2]int32{1, 1}},
		{name: "arrival while stopping is taken", busy: true, budget: time.Millisecond, late: true, want: true, batches: 1, beginsEnd: [2]int32{1, 2}},
		{name: "no budget: never polls", busy: true, budget: 0, queued: 1, want: false, left: 1},
		{name: "a backend with system calls is never busy-polled", busy: false, budget: time.Hour, queued: 1, want: false, left: 1},
		{name: "one busy poller at a time", busy: true, budget: time.Hour, queued: 1, other: true, want: false, left: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			po := newPollOnly()
			bo := &busyOnly{pollOnly: po, t: t}
			cfg := Config{HoldLimit: time.Hour, Backend: po}
			if tc.busy {
				cfg.Backend = bo
			}
			d, err := New(cfg)
			require.NoError(t, err)
			t.Cleanup(func() { d.Close() })
			c, err := cq.New(64, cq.Config{})
			require.NoError(t, err)
			q := &owingQP{dev: d, cq: c}
			qpn, err := d.AddQP(q)
			require.NoError(t, err)
			var batches atomic.Int32
			remove := d.OnReceiveBatch(func() {}, func() { batches.Add(1) })
			defer remove()
			for range tc.queued {
				po.queue(t, qpn, "x")
			}
			if tc.late {
				bo.lateQP = qpn
			}
			if tc.other {
				d.busyPolling.Store(true)
			}
			got := d.BusyPoll(tc.budget, func() bool { return batches.Load() > 0 })
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.batches, batches.Load(), "receive batches on the caller")
			require.EqualValues(t, tc.batches, d.Counters.BusyPolledPkts.Load(), "busy_polled_pkts: a packet a batch")
			require.Equal(t, tc.beginsEnd, [2]int32{bo.begins.Load(), bo.ends.Load()})
			po.mu.Lock()
			require.Len(t, po.in, tc.left, "packets left waiting")
			po.mu.Unlock()
		})
	}
}

// A look in vain makes the next calls return at once, more of them after
// each one in a row; a look that pays ends the back-off.
func TestBusyPollBacksOff(t *testing.T) {
	po := newPollOnly()
	bo := &busyOnly{pollOnly: po, t: t}
	d, err := New(Config{HoldLimit: time.Hour, Backend: bo})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	c, err := cq.New(64, cq.Config{})
	require.NoError(t, err)
	q := &owingQP{dev: d, cq: c}
	qpn, err := d.AddQP(q)
	require.NoError(t, err)
	var batches atomic.Int32
	defer d.OnReceiveBatch(func() {}, func() { batches.Add(1) })()
	// Each call: whether a packet waits, and whether the call looks.
	calls := []struct {
		packet, looks bool
	}{
		{false, true},                                  // in vain: skip 1
		{true, false},                                  // skipped (the packet stays)
		{false, true},                                  // takes it: pays, no back-off
		{false, true},                                  // in vain: skip 1
		{false, false},                                 //
		{false, true},                                  // in vain again: skip 3
		{false, false}, {false, false}, {false, false}, //
		{true, true}, // pays
		{true, true},
	}
	for i, call := range calls {
		if call.packet {
			po.queue(t, qpn, "x")
		}
		before := bo.begins.Load()
		n := batches.Load()
		d.BusyPoll(time.Millisecond, func() bool { return batches.Load() > n })
		require.Equal(t, call.looks, bo.begins.Load() > before, "call %d looks", i)
	}
	require.EqualValues(t, 3, d.Counters.BusyPollMisses.Load())
}
