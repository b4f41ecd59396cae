package rocev2

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPSNArithmetic(t *testing.T) {
	for _, tc := range []struct {
		name          string
		a, b          PSN
		sub           int32
		before, after bool
	}{
		{"equal", 5, 5, 0, false, false},
		{"simple after", 6, 5, 1, false, true},
		{"simple before", 5, 6, -1, true, false},
		{"wrap: 0 is after max", 0, 0xFFFFFF, 1, false, true},
		{"wrap: max is before 0", 0xFFFFFF, 0, -1, true, false},
		{"half window minus one is after", 0x7FFFFF, 0, 0x7FFFFF, false, true},
		{"exactly half window is before", 0x800000, 0, -0x800000, true, false},
		{"far across wrap", 0x000010, 0xFFFFF0, 0x20, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.sub, tc.a.Sub(tc.b))
			assert.Equal(t, tc.before, tc.a.Before(tc.b))
			assert.Equal(t, tc.after, tc.a.After(tc.b))
		})
	}
}

func TestPSNAddAndRange(t *testing.T) {
	assert.Equal(t, PSN(0), PSN(0xFFFFFF).Add(1))
	assert.Equal(t, PSN(4), PSN(0xFFFFFE).Add(6))
	assert.Equal(t, PSN(0xFFFFFF), PSN(0).Add(0xFFFFFF))
	assert.True(t, PSN(0).InRange(0xFFFFFE, 2), "a span across the wrap")
	assert.True(t, PSN(0xFFFFFE).InRange(0xFFFFFE, 2))
	assert.True(t, PSN(2).InRange(0xFFFFFE, 2))
	assert.False(t, PSN(3).InRange(0xFFFFFE, 2))
	assert.False(t, PSN(0xFFFFFD).InRange(0xFFFFFE, 2))
	assert.True(t, PSN(0xFFFFFF).Valid())
	assert.False(t, PSN(0x1000000).Valid())
}
