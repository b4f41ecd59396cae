package device

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// qpTable routes QP numbers to handlers. Lookups on the receive path are a
// bounds check and an atomic load; adds and removes take a mutex.
type qpTable struct {
	mu    sync.Mutex
	slots []atomic.Pointer[qpSlot]
	next  int // where the search for a free slot starts, so numbers are not reused at once
}

type qpSlot struct{ h QPHandler }

// init starts the numbering at a random slot: a new process's first QP
// then does not take the number its predecessor's peers may still be
// retransmitting to (a peer's packets for a QP that is gone would meet a
// new QP with the same number and be NAKed as out of sequence), and a
// stranger cannot guess a QP number.
func (t *qpTable) init() {
	t.slots = make([]atomic.Pointer[qpSlot], MaxQP)
	t.next = rand.IntN(MaxQP)
}

func (t *qpTable) add(h QPHandler) (uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := 0; i < len(t.slots); i++ {
		idx := (t.next + i) % len(t.slots)
		if t.slots[idx].Load() == nil {
			t.slots[idx].Store(&qpSlot{h})
			t.next = idx + 1
			return uint32(FirstQPN + idx), nil
		}
	}
	return 0, fmt.Errorf("device: create QP: all %d QP numbers are in use", len(t.slots))
}

func (t *qpTable) remove(qpn uint32) {
	idx := int(qpn) - FirstQPN
	if idx >= 0 && idx < len(t.slots) {
		t.slots[idx].Store(nil)
	}
}

func (t *qpTable) lookup(qpn uint32) QPHandler {
	var s *qpSlot
	if idx := int(qpn) - FirstQPN; idx >= 0 && idx < len(t.slots) {
		s = t.slots[idx].Load()
	}
	if s == nil {
		return nil
	}
	return s.h
}
