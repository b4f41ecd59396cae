//go:build linux

package main

// Holds: the harness stops a client's stream at given points to act on
// the network meanwhile (the failover cases take a path away mid-echo).
// At hold N the writer creates PREFIX.N.reached and waits until PREFIX.N
// exists; the reader goes on reading what was sent before.

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// holds are a connection's hold points: stream offsets (bytes sent, in
// increasing order) and the files that mark them.
type holds struct {
	at     []uint64
	prefix string
	next   int // the next hold point
}

// until returns how many of the n bytes from stream offset off may be
// written before the next hold point.
func (h *holds) until(off uint64, n int) int {
	if h == nil || h.next >= len(h.at) || h.at[h.next] < off {
		return n
	}
	return int(min(uint64(n), h.at[h.next]-off))
}

// wait holds the stream at off if a hold point is there: it says so with
// PREFIX.N.reached and polls for PREFIX.N until deadline.
func (h *holds) wait(off uint64, deadline time.Time) error {
	for h != nil && h.next < len(h.at) && h.at[h.next] == off {
		name := h.prefix + "." + strconv.Itoa(h.next)
		if err := os.WriteFile(name+".reached", []byte(strconv.FormatUint(off, 10)+"\n"), 0o644); err != nil {
			return fmt.Errorf("hold %d: %w", h.next, err)
		}
		for {
			if _, err := os.Stat(name); err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("hold %d at byte %d: %s did not appear before the time limit", h.next, off, name)
			}
			time.Sleep(20 * time.Millisecond)
		}
		h.next++
	}
	return nil
}
