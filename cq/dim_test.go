package cq

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The decision of one window against the previous one (rdma_dim_decision).
func TestDIMDecide(t *testing.T) {
	st := func(cpms, cpe uint64) DIMStats { return DIMStats{CPMS: cpms, EPMS: 100, CPERatio: cpe} }
	for _, tc := range []struct {
		name        string
		profile     int
		tune        DIMTune
		prev, curr  DIMStats
		wantProfile int
		wantTune    DIMTune
		wantChanged bool
	}{
		{"first window is SAME", 0, DIMGoingRight, DIMStats{}, st(1000, 100), 0, DIMGoingRight, false},
		{"better rate steps right", 0, DIMGoingRight, st(1000, 100), st(1200, 100), 1, DIMGoingRight, true},
		{"better rate keeps going left", 4, DIMGoingLeft, st(1000, 100), st(1200, 100), 3, DIMGoingLeft, true},
		{"worse rate turns and steps", 3, DIMGoingRight, st(1000, 400), st(800, 400), 2, DIMGoingLeft, true},
		{"worse going left turns right", 2, DIMGoingLeft, st(1000, 400), st(800, 400), 3, DIMGoingRight, true},
		{"same rate, better ratio steps", 2, DIMGoingRight, st(1000, 200), st(1050, 300), 3, DIMGoingRight, true},
		{"same rate, worse ratio turns", 2, DIMGoingRight, st(1000, 300), st(1050, 200), 1, DIMGoingLeft, true},
		{"exactly 10% is not significant", 2, DIMGoingRight, st(1000, 300), st(1100, 330), 2, DIMGoingRight, false},
		{"same with low ratio resets to 0", 3, DIMGoingRight, st(1000, 150), st(1000, 150), 0, DIMGoingRight, true},
		{"same with high ratio stays", 3, DIMGoingRight, st(1000, 151), st(1000, 151), 3, DIMGoingRight, false},
		{"same at 0 stays", 0, DIMGoingRight, st(1000, 0), st(1000, 0), 0, DIMGoingRight, false},
		{"better at the right edge turns", 8, DIMGoingRight, st(1000, 900), st(2000, 900), 8, DIMGoingLeft, false},
		{"worse at the left edge going right bounces", 0, DIMGoingRight, st(1000, 100), st(500, 100), 0, DIMGoingRight, false},
		{"worse at the left edge going left steps right", 0, DIMGoingLeft, st(1000, 100), st(500, 100), 1, DIMGoingRight, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &DIM{profile: tc.profile, tune: tc.tune, prev: tc.prev}
			changed := d.decide(tc.curr)
			assert.Equal(t, tc.wantProfile, d.Profile())
			assert.Equal(t, tc.wantTune, d.Tune())
			assert.Equal(t, tc.wantChanged, changed)
			assert.Equal(t, tc.curr, d.prev, "the window becomes the reference")
		})
	}
}

// A window's rates (dim_calc_stats), with the kernel's rounding.
func TestDIMStats(t *testing.T) {
	for _, tc := range []struct {
		name    string
		comps   uint64
		elapsed time.Duration
		want    DIMStats
		ok      bool
	}{
		{"one per event over 64 us", 64, 64 * time.Microsecond, DIMStats{CPMS: 1000, EPMS: 1000, CPERatio: 100}, true},
		{"eight per event over 1 ms", 512, time.Millisecond, DIMStats{CPMS: 512, EPMS: 64, CPERatio: 800}, true},
		{"rounds up", 1, 3 * time.Microsecond, DIMStats{CPMS: 334, EPMS: 21334, CPERatio: 1}, true},
		{"no time passed", 64, 0, DIMStats{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Unix(0, 0)
			d := &DIM{start: dimSample{at: t0}, comps: tc.comps, events: DIMEvents}
			got, ok := d.stats(t0.Add(tc.elapsed))
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

// feeder drives a DIM with synthetic samples on a synthetic clock.
type feeder struct {
	d   *DIM
	now time.Time
}

// window feeds one full window of events, each handling comps completions
// and taking gap, and reports whether the last event asked for a new profile.
func (f *feeder) window(comps int, gap time.Duration) (apply bool) {
	for i := 0; i < DIMEvents; i++ {
		f.now = f.now.Add(gap)
		if f.d.Sample(f.now, comps) {
			if i != DIMEvents-1 {
				panic("decided mid-window")
			}
			return true
		}
	}
	return false
}

// The measuring state machine: a window opens on the first event, decides
// after DIMEvents more, waits in APPLY until Applied, then starts over.
func TestDIMStateMachine(t *testing.T) {
	f := &feeder{d: NewDIM(), now: time.Unix(0, 0)}
	require.Equal(t, DIMStartMeasure, f.d.State())
	require.False(t, f.d.Sample(f.now, 1))
	require.Equal(t, DIMMeasureInProgress, f.d.State())

	// The first full window only sets the reference.
	assert.False(t, f.window(1, 10*time.Microsecond))
	assert.Equal(t, DIMMeasureInProgress, f.d.State())
	// A much better one (more completions per event) steps right.
	require.True(t, f.window(8, 10*time.Microsecond))
	assert.Equal(t, DIMApplyNewProfile, f.d.State())
	assert.Equal(t, 1, f.d.Profile())
	// While the profile is being applied, samples decide nothing.
	for i := 0; i < 3*DIMEvents; i++ {
		f.now = f.now.Add(time.Microsecond)
		assert.False(t, f.d.Sample(f.now, 1000))
	}
	f.d.Applied()
	assert.Equal(t, DIMStartMeasure, f.d.State())
	assert.False(t, f.d.Sample(f.now, 8)) // opens the window
	assert.Equal(t, DIMMeasureInProgress, f.d.State())
}

// Under steadily growing load DIM climbs towards more moderation; when the
// load falls to one completion per event it returns to profile 0, so a
// quiet CQ is never moderated.
func TestDIMClimbsUnderLoadAndResetsWhenQuiet(t *testing.T) {
	f := &feeder{d: NewDIM(), now: time.Unix(0, 0)}
	f.d.Sample(f.now, 1)
	f.window(2, 10*time.Microsecond)
	comps := 2
	for i := 0; i < 5; i++ {
		comps = comps * 3 / 2
		if f.window(comps, 10*time.Microsecond) {
			f.d.Applied()
			f.d.Sample(f.now, comps)
		}
	}
	assert.Equal(t, 5, f.d.Profile(), "five better windows, five steps right")
	// Load drops: fewer completions per event (worse) until the climb
	// turns; then steady low load (same, low ratio) resets to 0.
	for i := 0; i < 10 && f.d.Profile() != 0; i++ {
		if f.window(1, 10*time.Microsecond) {
			f.d.Applied()
			f.d.Sample(f.now, 1)
		}
	}
	assert.Equal(t, 0, f.d.Profile())
}

// A moderated pooled CQ runs once comps completions wait, or after the
// period for fewer: whether an event was held back is decided inside the
// push that raised it, so the test checks it right after the push.
func TestModeration(t *testing.T) {
	ctx := guardCtx(t)
	setup := func(t *testing.T, comps int, period time.Duration) (*Lease, *countEntry) {
		p := newTestPool(t, PoolConfig{Vectors: 1, NoDIM: true})
		l, err := p.Get(16, 0, PollSoftIRQ)
		require.NoError(t, err)
		l.Managed().SetModeration(comps, period)
		return l, &countEntry{}
	}
	t.Run("count", func(t *testing.T) {
		l, e := setup(t, 4, time.Hour)
		for i := 0; i < 3; i++ {
			require.NoError(t, push(l.SendCQ(), &WC{Entry: e}, false))
			require.False(t, l.Managed().queued.Load(), "held back with %d of 4 waiting", i+1)
		}
		require.NoError(t, push(l.SendCQ(), &WC{Entry: e}, false))
		waitFor(t, ctx, "the fourth completion to run the CQ", func() bool { return e.n.Load() == 4 })
	})
	t.Run("period", func(t *testing.T) {
		l, e := setup(t, 4, time.Microsecond)
		require.NoError(t, push(l.SendCQ(), &WC{Entry: e}, false))
		waitFor(t, ctx, "a lone completion after the period", func() bool { return e.n.Load() == 1 })
	})
	t.Run("off", func(t *testing.T) {
		l, e := setup(t, 1, time.Hour)
		require.NoError(t, push(l.SendCQ(), &WC{Entry: e}, false))
		waitFor(t, ctx, "an unmoderated completion", func() bool { return e.n.Load() == 1 })
	})
}
