package qp

import (
	"bytes"
	"testing"

	"github.com/goroce/goroce/rocev2"
)

// FuzzGhostResponses is an attacker who knows an RC QP's number and its
// peer's address, but not its PSNs: any RC response (its opcode, syndrome,
// PSN, atomic value and payload the fuzzer's) at a QP with a SEND, WRITE,
// READ, atomic and SEND outstanding (loneRC). A response outside what the
// QP sent changes nothing at all; one inside may do what a response does,
// but never writes outside the READ's and the atomic's buffers and never
// moves the oldest unacknowledged PSN past what was sent.
func FuzzGhostResponses(f *testing.F) {
	const s = 0x200
	f.Add(uint8(0), uint8(0x1F), uint32(s+loneSent), uint64(0), []byte(nil))        // ACK one past
	f.Add(uint8(0), uint8(0x61), uint32(s+0x400000), uint64(0), []byte(nil))        // the NAK that killed rc_pingpong
	f.Add(uint8(0), uint8(0x63), uint32(s+loneRead), uint64(0), []byte(nil))        // a NAK inside
	f.Add(uint8(0), uint8(0x2C), uint32(s), uint64(0), []byte(nil))                 // RNR NAK
	f.Add(uint8(1), uint8(0x1F), uint32(s+loneRead), uint64(0), make([]byte, 1024)) // READ response first
	f.Add(uint8(4), uint8(0x1F), uint32(s+loneAtomic), uint64(7), []byte(nil))      // atomic ACK
	f.Add(uint8(3), uint8(0x1F), uint32(s-1), uint64(0), make([]byte, 1024))        // READ response only, behind
	l := newLoneRC(f, s)
	golden := bytes.Clone(l.buf)
	f.Fuzz(func(t *testing.T, op, syn uint8, psn uint32, orig uint64, payload []byte) {
		l.reconnect(t)
		// The RC response opcodes: ACK, READ response first, middle,
		// last, only, atomic ACK.
		opcodes := [...]rocev2.Opcode{rocev2.RCAcknowledge, rocev2.RCReadResponseFirst, rocev2.RCReadResponseMiddle,
			rocev2.RCReadResponseLast, rocev2.RCReadResponseOnly, rocev2.RCAtomicAcknowledge}
		fl := rocev2.Fields{Opcode: opcodes[int(op)%len(opcodes)], Syndrome: rocev2.Syndrome(syn), PSN: rocev2.PSN(psn & rocev2.PSNMask), Orig: orig}
		if !fl.Opcode.Is(rocev2.OpPayload) {
			payload = nil
		}
		if len(payload) > 4096 {
			payload = payload[:4096]
		}
		v0 := l.view()
		sent := fl.PSN.Sub(v0.comp) >= -1 && fl.PSN.Before(v0.maxSent)
		l.respond(t, fl, payload)
		v := l.view()
		if !sent && v != v0 {
			t.Fatalf("%v psn %#x syn %#x (sent: %#x..%#x) changed the QP:\n%+v\n%+v", fl.Opcode, fl.PSN, syn, v0.comp, v0.maxSent, v0, v)
		}
		if v.comp.After(v.maxSent) {
			t.Fatalf("%v psn %#x: the oldest unacknowledged PSN %#x is past what was sent (%#x)", fl.Opcode, fl.PSN, v.comp, v.maxSent)
		}
		for i := range l.buf {
			if l.buf[i] != golden[i] && !(i >= loneReadDst && i < loneReadDst+2048) && !(i >= loneAtomDst && i < loneAtomDst+8) {
				t.Fatalf("%v psn %#x wrote byte %d, outside the READ's and the atomic's buffers", fl.Opcode, fl.PSN, i)
			}
		}
		if err := l.mr.WriteSync(l.mr.VA(), golden); err != nil { // under the region's lock: an RNR timer may be resending from it
			t.Fatal(err)
		}
	})
}
