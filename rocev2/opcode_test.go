package rocev2

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpcodeTable(t *testing.T) {
	// Header lengths (BTH included) from IBTA / rxe_opcode.c.
	for _, tc := range []struct {
		op       Opcode
		hdrLen   int
		position string
		rwqe     bool
	}{
		{RCSendFirst, 12, "FIRST", true},
		{RCSendMiddle, 12, "MIDDLE", false},
		{RCSendLast, 12, "LAST", false},
		{RCSendLastImm, 16, "LAST", false},
		{RCSendOnly, 12, "ONLY", true},
		{RCSendOnlyImm, 16, "ONLY", true},
		{RCWriteFirst, 28, "FIRST", false},
		{RCWriteMiddle, 12, "MIDDLE", false},
		{RCWriteLast, 12, "LAST", false},
		{RCWriteLastImm, 16, "LAST", true},
		{RCWriteOnly, 28, "ONLY", false},
		{RCWriteOnlyImm, 32, "ONLY", true},
		{RCReadRequest, 28, "ONLY", false},
		{RCReadResponseFirst, 16, "FIRST", false},
		{RCReadResponseMiddle, 12, "MIDDLE", false},
		{RCReadResponseLast, 16, "LAST", false},
		{RCReadResponseOnly, 16, "ONLY", false},
		{RCAcknowledge, 16, "ONLY", false},
		{RCAtomicAcknowledge, 24, "ONLY", false},
		{RCCompareSwap, 40, "ONLY", false},
		{RCFetchAdd, 40, "ONLY", false},
		{RCSendLastInv, 16, "LAST", false},
		{RCSendOnlyInv, 16, "ONLY", true},
		{RCFlush, 32, "ONLY", false},
		{RCAtomicWrite, 28, "ONLY", false},
		{UCSendOnly, 12, "ONLY", true},
		{UCWriteOnlyImm, 32, "ONLY", true},
		{UDSendOnly, 20, "ONLY", true},
		{UDSendOnlyImm, 24, "ONLY", true},
		{CNP, 28, "ONLY", false},
	} {
		t.Run(tc.op.String(), func(t *testing.T) {
			require.True(t, tc.op.Valid())
			assert.Equal(t, tc.hdrLen, tc.op.HeaderLen())
			assert.Equal(t, tc.position, tc.op.Position())
			assert.Equal(t, tc.rwqe, tc.op.ConsumesRecvWQE())
		})
	}
}

func TestOpcodeHeaderOrder(t *testing.T) {
	// RETH precedes ImmDt; DETH precedes ImmDt; FETH precedes RETH; AETH precedes AtomicAckETH.
	assert.Equal(t, 12, RCWriteOnlyImm.Offset(HdrRETH))
	assert.Equal(t, 28, RCWriteOnlyImm.Offset(HdrImmDt))
	assert.Equal(t, 12, UDSendOnlyImm.Offset(HdrDETH))
	assert.Equal(t, 20, UDSendOnlyImm.Offset(HdrImmDt))
	assert.Equal(t, 12, RCFlush.Offset(HdrFETH))
	assert.Equal(t, 16, RCFlush.Offset(HdrRETH))
	assert.Equal(t, 12, RCAtomicAcknowledge.Offset(HdrAETH))
	assert.Equal(t, 16, RCAtomicAcknowledge.Offset(HdrAtomicAckETH))
	assert.Equal(t, -1, RCSendOnly.Offset(HdrRETH))
	assert.Equal(t, -1, RCSendOnly.Offset(HdrRETH|HdrAETH))
}

func TestOpcodeUnknownIsRejectedEverywhere(t *testing.T) {
	valid := 0
	for i := 0; i < 256; i++ {
		op := Opcode(i)
		if !op.Valid() {
			assert.Zero(t, op.HeaderLen())
			assert.Zero(t, op.Headers())
			assert.Equal(t, -1, op.Offset(HdrRETH))
			assert.Contains(t, op.String(), "0x")
			continue
		}
		valid++
		tr := op.Transport()
		assert.Contains(t, []Transport{TransportRC, TransportUC, TransportUD, TransportCNP}, tr, op.String())
		assert.Contains(t, op.String(), tr.String())
	}
	assert.Equal(t, 25+12+2+1, valid)
	for _, op := range []Opcode{0x15, 0x18, 0x1B, 0x2C, 0x40, 0x4C, 0x60, 0x63, 0x80, 0xA0, 0xFF} {
		assert.False(t, op.Valid(), "0x%02x", uint8(op))
	}
}

func TestMTU(t *testing.T) {
	assert.Equal(t, MTU1024, ActiveMTU(1500))
	assert.Equal(t, MTU4096, ActiveMTU(9000))
	assert.Equal(t, MTU4096, ActiveMTU(65536))
	assert.Equal(t, MTU256, ActiveMTU(300))
	assert.Equal(t, 4096, MTU4096.Bytes())
	assert.Equal(t, 256, MTU256.Bytes())
	assert.Zero(t, MTU(0).Bytes())
	assert.Zero(t, MTU(6).Bytes())
}
