package faulty

import (
	"time"

	"github.com/goroce/goroce/rocev2"
)

// delayLoop sends delayed packets when their time comes. It is the only
// goroutine of a Backend, started by Wrap when Delay is set and ended by
// Close; it owns one timer, armed for the head of the delay queue. Every
// packet waits the same Delay, so the queue is in release order and only a
// new head (the queue was empty) needs a wake-up.
func (b *Backend) delayLoop() {
	defer close(b.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var batch []rocev2.Datagram
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
		wait := time.Duration(-1)
		if len(b.delayQ) > 0 {
			wait = b.delayQ[0].at.Sub(now)
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
