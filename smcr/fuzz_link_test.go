package smcr

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goroce/goroce/smcr/smcwire"
)

// fuzzPair is a live SMC-R connection whose server side the link fuzzer
// feeds: the fuzzed bytes arrive as if its peer had sent them over the
// link, beside the real traffic.
type fuzzPair struct {
	c, s *Conn
	ln   net.Listener
}

var fuzzAddr = struct {
	sync.Mutex
	n int
}{}

func newFuzzPair(tb testing.TB) *fuzzPair {
	tb.Helper()
	for range 50 {
		if p := tryFuzzPair(tb); p != nil {
			return p
		}
	}
	tb.Fatal("no free test addresses")
	return nil
}

// tryFuzzPair connects a pair on the next addresses (random per process:
// fuzzing runs several processes), or returns nil if one is in use.
func tryFuzzPair(tb testing.TB) *fuzzPair {
	cfg := Config{Signalling: SignalConfigured, PeerSpeaksSMC: true, UEIDs: []string{"GOROCE-FUZZ"},
		LinkGroupLinger: 10 * time.Millisecond, HandshakeTimeout: 5 * time.Second, TestLinkInterval: -1}
	fuzzAddr.Lock()
	if fuzzAddr.n == 0 {
		fuzzAddr.n = rand.IntN(1 << 16)
	}
	fuzzAddr.n++
	n := fuzzAddr.n
	fuzzAddr.Unlock()
	srv := netip.AddrFrom4([4]byte{127, 250, byte(n >> 8), byte(n)})
	cli := netip.AddrFrom4([4]byte{127, 251, byte(n >> 8), byte(n)})
	ln, err := Listen("tcp", netip.AddrPortFrom(srv, 0).String(), &cfg)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	d := Dialer{Config: cfg, LocalAddr: cli}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	s := <-acc
	p := &fuzzPair{c: c.(*Conn), s: s.(*Conn), ln: ln}
	if p.c.smc == nil && p.c.info.Fallback == smcwire.DiagNoSMCRDev {
		p.close() // the client's device address is in use
		return nil
	}
	if p.s.smc == nil || p.c.smc == nil {
		tb.Fatalf("no SMC-R connection: client %+v", p.c.Info())
	}
	return p
}

func (p *fuzzPair) close() {
	p.c.Close()
	p.s.Close()
	p.ln.Close()
}

// FuzzLinkMessage hands arbitrary CDC and LLC messages to a link group as
// its receive path does: none may panic, read outside a buffer, or block
// the receive path; a message that breaks the protocol ends the connection
// or the link, counted. When the first byte is odd, the message is made a
// CDC for the live connection (its token), so that the fuzzer reaches the
// cursor checks rather than the token lookup.
func FuzzLinkMessage(f *testing.F) {
	seeds := [][]byte{
		{},
		{0xFE},
		cdcSeed(1, 0, 10, 0, 0, 0, 0),
		cdcSeed(2, 0, 1<<20, 0, 0, 0, 0),     // producer cursor beyond the RMB
		cdcSeed(3, 5, 100, 0, 0, 0, 0),       // a wrap ahead: more than the RMB holds
		cdcSeed(4, 0, 0, 0, 64, 0, 0),        // a consumer cursor for bytes never written
		cdcSeed(5, 0, 1, 0, 0, 0x40, 0x80),   // urgent flags
		cdcSeed(6, 0, 0, 0, 0, 0x00, 0x20),   // abort
		cdcSeed(0xFFFF, 0, 0, 0, 0, 0, 0x40), // closed, sequence wrapped
		append([]byte{0x07, 44, 0, 0}, make([]byte, 40)...),      // TEST_LINK v1
		append([]byte{0x29, 44, 0, 0, 1}, make([]byte, 39)...),   // DELETE_RKEY v2
		append([]byte{0x26, 44, 0, 0, 4}, make([]byte, 39)...),   // CONFIRM_RKEY, too many rtokens
		append([]byte{0x22, 0xFF, 0xFF, 0}, make([]byte, 40)...), // ADD_LINK v2, length lies
		append([]byte{0x25, 44, 0, 0}, make([]byte, 40)...),      // REQ_ADD_LINK
		append([]byte{0x21, 44, 0, 0x80}, make([]byte, 40)...),   // a CONFIRM_LINK response nobody waits for
	}
	for _, s := range seeds {
		f.Add(append([]byte{0}, s...))
		if len(s) > 0 && s[0] == 0xFE {
			f.Add(append([]byte{1}, s...))
		}
	}
	var (
		mu sync.Mutex
		p  *fuzzPair
	)
	f.Cleanup(func() {
		if p != nil {
			p.close()
		}
	})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 || len(in) > rxBufSize+1 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if p == nil || p.s.smc.g.dead.Load() || p.s.smc.link().down.Load() || p.s.smc.aborted || p.c.smc.aborted || p.s.smc.peerAborted {
			if p != nil {
				p.close()
			}
			p = newFuzzPair(t)
		}
		g := p.s.smc.g
		msg := append([]byte(nil), in[1:]...)
		if in[0]&1 == 1 && len(msg) >= 8 && msg[0] == 0xFE {
			binary.BigEndian.PutUint32(msg[4:], p.s.smc.token)
		}
		g.receive(p.s.smc.link(), msg)
	})
}

// cdcSeed builds a 44-byte CDC with the given sequence number, producer
// cursor (wrap, count), consumer cursor and flags (token 0).
func cdcSeed(seq uint16, pw uint16, pc uint32, cw uint16, cc uint32, prodFlags, connFlags byte) []byte {
	m := make([]byte, 44)
	m[0], m[1] = 0xFE, 44
	binary.BigEndian.PutUint16(m[2:], seq)
	binary.BigEndian.PutUint16(m[10:], pw)
	binary.BigEndian.PutUint32(m[12:], pc)
	binary.BigEndian.PutUint16(m[18:], cw)
	binary.BigEndian.PutUint32(m[20:], cc)
	m[24], m[25] = prodFlags, connFlags
	return m
}
