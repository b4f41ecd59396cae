package device

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
)

// qpTable routes QP numbers to handlers. A QP number is drawn at random
// from the whole 24-bit space, from crypto/rand as rkeys are (mr.go), and
// its low 14 bits name its slot in a dense table of MaxQP: a draw whose
// slot is taken is drawn again. So:
//
//   - a stranger cannot guess a live QP's number, nor learn one from
//     another: a sweep of the space hits a live QP with odds of
//     live/2^24 per packet, where numbers FirstQPN+slot gave live/MaxQP;
//   - a number is not reused at once: a slot's next number is never its
//     last, and any other earlier number comes back only by a fresh draw
//     (odds 2^-24), so neither a QP destroyed a moment ago nor a
//     predecessor process leaves a number whose peers, still
//     retransmitting to it, would meet the new QP;
//   - a lookup on the receive path is a mask, one atomic load and a
//     compare of the slot's number, what the dense table's bounds check
//     and load cost (BenchmarkQPLookup); adds and removes take a mutex.
type qpTable struct {
	slots *[MaxQP]atomic.Pointer[qpSlot]

	mu   sync.Mutex
	used int
	last *[MaxQP]uint32 // each slot's latest number
	draw func() uint32  // a random 24-bit number (randomQPN; tests replace it)
}

type qpSlot struct {
	h   QPHandler
	qpn uint32
}

const (
	qpSlotMask = MaxQP - 1
	qpnMask    = 1<<24 - 1
	// multicastQPN is the QP number of every multicast packet (IBTA
	// 9.2.3.1); numbers below FirstQPN are reserved too.
	multicastQPN = 0xFFFFFF
	// qpnDraws is how many numbers add draws before it looks for a free
	// slot itself: only a nearly full table needs that many.
	qpnDraws = 64
)

var _ = [1]struct{}{}[MaxQP&qpSlotMask] // MaxQP must be a power of 2

func (t *qpTable) init() {
	t.slots = new([MaxQP]atomic.Pointer[qpSlot])
	t.last = new([MaxQP]uint32)
	t.draw = randomQPN
}

func (t *qpTable) add(h QPHandler) (uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.used == MaxQP {
		return 0, fmt.Errorf("device: create QP: all %d QPs are in use: destroy some first", MaxQP)
	}
	free := -1 // a free slot found by search, once the draws have missed
	for i := 0; ; i++ {
		qpn := t.draw() & qpnMask
		if free >= 0 {
			qpn = qpn&^qpSlotMask | uint32(free)
		}
		slot := qpn & qpSlotMask
		if qpn < FirstQPN || qpn == multicastQPN || qpn == t.last[slot] || t.slots[slot].Load() != nil {
			if i == qpnDraws {
				free = t.freeSlot(qpn)
			}
			continue
		}
		t.slots[slot].Store(&qpSlot{h: h, qpn: qpn})
		t.last[slot] = qpn
		t.used++
		return qpn, nil
	}
}

// freeSlot returns the first free slot from a random start. The caller
// holds mu and has checked that there is one.
func (t *qpTable) freeSlot(start uint32) int {
	for i := range uint32(MaxQP) {
		if s := (start + i) & qpSlotMask; t.slots[s].Load() == nil {
			return int(s)
		}
	}
	panic("device: QP table: no free slot, but fewer than MaxQP QPs")
}

func randomQPN() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return binary.LittleEndian.Uint32(b[:]) & qpnMask
}

func (t *qpTable) remove(qpn uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := &t.slots[qpn&qpSlotMask]
	if s := p.Load(); s != nil && s.qpn == qpn {
		p.Store(nil)
		t.used--
	}
}

func (t *qpTable) lookup(qpn uint32) QPHandler {
	s := t.slots[qpn&qpSlotMask].Load()
	if s == nil || s.qpn != qpn {
		return nil
	}
	return s.h
}
