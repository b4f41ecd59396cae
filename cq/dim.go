package cq

import "time"

// DIM is RDMA dynamic interrupt moderation (lib/dim/rdma_dim.c) for one CQ.
// Every poller run is one event carrying the completions it handled; every
// DIMEvents events DIM compares the window's completion rate and
// completions-per-event with the previous window and steps through
// DIMProfiles, hill-climbing towards the profile that handles the most
// completions per millisecond. It is not goroutine-safe: one poller feeds
// it (a CQ runs on one goroutine at a time).
type DIM struct {
	state   DIMState
	tune    DIMTune
	profile int

	events, comps uint64 // the measuring sample
	start         dimSample
	prev          DIMStats
}

type dimSample struct {
	events, comps uint64
	at            time.Time
}

// DIMProfile is one moderation setting: raise the CQ event once Comps
// completions wait, or Usec microseconds after the first.
type DIMProfile struct {
	Usec  int
	Comps int
}

// DIMProfiles is rdma_dim_prof: from no moderation to 32 completions / 32 µs.
var DIMProfiles = [...]DIMProfile{{1, 1}, {1, 4}, {2, 4}, {2, 8}, {4, 8}, {16, 8}, {16, 16}, {32, 16}, {32, 32}}

// DIMEvents is the sampling window in events (DIM_NEVENTS).
const DIMEvents = 64

// DIMState is the measuring state (enum dim_state).
type DIMState uint8

const (
	DIMStartMeasure      DIMState = iota // the next event opens a window
	DIMMeasureInProgress                 // counting events in the window
	DIMApplyNewProfile                   // a new profile waits to be applied
)

// DIMTune is the direction of the hill climb (enum dim_tune_state).
type DIMTune uint8

const (
	DIMGoingRight DIMTune = iota // towards more moderation
	DIMGoingLeft                 // towards less
)

// DIMStats are one window's rates (struct dim_stats, the fields RDMA DIM uses).
type DIMStats struct {
	CPMS     uint64 // completions per millisecond
	EPMS     uint64 // events per millisecond
	CPERatio uint64 // 100 × completions per event
}

// NewDIM returns a DIM at profile 0 going right, as ib_cq_rdma_dim_init does.
func NewDIM() *DIM { return &DIM{state: DIMStartMeasure, tune: DIMGoingRight} }

// Profile returns the current profile index into DIMProfiles.
func (d *DIM) Profile() int { return d.profile }

// State returns the measuring state.
func (d *DIM) State() DIMState { return d.state }

// Tune returns the direction of the climb.
func (d *DIM) Tune() DIMTune { return d.tune }

// Sample records one event that handled completions at time now (rdma_dim).
// It returns true when the profile changed: the caller applies
// DIMProfiles[Profile()] to the CQ and then calls Applied; until then DIM
// keeps counting but decides nothing.
func (d *DIM) Sample(now time.Time, completions int) (apply bool) {
	d.events++
	d.comps += uint64(completions)
	switch d.state {
	case DIMMeasureInProgress:
		if d.events-d.start.events < DIMEvents {
			return false
		}
		stats, ok := d.stats(now)
		if !ok {
			return false // no time passed: keep measuring
		}
		if d.decide(stats) {
			d.state = DIMApplyNewProfile
			return true
		}
		d.restart(now)
	case DIMStartMeasure:
		d.restart(now)
	case DIMApplyNewProfile:
	}
	return false
}

// Applied reports that the new profile is in force; measuring starts over.
func (d *DIM) Applied() {
	if d.state == DIMApplyNewProfile {
		d.state = DIMStartMeasure
	}
}

func (d *DIM) restart(now time.Time) {
	d.state = DIMMeasureInProgress
	d.start = dimSample{events: d.events, comps: d.comps, at: now}
}

// stats computes the window's rates (dim_calc_stats). Like the kernel it
// divides DIMEvents, not the exact event count, by the elapsed time.
func (d *DIM) stats(now time.Time) (DIMStats, bool) {
	us := uint64(now.Sub(d.start.at) / time.Microsecond)
	if us == 0 {
		return DIMStats{}, false
	}
	ncomps := d.comps - d.start.comps
	s := DIMStats{
		CPMS: divRoundUp(ncomps*1000, us),
		EPMS: divRoundUp(DIMEvents*1000, us),
	}
	if s.EPMS != 0 {
		s.CPERatio = s.CPMS * 100 / s.EPMS
	}
	return s, true
}

func divRoundUp(a, b uint64) uint64 { return (a + b - 1) / b }

// dimCompare is rdma_dim_stats_compare's verdict.
type dimCompare int8

const (
	dimWorse  dimCompare = -1
	dimSame   dimCompare = 0
	dimBetter dimCompare = 1
)

// significant reports a change of more than 10 % (IS_SIGNIFICANT_DIFF).
func significant(val, ref uint64) bool {
	if ref == 0 {
		return false
	}
	diff := val - ref
	if val < ref {
		diff = ref - val
	}
	return 100*diff/ref > 10
}

func compareStats(curr, prev DIMStats) dimCompare {
	if prev.CPMS == 0 {
		return dimSame // the first window
	}
	if significant(curr.CPMS, prev.CPMS) {
		if curr.CPMS > prev.CPMS {
			return dimBetter
		}
		return dimWorse
	}
	if significant(curr.CPERatio, prev.CPERatio) {
		if curr.CPERatio > prev.CPERatio {
			return dimBetter
		}
		return dimWorse
	}
	return dimSame
}

// decide is rdma_dim_decision: it moves the profile and reports whether it
// changed.
func (d *DIM) decide(curr DIMStats) bool {
	prevIx := d.profile
	switch compareStats(curr, d.prev) {
	case dimSame:
		// Few completions per event at a moderated profile: moderation is
		// only adding latency, go back to none.
		if curr.CPERatio <= 50*uint64(prevIx) {
			d.profile = 0
		}
	case dimWorse:
		d.turn()
		fallthrough
	case dimBetter:
		if !d.step() {
			d.turn() // stepped off an end
		}
	}
	d.prev = curr
	return d.profile != prevIx
}

func (d *DIM) turn() {
	if d.tune == DIMGoingRight {
		d.tune = DIMGoingLeft
	} else {
		d.tune = DIMGoingRight
	}
}

// step moves one profile in the current direction; false at an edge.
func (d *DIM) step() bool {
	if d.tune == DIMGoingRight {
		if d.profile == len(DIMProfiles)-1 {
			return false
		}
		d.profile++
		return true
	}
	if d.profile == 0 {
		return false
	}
	d.profile--
	return true
}

// feedDIM gives one run's completions to the CQ's DIM and applies a new
// profile at once (the kernel defers it to a work item; here the poller is
// already in the right context).
func (m *Managed) feedDIM(completions int) {
	if !m.dim.Sample(time.Now(), completions) {
		return
	}
	p := DIMProfiles[m.dim.Profile()]
	m.SetModeration(p.Comps, time.Duration(p.Usec)*time.Microsecond)
	m.profile.Store(int32(m.dim.Profile()))
	m.dim.Applied()
}
