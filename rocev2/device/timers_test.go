package device

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTimersFireInOrderAndOnce(t *testing.T) {
	tm := NewTimers()
	defer tm.Close()
	fired := make(chan int, 10)
	var a, b, c Timer
	a.Init(func() { fired <- 1 })
	b.Init(func() { fired <- 2 })
	c.Init(func() { fired <- 3 })
	tm.Reset(&c, 30*time.Millisecond)
	tm.Reset(&a, 10*time.Millisecond)
	tm.Reset(&b, 20*time.Millisecond)
	var got []int
	for i := 0; i < 3; i++ {
		select {
		case v := <-fired:
			got = append(got, v)
		case <-time.After(5 * time.Second):
			t.Fatal("timer did not fire")
		}
	}
	assert.Equal(t, []int{1, 2, 3}, got)
	assert.False(t, tm.Armed(&a))
	select {
	case v := <-fired:
		t.Fatalf("timer %d fired twice", v)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestTimersResetLaterAndStop(t *testing.T) {
	tm := NewTimers()
	defer tm.Close()
	fired := make(chan time.Time, 2)
	var a, b Timer
	a.Init(func() { fired <- time.Now() })
	b.Init(func() { fired <- time.Time{} })
	start := time.Now()
	tm.Reset(&a, 5*time.Millisecond)
	tm.Reset(&a, 60*time.Millisecond) // later: lazily re-queued
	tm.Reset(&b, 5*time.Millisecond)
	tm.Stop(&b)
	select {
	case when := <-fired:
		require.False(t, when.IsZero(), "stopped timer fired")
		assert.GreaterOrEqual(t, when.Sub(start), 60*time.Millisecond)
	case <-time.After(5 * time.Second):
		t.Fatal("timer did not fire")
	}
}

func TestTimersCloseStopsGoroutine(t *testing.T) {
	tm := NewTimers()
	var a Timer
	a.Init(func() { t.Error("fired after Close") })
	tm.Reset(&a, time.Hour)
	tm.Close()
	select {
	case <-tm.stopped:
	default:
		t.Fatal("goroutine still running")
	}
	tm.Close() // idempotent
}
