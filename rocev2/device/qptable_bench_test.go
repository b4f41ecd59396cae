package device

import (
	"sync/atomic"
	"testing"
)

// denseQPTable is the table before QP numbers were drawn at random (QPN =
// FirstQPN + slot), kept as BenchmarkQPLookup's baseline.
type denseQPTable struct{ slots []atomic.Pointer[qpSlot] }

func (t *denseQPTable) lookup(qpn uint32) QPHandler {
	var s *qpSlot
	if idx := int(qpn) - FirstQPN; idx >= 0 && idx < len(t.slots) {
		s = t.slots[idx].Load()
	}
	if s == nil {
		return nil
	}
	return s.h
}

// BenchmarkQPLookup compares the receive path's QP lookup, the dense
// table's bounds check and load against the random numbers' mask, load
// and compare: for live QPs (64 of them, in turn) and for numbers no QP
// has (for the dense table, numbers beyond it, as a sweep's mostly are).
func BenchmarkQPLookup(b *testing.B) {
	const live = 64
	random := newQPTable()
	dense := &denseQPTable{slots: make([]atomic.Pointer[qpSlot], MaxQP)}
	var randomQPNs, denseQPNs, strangers [live]uint32
	for i := range live {
		h := &recordingQP{}
		qpn, err := random.add(h)
		if err != nil {
			b.Fatal(err)
		}
		randomQPNs[i] = qpn
		dense.slots[i*7].Store(&qpSlot{h: h, qpn: uint32(FirstQPN + i*7)})
		denseQPNs[i] = uint32(FirstQPN + i*7)
		strangers[i] = uint32(i)*0x3F1A7 + 0x4100&0xFFFFFF
	}
	var sink QPHandler
	for _, bc := range []struct {
		name   string
		lookup func(uint32) QPHandler
		qpns   *[live]uint32
	}{
		{"dense/live", dense.lookup, &denseQPNs},
		{"random/live", random.lookup, &randomQPNs},
		{"dense/unknown", dense.lookup, &strangers},
		{"random/unknown", random.lookup, &strangers},
	} {
		b.Run(bc.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				sink = bc.lookup(bc.qpns[i%live])
				i++
			}
		})
	}
	_ = sink
}
