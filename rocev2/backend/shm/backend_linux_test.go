package shm

import (
	"net/netip"
	"testing"

	"github.com/goroce/goroce/rocev2/backend"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPairAndExchange(t *testing.T) {
	dir := runDir(t)
	a := openIn(t, dir, "127.0.0.1:4791", Config{})
	b := openIn(t, dir, "127.0.0.2:4791", Config{})
	const n = 100
	pkts := make([]backend.Outgoing, n)
	for i := range pkts {
		pkts[i] = backend.Outgoing{Buf: packet(32+i*40, byte(i)), Dst: b.LocalAddr()}
	}
	require.NoError(t, a.Send(pkts))
	got := receiveN(t, b, n)
	for i, d := range got {
		assert.Equal(t, pkts[i].Buf, d.Buf, "packet %d", i)
		assert.Equal(t, backend.ICRCOK, d.ICRC, "packet %d", i)
		assert.Equal(t, a.LocalAddr(), d.Src)
	}
	assert.Equal(t, LinkShm, a.LinkTo(b.LocalAddr()))
	assert.Equal(t, LinkShm, b.LinkTo(a.LocalAddr()))
	assert.Equal(t, []netip.AddrPort{b.LocalAddr()}, a.Peers())
	// And back, on the same pairing.
	require.NoError(t, b.Send([]backend.Outgoing{{Buf: packet(64, 7), Dst: a.LocalAddr()}}))
	back := receiveN(t, a, 1)
	assert.Equal(t, b.LocalAddr(), back[0].Src)
	assert.EqualValues(t, 1, a.Stats().Pairings)
	assert.EqualValues(t, 1, b.Stats().Pairings)
	// Peers of this process's own user are rung with raw writes (see
	// doorbell.raw), on both sides of the pairing.
	for _, be := range []*Backend{a, b} {
		be.rxMu.Lock()
		paired := 0
		for _, pr := range be.slots {
			if pr != nil {
				paired++
				assert.True(t, pr.bell.raw, "%v rings its peer raw", be.LocalAddr())
			}
		}
		be.rxMu.Unlock()
		assert.Equal(t, 1, paired)
	}
	t.Logf("a %+v\nb %+v", a.Stats(), b.Stats())
}

// Two backends that send to each other at once both dial; one pairing
// results (the lower address's dial), on both sides, and it carries both
// directions. Rounds enough to meet each order of the race: the answerer
// publishing what waited before the dialer mapped its ring (a lost
// wake-up once), a send while the peer's dial is being answered (once
// sent to a fallback there was none of).
func TestCrossedDialsPairOnce(t *testing.T) {
	for round := range 100 {
		dir := runDir(t)
		a := openIn(t, dir, "127.0.0.1:4791", Config{})
		b := openIn(t, dir, "127.0.0.2:4791", Config{})
		start := make(chan struct{})
		done := make(chan error, 2)
		for _, s := range [][2]*Backend{{a, b}, {b, a}} {
			go func() {
				<-start
				done <- s[0].Send([]backend.Outgoing{{Buf: packet(64, byte(round)), Dst: s[1].LocalAddr()}})
			}()
		}
		close(start)
		require.NoError(t, <-done)
		require.NoError(t, <-done)
		assert.Equal(t, a.LocalAddr(), receiveN(t, b, 1)[0].Src, "round %d", round)
		assert.Equal(t, b.LocalAddr(), receiveN(t, a, 1)[0].Src, "round %d", round)
		assert.EqualValues(t, 1, a.Stats().Pairings, "round %d: %+v", round, a.Stats())
		assert.EqualValues(t, 1, b.Stats().Pairings, "round %d: %+v", round, b.Stats())
		assert.Zero(t, a.Stats().Dropped+b.Stats().Dropped, "round %d", round)
		a.Close()
		b.Close()
	}
}

// While a receiver busy-polls, its peer rings no doorbell (no system
// call); when it stops, it says whether something came meanwhile, and the
// peer rings again for what comes after.
func TestBusyPollSilencesDoorbells(t *testing.T) {
	dir := runDir(t)
	a := openIn(t, dir, "127.0.0.1:4791", Config{})
	b := openIn(t, dir, "127.0.0.2:4791", Config{})
	var _ backend.BusyPoller = b
	send := func(n int) {
		t.Helper()
		pkts := make([]backend.Outgoing, n)
		for i := range pkts {
			pkts[i] = backend.Outgoing{Buf: packet(64, byte(i)), Dst: b.LocalAddr()}
		}
		require.NoError(t, a.Send(pkts))
	}
	take := func() int {
		t.Helper()
		n, err := b.TryReceive(make([]backend.Incoming, 16))
		require.NoError(t, err)
		return n
	}
	send(1)
	receiveN(t, b, 1) // paired
	require.False(t, b.EndBusyPoll(), "nothing waits: the receiver sleeps")
	steps := []struct {
		name      string
		do        func()
		doorbells uint64 // rung by a during the step
	}{
		{"asleep: a packet rings", func() { send(1); require.Equal(t, 1, take()) }, 1},
		{"busy-polled: packets ring nothing", func() { b.BeginBusyPoll(); send(3) }, 0},
		{"stopping reports what came", func() {
			require.True(t, b.EndBusyPoll())
			require.Equal(t, 3, take())
			require.False(t, b.EndBusyPoll())
		}, 0},
		{"asleep again: a packet rings", func() { send(1); require.Equal(t, 1, take()) }, 1},
	}
	for _, s := range steps {
		before := a.Stats().Doorbells
		s.do()
		require.Equal(t, s.doorbells, a.Stats().Doorbells-before, s.name)
	}
}
