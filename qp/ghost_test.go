package qp

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
)

// Every response kind at every PSN relation to what the requester sent
// (loneRC's seven PSNs: S the oldest unacknowledged, S+6 the last sent):
// a ghost changes nothing in the QP and is counted; an answer it may
// name is taken (and counted as no ghost), whatever it then does.
func TestGhostResponses(t *testing.T) {
	type relation struct {
		name string
		off  uint32 // from S
	}
	var (
		before    = relation{"before comp PSN", ^uint32(1)} // S-2
		lastDone  = relation{"the last acknowledged", ^uint32(0)}
		equal     = relation{"equal", 0}
		inside    = relation{"inside the window", loneRead}
		readLast  = relation{"the READ's last PSN", loneRead + 1}
		atomic    = relation{"the atomic's PSN", loneAtomic}
		last      = relation{"at the last sent", loneSent - 1}
		onePast   = relation{"one past", loneSent}
		farPast   = relation{"far past", 0x400000}
		halfSpace = relation{"half the space away", 0x800000}
		farBefore = relation{"far before", 0xC00000}
		all       = []relation{before, lastDone, equal, inside, readLast, atomic, last, onePast, farPast, halfSpace, farBefore}
	)
	ack := func(syn rocev2.Syndrome) rocev2.Fields {
		return rocev2.Fields{Opcode: rocev2.RCAcknowledge, Syndrome: syn}
	}
	for _, kind := range []struct {
		name    string
		fl      rocev2.Fields
		payload int
		valid   []relation
		inert   []relation // valid, and changes nothing
	}{
		{"ACK", ack(0x1F), 0, []relation{lastDone, equal, inside, readLast, atomic, last}, []relation{lastDone}},
		{"ACK with credits", ack(0x05), 0, []relation{lastDone, equal, inside, readLast, atomic, last}, []relation{lastDone}},
		{"NAK PSN sequence error", ack(0x60), 0, []relation{equal, inside, readLast, atomic, last}, nil},
		{"NAK invalid request", ack(0x61), 0, []relation{equal, inside, readLast, atomic, last}, nil},
		{"NAK remote access error", ack(0x62), 0, []relation{equal, inside, readLast, atomic, last}, nil},
		{"NAK remote operational error", ack(0x63), 0, []relation{equal, inside, readLast, atomic, last}, nil},
		{"NAK invalid RD request", ack(0x64), 0, []relation{equal, inside, readLast, atomic, last}, nil},
		{"NAK reserved code", ack(0x7F), 0, []relation{equal, inside, readLast, atomic, last}, nil},
		{"RNR NAK", ack(0x20), 0, []relation{equal, inside, readLast, atomic, last}, nil},
		{"reserved syndrome", ack(0x40), 0, []relation{equal, inside, readLast, atomic, last}, []relation{equal}},
		{"READ response first", rocev2.Fields{Opcode: rocev2.RCReadResponseFirst, Syndrome: 0x1F}, 1024, []relation{inside, readLast}, nil},
		{"READ response middle", rocev2.Fields{Opcode: rocev2.RCReadResponseMiddle}, 1024, []relation{inside, readLast}, nil},
		{"READ response last", rocev2.Fields{Opcode: rocev2.RCReadResponseLast, Syndrome: 0x1F}, 1024, []relation{inside, readLast}, nil},
		{"READ response only", rocev2.Fields{Opcode: rocev2.RCReadResponseOnly, Syndrome: 0x1F}, 1024, []relation{inside, readLast}, nil},
		{"READ response with a NAK", rocev2.Fields{Opcode: rocev2.RCReadResponseLast, Syndrome: 0x61}, 1024, []relation{inside, readLast}, nil},
		{"atomic ACK", rocev2.Fields{Opcode: rocev2.RCAtomicAcknowledge, Syndrome: 0x1F, Orig: 41}, 0, []relation{atomic}, nil},
	} {
		for _, s := range []rocev2.PSN{0x200, 0xFFFFFD} { // and a window across the wrap
			l := newLoneRC(t, s)
			for _, rel := range all {
				t.Run(fmt.Sprintf("%s/%s/S=%#x", kind.name, rel.name, s), func(t *testing.T) {
					l.reconnect(t)
					valid, inert := false, false
					for _, v := range kind.valid {
						valid = valid || v == rel
					}
					for _, v := range kind.inert {
						inert = inert || v == rel
					}
					fl := kind.fl
					fl.PSN = s.Add(rel.off)
					g0, v0 := l.ghosts(), l.view()
					l.respond(t, fl, make([]byte, kind.payload))
					g, v := l.ghosts()-g0, l.view()
					if !valid {
						assert.Equal(t, uint64(1), g, "a ghost is counted")
						assert.Equal(t, v0, v, "a ghost changes nothing")
						return
					}
					assert.Zero(t, g, "an answer the kind may name is no ghost")
					if inert {
						assert.Equal(t, v0, v, "an answer that changes nothing")
					} else {
						assert.NotEqual(t, v0, v, "the answer is taken")
					}
				})
			}
		}
	}
}

// The answers the ghost check lets through still do what they did: the
// peer's ACKs, READ responses and atomic ACK complete every WQE in order,
// with the READ's data and the atomic's original value placed, after a
// repeated last ACK that does nothing.
func TestGhostCheckKeepsAnswers(t *testing.T) {
	for _, s := range []rocev2.PSN{0x200, 0xFFFFFD} {
		t.Run(fmt.Sprintf("S=%#x", s), func(t *testing.T) {
			l := newLoneRC(t, s)
			l.answer(t)
			assert.Zero(t, l.ghosts())
		})
	}
}

// answer plays the peer that got every request: it answers them all, in
// order, and checks that every WQE completes with its data.
func (l *loneRC) answer(t *testing.T) {
	t.Helper()
	s := l.s
	read := make([]byte, 2048)
	for i := range read {
		read[i] = byte(i*3 + 1)
	}
	resp := []struct {
		fl      rocev2.Fields
		payload []byte
	}{
		{rocev2.Fields{Opcode: rocev2.RCAcknowledge, Syndrome: 0x1F, PSN: s.Add(^uint32(0))}, nil},
		{rocev2.Fields{Opcode: rocev2.RCAcknowledge, Syndrome: 0x1F, PSN: s.Add(loneWrite)}, nil},
		{rocev2.Fields{Opcode: rocev2.RCReadResponseFirst, Syndrome: 0x1F, PSN: s.Add(loneRead)}, read[:1024]},
		{rocev2.Fields{Opcode: rocev2.RCReadResponseLast, Syndrome: 0x1F, PSN: s.Add(loneRead + 1)}, read[1024:]},
		{rocev2.Fields{Opcode: rocev2.RCAtomicAcknowledge, Syndrome: 0x1F, PSN: s.Add(loneAtomic), Orig: 41}, nil},
		{rocev2.Fields{Opcode: rocev2.RCAcknowledge, Syndrome: 0x1F, PSN: s.Add(loneSend1)}, nil},
	}
	var wcs []cq.WC
	for _, r := range resp {
		l.respond(t, r.fl, r.payload)
		n := l.cq.Poll(l.wcs)
		wcs = append(wcs, l.wcs[:n]...)
	}
	require.Len(t, wcs, 5)
	for i, wc := range wcs {
		assert.Equal(t, cq.Success, wc.Status)
		assert.Equal(t, uint64(i+1), wc.WRID)
	}
	assert.Equal(t, read, l.buf[loneReadDst:loneReadDst+2048])
	assert.Equal(t, uint64(41), nativeGet(l.buf[loneAtomDst:]))
	assert.Equal(t, RTS, l.q.State())
}
