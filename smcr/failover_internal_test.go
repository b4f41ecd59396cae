package smcr

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A failover validation takes back what the CDCs after the one it names
// announced (never what was read, or handed out), and one that names a
// CDC not handled yet (its link's completions are behind) takes back
// nothing and is no violation.
func TestValidateTakesBack(t *testing.T) {
	hist := func(s *smcConn, marks ...rxMark) {
		for _, m := range marks {
			s.rxHist[s.rxHistN%rxHistLen] = m
			s.rxHistN++
			s.rxSeq, s.rxSeen = m.seq, true
		}
	}
	for _, tt := range []struct {
		name             string
		seq              uint16
		consumed, handed uint64
		wantProduced     uint64
		wantRewound      bool
	}{
		{"the last handled: nothing to take back", 7, 10, 0, 300, false},
		{"an earlier one: back to it", 5, 10, 0, 100, true},
		{"an earlier one, read past it: back to what was read", 5, 150, 0, 150, true},
		{"an earlier one, handed past it: back to what was handed", 5, 10, 190, 200, true},
		{"none completed: back to what was read", 0, 10, 0, 10, true},
		{"one not handled yet: nothing", 9, 10, 0, 300, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &smcConn{rmb: make([]byte, 1024), consumed: tt.consumed, handed: tt.handed}
			hist(s, rxMark{5, 100}, rxMark{6, 200}, rxMark{7, 300})
			s.produced, s.prodC = 300, cursorOf(300, 1024)
			s.validateLocked(tt.seq)
			assert.Nil(t, s.err)
			assert.Equal(t, tt.wantProduced, s.produced)
			assert.Equal(t, cursorOf(tt.wantProduced, 1024), s.prodC)
			assert.Equal(t, tt.wantRewound, s.rewound)
		})
	}
}

// A client's relink with no device to ask with (the lost one is still
// down) makes no attempt, and so takes nothing of the back-off: when the
// path returns, the next look comes after the base wait, not after a wait
// doubled by every look while it was gone.
func TestRelinkWithNoDeviceKeepsTheBackOff(t *testing.T) {
	d1, d2 := &smcDevice{}, &smcDevice{}
	d2.gone.Store(true)
	d2.downUntil.Store(mono() + int64(time.Hour))
	l := &link{dev: d1}
	l.state.Store(int32(linkActive))
	g := &linkGroup{lgrKey: lgrKey{role: roleClient}, st: &stack{devs: []*smcDevice{d1, d2}}}
	g.links[0] = l
	g.relinkWait = 40 * time.Second // four failed attempts
	before := mono()
	for range 3 {
		g.relink()
	}
	assert.Equal(t, 40*time.Second, g.relinkWait, "no attempt, no back-off")
	assert.LessOrEqual(t, g.relinkAt, mono()+int64(relinkInterval), "the next look after the base wait")
	assert.Greater(t, g.relinkAt, before)
}
