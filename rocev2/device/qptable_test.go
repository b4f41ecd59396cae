package device

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

type nopQP struct{}

func (nopQP) HandlePacket(*rocev2.Packet, *backend.Incoming) bool { return true }

func newQPTable() *qpTable {
	t := new(qpTable)
	t.init()
	return t
}

// QP numbers come from the whole 24-bit space, never a reserved one, and
// every one routes to its own handler and no other number does.
func TestQPNumbersSpreadOverTheSpace(t *testing.T) {
	tb := newQPTable()
	handlers := map[uint32]*recordingQP{}
	var high, low int
	for range 2000 {
		h := &recordingQP{}
		qpn, err := tb.add(h)
		require.NoError(t, err)
		require.GreaterOrEqual(t, qpn, uint32(FirstQPN))
		require.Less(t, qpn, uint32(multicastQPN))
		require.NotContains(t, handlers, qpn)
		handlers[qpn] = h
		if qpn >= 1<<23 {
			high++
		}
		if qpn < FirstQPN+MaxQP {
			low++
		}
	}
	for qpn, h := range handlers {
		require.Same(t, h, tb.lookup(qpn))
		other := qpn ^ 1<<20 // the same slot, another number
		if _, live := handlers[other]; !live {
			require.Nil(t, tb.lookup(other))
		}
		require.Nil(t, tb.lookup(qpn|1<<24), "a number beyond 24 bits")
	}
	// Binomial(2000, 1/2): 850 is more than 6 standard deviations off.
	assert.Greater(t, high, 850, "numbers in the upper half of the space")
	assert.Less(t, low, 20, "numbers where the dense numbering put them all (expected 2)")
	assert.Nil(t, tb.lookup(multicastQPN))
	assert.Nil(t, tb.lookup(0))
}

// A slot freed and taken again gets a new number, and the old one routes
// nowhere; removing a number its slot no longer holds changes nothing.
func TestQPNumberNotReusedAtOnce(t *testing.T) {
	tb := newQPTable()
	first, err := tb.add(nopQP{})
	require.NoError(t, err)
	qpn := first
	for range 200 {
		tb.remove(qpn)
		require.Nil(t, tb.lookup(qpn))
		prev := qpn
		qpn, err = tb.add(nopQP{})
		require.NoError(t, err)
		require.NotEqual(t, prev, qpn)
	}
	tb.remove(first)
	require.NotNil(t, tb.lookup(qpn))
	assert.Equal(t, 1, tb.used)
}

// A slot's next number is never its last one, even where the draws leave
// no other choice of slot: the table is full but for that slot.
func TestQPNumberOfAFreedSlotDiffers(t *testing.T) {
	tb := newQPTable()
	var qpns []uint32
	for range MaxQP {
		qpn, err := tb.add(nopQP{})
		require.NoError(t, err)
		qpns = append(qpns, qpn)
	}
	_, err := tb.add(nopQP{})
	require.ErrorContains(t, err, "destroy some first")
	for _, qpn := range qpns[:50] {
		tb.remove(qpn)
		again, err := tb.add(nopQP{})
		require.NoError(t, err)
		assert.Equal(t, qpn&qpSlotMask, again&qpSlotMask, "the only free slot")
		assert.NotEqual(t, qpn, again)
		assert.NotNil(t, tb.lookup(again))
		assert.Nil(t, tb.lookup(qpn))
	}
}

// Two devices (two processes) number their QPs independently.
func TestQPNumbersDifferPerDevice(t *testing.T) {
	a, b := newQPTable(), newQPTable()
	same := 0
	for range 8 {
		x, err := a.add(nopQP{})
		require.NoError(t, err)
		y, err := b.add(nopQP{})
		require.NoError(t, err)
		if x == y {
			same++
		}
	}
	assert.Less(t, same, 8)
}

// A reserved number, a taken slot's number or a slot's last number is
// drawn again; when the draws keep missing, add searches for a free slot.
func TestQPNumberDrawsAgain(t *testing.T) {
	tb := newQPTable()
	taken, err := tb.add(nopQP{})
	require.NoError(t, err)
	tb.remove(taken)
	retaken, err := tb.add(nopQP{})
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		draws []uint32
		want  uint32
	}{
		{"reserved", []uint32{0, 1, FirstQPN - 1, multicastQPN, 0x123456}, 0x123456},
		{"beyond 24 bits", []uint32{1<<24 | 0x5, 0x234567}, 0x234567},
		{"a taken slot", []uint32{retaken ^ 1<<14, 0x345678}, 0x345678},
		{"a slot's last number", []uint32{taken, 0x456789}, 0x456789},
	} {
		t.Run(tc.name, func(t *testing.T) {
			draws := tc.draws
			tb.draw = func() uint32 { d := draws[0]; draws = draws[1:]; return d }
			qpn, err := tb.add(nopQP{})
			require.NoError(t, err)
			assert.Equal(t, tc.want, qpn)
			assert.Empty(t, draws)
			tb.remove(qpn)
		})
	}
	t.Run("the draws keep missing", func(t *testing.T) {
		n := 0
		tb.draw = func() uint32 { n++; return retaken } // its slot is taken
		qpn, err := tb.add(nopQP{})
		require.NoError(t, err)
		assert.Equal(t, qpnDraws+2, n, "the draws, then one for the free slot")
		assert.NotEqual(t, retaken&qpSlotMask, qpn&qpSlotMask)
		assert.Equal(t, retaken&^qpSlotMask, qpn&^qpSlotMask, "the last draw's upper bits")
	})
}
