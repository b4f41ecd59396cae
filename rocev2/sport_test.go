package rocev2

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/rxevectors"
)

func TestSourcePortExamples(t *testing.T) {
	// From the rxe captures' catalogue and the kernel's hash_32.
	assert.Equal(t, uint16(0xD872), QPSourcePort(1))
	assert.Equal(t, uint16(55410), QPSourcePort(1), "QP1 (CM MADs)")
	assert.Equal(t, uint16(53368), QPSourcePort(0x13), "a UD QP")
	assert.Equal(t, uint16(0xDF94), QPSourcePort(17))
	assert.Equal(t, uint16(0xF806), QPSourcePort(18))
	assert.Equal(t, uint16(49441), FlowLabelSourcePort(CalcFlowLabel(0x11, 0x11)), "RC 0x11<->0x11")
	assert.Equal(t, CalcFlowLabel(0x1234, 0x56), CalcFlowLabel(0x56, 0x1234), "symmetric")

	rc := make([]byte, BTHLen)
	rc[0] = byte(RCSendOnly)
	rc[5], rc[6], rc[7] = 0, 0, 0x11
	port, fl := SourcePort(0x11, 0, rc)
	assert.Equal(t, uint16(49441), port)
	assert.Equal(t, uint32(0x121), fl)
	port, fl = SourcePort(0x11, 0xABCDE, rc)
	assert.Equal(t, FlowLabelSourcePort(0xABCDE), port, "the address vector's label wins")
	assert.Equal(t, uint32(0xABCDE), fl)

	ud := make([]byte, BTHLen)
	ud[0] = byte(UDSendOnly)
	port, fl = SourcePort(0x13, 0, ud)
	assert.Equal(t, uint16(53368), port)
	assert.Zero(t, fl)
	port, _ = SourcePort(0x13, 0, nil)
	assert.Equal(t, uint16(53368), port, "too short to tell: the QP's own port")
}

// TestSourcePortMatchesRxe checks every RC and UD frame of the rxe captures:
// the source port is the one SourcePort gives the sending QP, whose number
// is the destination QP of the frames going the other way.
func TestSourcePortMatchesRxe(t *testing.T) {
	all, err := rxevectors.All(filepath.Join("..", "conformance", "testdata", "rxe"))
	require.NoError(t, err)
	checked := 0
	for name, frames := range all {
		type dir struct{ src, dst string }
		var parsed []Frame
		qpsTo := map[string]map[uint32]bool{} // destination QPs per receiving address
		for _, raw := range frames {
			var f Frame
			if ParseEthernetFrame(raw, UDPPort, &f) != nil || len(f.Payload) < BTHLen {
				continue
			}
			parsed = append(parsed, f)
			d := f.Dst().String()
			if qpsTo[d] == nil {
				qpsTo[d] = map[uint32]bool{}
			}
			qpsTo[d][BTH(f.Payload).DestQP()] = true
		}
		for _, f := range parsed {
			op := Opcode(f.Payload[0])
			if op.Transport() == TransportUD {
				if op.Has(HdrDETH) {
					src := uint32(f.Payload[BTHLen+5])<<16 | uint32(f.Payload[BTHLen+6])<<8 | uint32(f.Payload[BTHLen+7])
					if src == 1 {
						continue // QP1's MADs: the kernel's CM, not a verbs QP
					}
					port, _ := SourcePort(src, 0, f.Payload)
					assert.Equal(t, port, f.SrcPort(), "%s: UD from QP %#x", name, src)
					checked++
				}
				continue
			}
			if op.Transport() != TransportRC {
				continue
			}
			// The sender is one of the QPs its peer addresses; with one
			// connection per pair of addresses (every capture here) it is
			// the only one.
			senders := qpsTo[f.Src().String()]
			if len(senders) != 1 {
				continue
			}
			for qpn := range senders {
				port, _ := SourcePort(qpn, 0, f.Payload)
				assert.Equal(t, port, f.SrcPort(), "%s: %v from QP %#x to %#x", name, op, qpn, BTH(f.Payload).DestQP())
				checked++
			}
		}
	}
	assert.Greater(t, checked, 200, "frames checked")
}
