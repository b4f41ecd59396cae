package rocev2

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSyndromeDecode(t *testing.T) {
	for _, tc := range []struct {
		s       Syndrome
		kind    SyndromeKind
		code    uint8
		credits int
		limited bool
		text    string
	}{
		{0x1F, KindACK, 31, 0, false, "ACK credits=unlimited"},
		{0x00, KindACK, 0, 0, true, "ACK credits=0"},
		{0x04, KindACK, 4, 4, true, "ACK credits=4"},
		{0x05, KindACK, 5, 6, true, "ACK credits=6"},
		{0x06, KindACK, 6, 8, true, "ACK credits=8"},
		{0x07, KindACK, 7, 12, true, "ACK credits=12"},
		{0x13, KindACK, 19, 768, true, "ACK credits=768"},
		{0x1D, KindACK, 29, 24576, true, "ACK credits=24576"},
		{0x1E, KindACK, 30, 32768, true, "ACK credits=32768"},
		{0x2C, KindRNR, 12, 0, false, "RNR timer=12"},
		{0x60, KindNAK, 0, 0, false, "NAK psn-sequence"},
		{0x61, KindNAK, 1, 0, false, "NAK invalid-request"},
		{0x62, KindNAK, 2, 0, false, "NAK remote-access"},
		{0x63, KindNAK, 3, 0, false, "NAK remote-operational"},
		{0x64, KindNAK, 4, 0, false, "NAK invalid-rd-request"},
		{0x65, KindNAK, 5, 0, false, "NAK reserved-5"},
		{0x40, KindReserved, 0, 0, false, "reserved syndrome 0x40"},
		{0x80, KindReserved, 0, 0, false, "reserved syndrome 0x80"},
	} {
		t.Run(tc.text, func(t *testing.T) {
			assert.Equal(t, tc.kind, tc.s.Kind())
			assert.Equal(t, tc.code, tc.s.Code())
			n, ok := tc.s.Credits()
			assert.Equal(t, tc.limited, ok)
			assert.Equal(t, tc.credits, n)
			assert.Equal(t, tc.text, tc.s.String())
		})
	}
	assert.Equal(t, SyndromeNAKAccess, NAKSyndrome(NAKRemoteAccess))
	assert.Equal(t, Syndrome(0x2C), RNRSyndrome(12))
	assert.Equal(t, SyndromeACKUnlimited, ACKSyndrome(31))
}

func TestRNRTimer(t *testing.T) {
	assert.Equal(t, uint32(655360), RNRTimerMicros(0))
	assert.Equal(t, uint32(640), RNRTimerMicros(12)) // rc_pingpong / perftest
	assert.Equal(t, uint32(60), RNRTimerMicros(5))   // SMC
	assert.Equal(t, uint32(61440), RNRTimerMicros(25))
	assert.Equal(t, uint32(491520), RNRTimerMicros(31))
}
