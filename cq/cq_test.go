package cq

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/internal/race"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPollOrderAndWrap(t *testing.T) {
	c, err := New(4, Config{})
	require.NoError(t, err)
	buf := make([]WC, 3)
	next := uint64(0)
	for round := 0; round < 5; round++ {
		for i := 0; i < 3; i++ {
			require.NoError(t, push(c, &WC{WRID: next + uint64(i)}, false))
		}
		n := c.Poll(buf[:2])
		require.Equal(t, 2, n)
		n += c.Poll(buf[2:])
		require.Equal(t, 3, n)
		for i := 0; i < 3; i++ {
			assert.Equal(t, next+uint64(i), buf[i].WRID)
		}
		next += 3
	}
	assert.Zero(t, c.Poll(buf))
}

func TestOverflowRaisesAsyncError(t *testing.T) {
	var got []error
	c, err := New(2, Config{OnAsyncError: func(e error) { got = append(got, e) }})
	require.NoError(t, err)
	require.NoError(t, push(c, &WC{WRID: 1}, false))
	require.NoError(t, push(c, &WC{WRID: 2}, false))
	require.ErrorIs(t, push(c, &WC{WRID: 3}, false), ErrOverflow)
	require.ErrorIs(t, c.Err(), ErrOverflow)
	require.Equal(t, []error{ErrOverflow}, got)
	// The completions before the overflow are still there.
	buf := make([]WC, 4)
	require.Equal(t, 2, c.Poll(buf))
	// The CQ stays in error: nothing is silently accepted again.
	require.ErrorIs(t, push(c, &WC{WRID: 4}, false), ErrOverflow)
}

func TestArmSemantics(t *testing.T) {
	for _, tc := range []struct {
		name      string
		solicited bool
		pushSol   bool
		status    Status
		fires     bool
	}{
		{"next fires on any", false, false, Success, true},
		{"solicited ignores unsolicited", true, false, Success, false},
		{"solicited fires on solicited", true, true, Success, true},
		{"solicited fires on error", true, false, RemAccessErr, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := 0
			c, err := New(8, Config{OnEvent: func() { events++ }})
			require.NoError(t, err)
			require.False(t, c.Arm(tc.solicited))
			require.NoError(t, push(c, &WC{Status: tc.status}, tc.pushSol))
			if tc.fires {
				assert.Equal(t, 1, events)
				assert.Len(t, c.Events(), 1)
			} else {
				assert.Zero(t, events)
				assert.Len(t, c.Events(), 0)
			}
			// Events are one-shot.
			require.NoError(t, push(c, &WC{}, true))
			assert.LessOrEqual(t, events, 1)
			assert.True(t, c.Arm(false), "completions are waiting: report them")
		})
	}
}

func TestUnarmedPushRaisesNoEvent(t *testing.T) {
	c, err := New(8, Config{})
	require.NoError(t, err)
	require.NoError(t, push(c, &WC{}, true))
	assert.Len(t, c.Events(), 0)
}

// The arm/missed-event race: a consumer that polls, arms and waits must
// never sleep while a completion waits, however the producer interleaves.
func TestArmRaceStrandsNothing(t *testing.T) {
	c, err := New(1024, Config{})
	require.NoError(t, err)
	const total = 200000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < total; i++ {
			for push(c, &WC{WRID: uint64(i)}, false) != nil {
				t.Error("overflow")
				return
			}
			if i%64 == 0 {
				for c.Len() > 512 { // let the consumer catch up
					runtime.Gosched() // yield only; correctness does not depend on it
				}
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	buf := make([]WC, 64)
	got := 0
	for got < total {
		n := c.Poll(buf)
		for i := 0; i < n; i++ {
			require.Equal(t, uint64(got+i), buf[i].WRID)
		}
		got += n
		if n > 0 {
			continue
		}
		if c.Arm(false) {
			continue
		}
		require.NoError(t, c.Wait(ctx), "stranded after %d completions", got)
	}
	wg.Wait()
}

func TestCloseWakesWaiters(t *testing.T) {
	c, err := New(8, Config{})
	require.NoError(t, err)
	done := make(chan error)
	go func() { done <- c.Wait(context.Background()) }()
	require.NoError(t, c.Close())
	require.ErrorIs(t, <-done, ErrClosed)
	require.ErrorIs(t, push(c, &WC{}, false), ErrClosed)
}

func TestNewRejectsBadDepth(t *testing.T) {
	_, err := New(0, Config{})
	require.Error(t, err)
	_, err = New(MaxDepth+1, Config{})
	require.Error(t, err)
}

func TestPollDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates; make test runs this without it")
	}
	c, err := New(64, Config{})
	require.NoError(t, err)
	buf := make([]WC, 16)
	wc := WC{WRID: 1}
	allocs := testing.AllocsPerRun(100, func() {
		for i := 0; i < 16; i++ {
			_ = push(c, &wc, false)
		}
		c.Poll(buf)
	})
	assert.Zero(t, allocs)
}

func TestStrings(t *testing.T) {
	assert.Equal(t, "IBV_WC_WR_FLUSH_ERR", WRFlushErr.String())
	assert.Equal(t, "IBV_WC_RETRY_EXC_ERR", RetryExcErr.String())
	assert.Equal(t, "IBV_WC_RECV_RDMA_WITH_IMM", OpRecvRDMAWithImm.String())
	assert.True(t, OpRecv.IsRecv())
	assert.False(t, OpSend.IsRecv())
}
