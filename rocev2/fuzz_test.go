package rocev2

import (
	"testing"
)

// FuzzParse feeds arbitrary UDP payloads to the packet parser. A packet that
// parses must expose every header without panicking and must survive a
// rebuild from its fields unchanged in meaning. Seeds: testdata/fuzz/FuzzParse
// (packets from the kernel rxe captures) and one packet per opcode.
func FuzzParse(f *testing.F) {
	for _, d := range opDefs {
		fl := sampleFields(d.op)
		n := 0
		if d.op.Is(OpPayload) {
			n = 5
		}
		b, _ := fl.Append(nil, make([]byte, n))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Packet
		if err := p.Parse(b); err != nil {
			if _, ok := err.(ParseError); !ok {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		fields := FieldsOf(&p)
		_ = p.ICRC()
		_ = p.Pad()
		_ = fields.Syndrome.String()
		rebuilt, err := fields.Append(nil, p.Payload())
		if err != nil {
			t.Fatalf("rebuild: %v", err)
		}
		var q Packet
		if err := q.Parse(rebuilt); err != nil {
			t.Fatalf("reparse: %v", err)
		}
		if FieldsOf(&q) != fields {
			t.Fatalf("fields changed: %+v vs %+v", FieldsOf(&q), fields)
		}
	})
}

// FuzzFrame feeds arbitrary Ethernet frames to the frame splitter and the ICRC
// check. Seeds: testdata/fuzz/FuzzFrame (frames from the kernel rxe captures).
func FuzzFrame(f *testing.F) {
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr Frame
		if err := ParseEthernetFrame(b, UDPPort, &fr); err != nil {
			return
		}
		_ = fr.Src()
		_ = fr.Dst()
		fr.VerifyICRC()
		var p Packet
		_ = p.Parse(fr.Payload)
	})
}
