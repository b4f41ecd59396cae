package rocev2

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sampleFields returns distinctive values for every field, so that a
// round trip through the wire catches any header written at the wrong offset.
func sampleFields(op Opcode) Fields {
	return Fields{
		Opcode: op, SE: true, MigReq: true, PKey: 0xffff, FECN: true, BECN: true,
		DestQP: 0xABCDEF, AckReq: true, PSN: 0x123456,
		VA: 0x1122334455667788, RKey: 0xdeadbeef, Len: 0x10000,
		Syndrome: 0x63, MSN: 0x654321,
		SwapAdd: 0x0102030405060708, Compare: 0x1112131415161718,
		Orig: 0x2122232425262728, Imm: 0xcafef00d, InvRKey: 0x31323334,
		QKey: 0x11111111, SrcQP: 0x000013, Placement: 1, Selectivity: 1,
	}
}

// masked zeroes the fields the opcode does not carry.
func masked(f Fields) Fields {
	op := f.Opcode
	if !op.Has(HdrRETH) && !op.Has(HdrAtomicETH) {
		f.VA, f.RKey = 0, 0
	}
	if !op.Has(HdrRETH) {
		f.Len = 0
	}
	if !op.Has(HdrAETH) {
		f.Syndrome, f.MSN = 0, 0
	}
	if !op.Has(HdrAtomicETH) {
		f.SwapAdd, f.Compare = 0, 0
	}
	if !op.Has(HdrAtomicAckETH) {
		f.Orig = 0
	}
	if !op.Has(HdrImmDt) {
		f.Imm = 0
	}
	if !op.Has(HdrIETH) {
		f.InvRKey = 0
	}
	if !op.Has(HdrDETH) {
		f.QKey, f.SrcQP = 0, 0
	}
	if !op.Has(HdrFETH) {
		f.Placement, f.Selectivity = 0, 0
	}
	return f
}

func TestBuildParseRoundTripEveryOpcode(t *testing.T) {
	for _, d := range opDefs {
		for _, n := range []int{0, 1, 2, 3, 4, 5, 1023, 1024} {
			if n > 0 && !d.op.Is(OpPayload) {
				continue
			}
			payload := make([]byte, n)
			for i := range payload {
				payload[i] = byte(i*7 + 1)
			}
			want := sampleFields(d.op)
			buf := make([]byte, MaxEncapLen, 2048)
			pkt, err := want.Append(buf[MaxEncapLen:], payload)
			require.NoError(t, err)
			require.Len(t, pkt, PacketLen(d.op, n))

			var p Packet
			require.NoError(t, p.Parse(pkt), "%v len %d", d.op, n)
			assert.Equal(t, d.op, p.Opcode())
			assert.Equal(t, payload, p.Payload())
			assert.Equal(t, PadFor(n), len(p.Pad()))
			assert.Equal(t, PadFor(n), p.BTH().PadCount())
			assert.Equal(t, masked(want), FieldsOf(&p), "%v", d.op)
		}
	}
}

func TestBuildRejects(t *testing.T) {
	f := Fields{Opcode: 0x15}
	_, err := f.Append(nil, nil)
	assert.Error(t, err)
	f = Fields{Opcode: RCAcknowledge}
	_, err = f.Append(nil, []byte{1})
	assert.Error(t, err, "ACK carries no payload")
}

func TestParseErrors(t *testing.T) {
	good := func(op Opcode, n int) []byte {
		f := Fields{Opcode: op, PKey: 0xffff, DestQP: 0x11}
		b, err := f.Append(nil, make([]byte, n))
		require.NoError(t, err)
		return b
	}
	for _, tc := range []struct {
		name string
		pkt  func() []byte
		want ParseError
	}{
		{"empty", func() []byte { return nil }, ErrShort},
		{"BTH only", func() []byte { return good(RCSendOnly, 0)[:12] }, ErrShort},
		{"reserved opcode 0x15", func() []byte { b := good(RCSendOnly, 0); b[0] = 0x15; return b }, ErrUnknownOpcode},
		{"opcode 0xff multicast QPN", func() []byte {
			b := good(RCSendOnly, 0)
			b[0] = 0xff
			BTH(b).SetDestQP(0xFFFFFF)
			return b
		}, ErrUnknownOpcode},
		{"RD opcode", func() []byte { b := good(RCSendOnly, 0); b[0] = 0x44; return b }, ErrUnknownOpcode},
		{"TVer 1", func() []byte { b := good(RCSendOnly, 0); BTH(b).SetTVer(1); return b }, ErrTVer},
		{"RETH cut", func() []byte { return good(RCWriteOnly, 0)[:24] }, ErrHeaderTruncated},
		{"atomic cut", func() []byte { return good(RCFetchAdd, 0)[:40] }, ErrHeaderTruncated},
		{"pad beyond payload", func() []byte { b := good(RCSendOnly, 2); BTH(b).SetPadCount(3); return b[:len(b)-2] }, ErrPadCount},
		{"pad on ACK", func() []byte { b := good(RCAcknowledge, 0); BTH(b).SetPadCount(1); return b }, ErrPadCount},
		{"payload on ACK", func() []byte { return append(good(RCAcknowledge, 0), 0, 0, 0, 0) }, ErrUnexpectedPayload},
		{"payload on READ request", func() []byte { return append(good(RCReadRequest, 0), 1, 2, 3, 4) }, ErrUnexpectedPayload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Packet
			err := p.Parse(tc.pkt())
			require.ErrorIs(t, err, tc.want)
			assert.NotEmpty(t, tc.want.Error())
			assert.NotEmpty(t, tc.want.CounterName())
		})
	}
}

// Every prefix of a valid packet is either rejected with a typed error or,
// for opcodes whose payload can shrink, parsed as a shorter valid packet; the
// parser never reads past the slice.
func TestParseEveryPrefix(t *testing.T) {
	for _, d := range opDefs {
		f := sampleFields(d.op)
		n := 0
		if d.op.Is(OpPayload) {
			n = 37
		}
		pkt, err := f.Append(nil, make([]byte, n))
		require.NoError(t, err)
		for i := 0; i < len(pkt); i++ {
			var p Packet
			err := p.Parse(pkt[:i:i])
			if err == nil {
				assert.True(t, d.op.Is(OpPayload), "%v prefix %d parsed", d.op, i)
				continue
			}
			var pe ParseError
			require.ErrorAs(t, err, &pe)
		}
	}
}

func TestParseErrorNames(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range ParseErrors {
		assert.False(t, seen[e.Error()], "duplicate text %q", e.Error())
		seen[e.Error()] = true
	}
	assert.Len(t, ParseErrors, NumParseErrors-1)
	assert.Contains(t, ParseError(200).Error(), "unknown")
}
