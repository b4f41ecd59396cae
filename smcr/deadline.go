package smcr

import (
	"sync"
	"time"
)

// deadline is one direction's deadline of an SMC-R connection, for
// net.Conn's SetReadDeadline and SetWriteDeadline: a channel that is
// closed once the deadline has passed, so that a blocked Read or Write
// selects on it beside its wake-up. Setting a new deadline re-opens it.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{}
	// onFire, if set, runs once the deadline has passed (not under mu):
	// a Read that serves its device while it waits (device.WaitOn) has no
	// channel to select on, and is kicked instead.
	onFire func()
}

func newDeadline() *deadline { return &deadline{cancel: make(chan struct{})} }

// set arms the deadline for t; the zero time means none.
func (d *deadline) set(t time.Time) {
	if d.arm(t) && d.onFire != nil {
		d.onFire()
	}
}

// arm is set under mu, without onFire; it reports whether t has passed
// already.
func (d *deadline) arm(t time.Time) (passed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer fired: its close happened, wait is done
	}
	d.timer = nil
	closed := isClosed(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return false
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		cancel, fire := d.cancel, d.onFire
		d.timer = time.AfterFunc(dur, func() {
			close(cancel)
			if fire != nil {
				fire()
			}
		})
		return false
	}
	if !closed {
		close(d.cancel)
	}
	return true
}

// passed reports whether the deadline has passed.
func (d *deadline) passed() bool { return isClosed(d.wait()) }

// wait returns the channel that is closed when the deadline passes.
func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

// stop releases the timer.
func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
