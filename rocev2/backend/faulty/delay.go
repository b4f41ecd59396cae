package faulty

import (
	"time"

	"github.com/goroce/goroce/rocev2/backend"
)

// delayLoop sends delayed packets when their time comes, and reordered ones
// that waited too long. It is the only goroutine of a Backend, started by
// Wrap when Delay or Reorder is set and ended by Close; it owns one timer,
// armed for the earliest head of the two queues. Every packet of a queue
// waits the same time, so each queue is in release order and only a new
// head (the queue was empty) needs a wake-up.
func (b *Backend) delayLoop() {
	defer close(b.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var batch []backend.Outgoing
	for {
		b.mu.Lock()
		now := time.Now()
		due := 0
		for due < len(b.delayQ) && !b.delayQ[due].at.After(now) {
			batch = append(batch, b.delayQ[due].d)
			due++
		}
		n := copy(b.delayQ, b.delayQ[due:])
		clear(b.delayQ[n:]) // the pool owns those buffers now
		b.delayQ = b.delayQ[:n]
		due = 0
		for due < len(b.reorderQ) && !b.reorderQ[due].at.After(now) {
			batch = append(batch, b.reorderQ[due].d)
			due++
		}
		n = copy(b.reorderQ, b.reorderQ[due:])
		clear(b.reorderQ[n:])
		b.reorderQ = b.reorderQ[:n]
		wait := time.Duration(-1)
		for _, q := range [][]held{b.delayQ, b.reorderQ} {
			if len(q) > 0 && (wait < 0 || q[0].at.Sub(now) < wait) {
				wait = q[0].at.Sub(now)
			}
		}
		b.mu.Unlock()

		if len(batch) > 0 {
			if b.inner.Send(batch) != nil {
				b.stats.sendErrors.Add(1)
			}
			b.stats.forwarded.Add(uint64(len(batch)))
			b.mu.Lock()
			for _, d := range batch {
				b.pool = append(b.pool, d.Buf)
			}
			b.mu.Unlock()
			clear(batch)
			batch = batch[:0]
			continue // more may have come due meanwhile
		}
		if wait >= 0 {
			timer.Reset(wait)
		}
		select {
		case <-b.stop:
			return
		case <-b.wake:
		case <-timer.C:
		}
	}
}
