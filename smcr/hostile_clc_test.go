package smcr_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/smcr"
	"github.com/goroce/goroce/smcr/smcwire"
)

// A hostile or broken CLC peer, byte by byte over TCP: what goroce sends
// back and what its side of the connection becomes. As Linux: a message
// that cannot be read (malformed, too long, cut short, late), or bytes
// that are no CLC at all from a peer taken to speak SMC, close the
// connection without a Decline; a well-formed message that cannot be
// served is declined with Linux's code and the connection falls back.
// Nothing hangs past the handshake timeout, and the listener goes on
// serving.

// hostileWait is the hostile side's handshake timeout in these tests: short,
// so that the silent cases end soon, yet long enough for the well-behaved
// side's work between two messages on a busy machine.
const hostileWait = time.Second

// outcome is what happened to a hostile connection.
type outcome struct {
	kind    string           // "closed", "declined", "fallback"
	diag    smcwire.DiagCode // declined: the Decline's code
	oos     bool             // declined: the out-of-sync bit
	peerDia smcwire.DiagCode // fallback after the peer's Decline: its code
}

// clientAddr is the IPv4-mapped GID of a test address.
func gidOfAddr(a netip.Addr) smcwire.GID { return smcwire.GID(a.As16()) }

// proposal builds a v2 Proposal (with v1) as a goroce or Linux client
// sends it, from cli, with UEIDs ueids.
func proposal(cli netip.Addr, ueids ...string) []byte {
	return smcwire.AppendProposal(nil, proposalFields(cli, ueids...))
}

// proposalV2Only is proposal without the v1 offer.
func proposalV2Only(cli netip.Addr, ueids ...string) []byte {
	f := proposalFields(cli, ueids...)
	f.TypeV1, f.IPArea = smcwire.TypeN, nil
	return smcwire.AppendProposal(nil, f)
}

func proposalFields(cli netip.Addr, ueids ...string) *smcwire.ProposalFields {
	f := &smcwire.ProposalFields{
		CLCHeader: smcwire.CLCHeader{Version: 2, TypeV1: smcwire.TypeR, TypeV2: smcwire.TypeR},
		PeerID:    smcwire.PeerID{0xAB, 0xCD, 2, 0, 0, 0, 0, 1}, GID: gidOfAddr(cli), MAC: smcwire.MAC{2, 0, 0, 0, 0, 1},
		IPArea: &smcwire.IPArea{Subnet: cli, PrefixLen: 32},
		V2Ext:  &smcwire.ProposalV2Ext{Release: 1, RoCEGID: gidOfAddr(cli), MaxConns: 255, MaxLinks: 2, FeatureMask: 1},
	}
	for _, u := range ueids {
		f.V2Ext.UserEIDs = append(f.V2Ext.UserEIDs, smcwire.EIDFrom(u))
	}
	return f
}

// withLen rewrites a CLC message's length field.
func withLen(m []byte, n int) []byte {
	m = bytes.Clone(m)
	binary.BigEndian.PutUint16(m[5:], uint16(n))
	return m
}

func mutate(m []byte, f func([]byte)) []byte {
	m = bytes.Clone(m)
	f(m)
	return m
}

func TestHostileCLCClient(t *testing.T) {
	noLeaks(t)
	p := newPair(t, func(c *smcr.Config) { c.HandshakeTimeout = hostileWait })
	srvAddr := p.ln.Addr().(*net.TCPAddr).AddrPort()
	cli := p.d.LocalAddr
	good := proposal(cli, "GOROCE-TEST-UEID")
	decline := smcwire.AppendDecline(nil, &smcwire.DeclineFields{CLCHeader: smcwire.CLCHeader{Version: 2},
		Diagnosis: smcwire.DiagNoSMCRDev, OSType: smcwire.OSLinux})
	closed := outcome{kind: "closed"}
	tests := []struct {
		name   string
		send   [][]byte // written in turn; a nil entry lets the server answer first
		hangUp bool     // then the client closes its side
		want   outcome
	}{
		{"closes at once", nil, true, closed},
		{"half an eyecatcher, then closes", [][]byte{{0xE2, 0xD4}}, true, closed},
		{"an eyecatcher, then silence", [][]byte{good[:4]}, false, closed},
		{"a header, then silence", [][]byte{good[:8]}, false, closed},
		{"length below the header", [][]byte{withLen(good, 4)}, false, closed},
		{"length 65535", [][]byte{withLen(good, 0xFFFF), bytes.Repeat([]byte{0xAA}, 4096)}, false, closed},
		{"length beyond the largest message", [][]byte{withLen(good, 1025), bytes.Repeat([]byte{0xAA}, 1100)}, false, closed},
		{"length says more than comes", [][]byte{withLen(good, len(good)+40)}, false, closed},
		{"cut short, then closes", [][]byte{good[:len(good)/2]}, true, closed},
		{"unknown type", [][]byte{mutate(good, func(m []byte) { m[4] = 9 })}, false, closed},
		{"version 0", [][]byte{mutate(good, func(m []byte) { m[7] &^= 0xF0 })}, false, closed},
		{"an Accept in place of the Proposal", [][]byte{mutate(good, func(m []byte) { m[4] = 2 })}, false, closed},
		{"bad trailer", [][]byte{mutate(good, func(m []byte) { m[len(m)-1] ^= 0xFF })}, false, closed},
		{"IP area offset beyond the message", [][]byte{mutate(good, func(m []byte) { binary.BigEndian.PutUint16(m[38:], 0xFFF0) })}, false, closed},
		{"255 UEIDs announced", [][]byte{mutate(good, func(m []byte) { m[len(m)-4-32-40] = 255 })}, false, closed},
		{"random bytes after the eyecatcher", [][]byte{append(bytes.Clone(good[:4]), bytes.Repeat([]byte{0x5A}, 200)...)}, false, closed},
		{"no UEID in common", [][]byte{proposalV2Only(cli, "SOMEONE-ELSE")}, false, outcome{kind: "declined", diag: smcwire.DiagNoSMCDev}},
		{"SMC-R v2 without UEIDs", [][]byte{proposalV2Only(cli)}, false, outcome{kind: "declined", diag: smcwire.DiagNoUEID}},
		{"a Decline in place of the Proposal", [][]byte{decline}, false, outcome{kind: "fallback", peerDia: smcwire.DiagNoSMCRDev}},
		// A peer taken to speak SMC (here by the configuration) whose
		// first bytes are not CLC is closed, as Linux closes it, not
		// handed to the application as a fallback.
		{"plain TCP bytes", [][]byte{[]byte("GET / HTTP/1.0\r\n\r\n")}, false, closed},
		{"a wrong eyecatcher", [][]byte{mutate(good, func(m []byte) { m[3] = 0xD8 })}, false, closed},
		{"one byte that begins no eyecatcher, then silence", [][]byte{{0xE3}}, false, closed},
		{"the Proposal, then silence instead of the Confirm", [][]byte{good, nil}, false, closed},
		{"the Proposal, then a Confirm cut short", [][]byte{good, nil, good[:20]}, false, closed},
		{"the Proposal, then garbage", [][]byte{good, nil, bytes.Repeat([]byte{0xE2}, 300)}, false, closed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc, err := net.DialTCP("tcp", nil, net.TCPAddrFromAddrPort(srvAddr))
			require.NoError(t, err)
			defer tc.Close()
			tc.SetReadDeadline(time.Now().Add(20 * hostileWait)) // hang guard
			var seen []byte                                      // what the server sent
			for _, b := range tt.send {
				if b == nil {
					m := readCLC(t, tc)
					require.Equal(t, smcwire.CLCAccept, m.Type())
					seen = append(seen, m...)
					continue
				}
				if _, err := tc.Write(b); err != nil {
					break
				}
			}
			if tt.hangUp {
				tc.CloseWrite()
			}
			switch tt.want.kind {
			case "closed":
				rest, err := io.ReadAll(io.LimitReader(tc, 64<<10))
				require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the server did not close the connection")
				require.Empty(t, rest, "no Decline on a hard error")
				select {
				case a := <-p.accepted():
					t.Fatalf("the listener handed out the connection: %+v", info(a.c))
				default:
				}
			case "declined":
				m := readCLC(t, tc)
				require.Equal(t, smcwire.CLCDecline, m.Type())
				d, err := smcwire.ParseDecline(m)
				require.NoError(t, err)
				require.Equal(t, tt.want.diag, d.Diagnosis())
				require.False(t, d.OutOfSync(), "a server never sets the out-of-sync bit")
				c := acceptOne(t, p, tc)
				defer c.Close()
				i := info(c)
				require.Equal(t, smcr.ModeFallback, i.Mode)
				require.Equal(t, tt.want.diag, i.Fallback)
			case "fallback":
				c := acceptOne(t, p, tc)
				defer c.Close()
				i := info(c)
				require.Equal(t, smcr.ModeFallback, i.Mode)
				if tt.want.peerDia != 0 {
					require.Equal(t, tt.want.peerDia, i.PeerDiagnosis)
				}
				// The stream works both ways, untouched.
				_, err := c.Write([]byte("pong"))
				require.NoError(t, err)
				c.Close()
				b, err := io.ReadAll(tc)
				require.NoError(t, err)
				require.Equal(t, "pong", string(b))
			}
		})
	}
	// The listener still serves a well-behaved client.
	p.d.Config.HandshakeTimeout = 10 * time.Second
	c, s := p.dial(t)
	requireMode(t, c, smcr.ModeSMCRv2)
	exchange(t, c, s, 1000)
}

// readCLC reads one CLC message from c (its length bounded by the field).
func readCLC(t *testing.T, c net.Conn) smcwire.CLC {
	t.Helper()
	hdr := make([]byte, 8)
	_, err := io.ReadFull(c, hdr)
	require.NoError(t, err)
	m := make([]byte, max(8, int(binary.BigEndian.Uint16(hdr[5:]))))
	copy(m, hdr)
	_, err = io.ReadFull(c, m[8:])
	require.NoError(t, err)
	clc, err := smcwire.ParseCLC(m)
	require.NoError(t, err)
	return clc
}

// acceptOne returns the connection the pair's listener hands out for the
// client tc; any other is an earlier case's, handed out late: an error.
func acceptOne(t *testing.T, p *pair, tc net.Conn) net.Conn {
	t.Helper()
	for {
		select {
		case a, ok := <-p.accepted():
			require.True(t, ok, "the listener closed")
			if a.c.RemoteAddr().String() == tc.LocalAddr().String() {
				return a.c
			}
			t.Errorf("the listener handed out an earlier connection: %+v", info(a.c))
			a.c.Close()
		case <-time.After(20 * hostileWait): // hang guard
			t.Fatal("the listener handed out nothing")
		}
	}
}

func info(c net.Conn) smcr.ConnInfo {
	i, _ := smcr.Info(c)
	return i
}

// The server's side, hostile: a TCP server reads goroce's Proposal and
// answers with what each case says.
func TestHostileCLCServer(t *testing.T) {
	noLeaks(t)
	srvAddr, cliAddr := freshAddrs()
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(srvAddr, 0)))
	require.NoError(t, err)
	defer ln.Close()
	cfg := testConfig()
	cfg.HandshakeTimeout = hostileWait
	d := smcr.Dialer{Config: cfg, LocalAddr: cliAddr}

	accept := func(first bool, mod func(*smcwire.AcceptConfirmFields)) []byte {
		f := smcwire.AcceptConfirmFields{
			CLCHeader: smcwire.CLCHeader{Version: 2, FirstContact: first, TypeV1: smcwire.TypeR},
			PeerID:    smcwire.PeerID{0x12, 0x34, 2, 0, 0, 0, 0, 9}, GID: gidOfAddr(srvAddr), MAC: smcwire.MAC{2, 0, 0, 0, 0, 9},
			QPN: 0x11, RMBRKey: 0x1234, RMBEIndex: 1, AlertToken: 7, RMBESizeCode: 1, QPMTU: 3, RMBVA: 0x10000, PSN: 1,
			EID: smcwire.EIDFrom("GOROCE-TEST-UEID"),
		}
		if first {
			f.FirstContactExt = &smcwire.FirstContactExt{V2Direct: true, OSType: smcwire.OSLinux, Release: 1,
				Hostname: smcwire.HostnameFrom("hostile"), MaxConns: 255, MaxLinks: 1, FeatureMask: 1}
		}
		if mod != nil {
			mod(&f)
		}
		return smcwire.AppendAcceptConfirm(nil, &f)
	}
	good := accept(true, nil)
	tests := []struct {
		name    string
		answer  []byte
		closeIt bool     // close after the answer
		wantErr bool     // the dial fails (no fallback)
		want    *outcome // else: the dial falls back
	}{
		{"closes after the Proposal", nil, true, true, nil},
		{"silence", nil, false, true, nil},
		{"not CLC", []byte("HTTP/1.0 200 OK\r\n\r\n"), false, true, nil},
		{"length 65535", append(withLen(good, 0xFFFF), bytes.Repeat([]byte{1}, 2000)...), false, true, nil},
		{"length says more than comes", withLen(good, len(good)+30), false, true, nil},
		{"cut short", good[:30], true, true, nil},
		{"unknown type", mutate(good, func(m []byte) { m[4] = 7 }), false, true, nil},
		{"a Proposal in place of the Accept", proposal(srvAddr, "GOROCE-TEST-UEID"), false, true, nil},
		{"max connections below 16", accept(true, func(f *smcwire.AcceptConfirmFields) { f.FirstContactExt.MaxConns = 8 }), false, false,
			&outcome{kind: "declined", diag: smcwire.DiagMaxConnErr}},
		{"max links 3", accept(true, func(f *smcwire.AcceptConfirmFields) { f.FirstContactExt.MaxLinks = 3 }), false, false,
			&outcome{kind: "declined", diag: smcwire.DiagMaxLinkErr}},
		{"no CONFIRM_LINK after a first-contact Accept", good, false, false,
			&outcome{kind: "declined", diag: smcwire.DiagTimeoutCL}},
		{"a link group the client never had", accept(false, nil), false, false,
			&outcome{kind: "declined", diag: smcwire.DiagSyncErr, oos: true}},
		{"a Decline", smcwire.AppendDecline(nil, &smcwire.DeclineFields{CLCHeader: smcwire.CLCHeader{Version: 2},
			Diagnosis: smcwire.DiagNoSMCRDev, OSType: smcwire.OSLinux}), false, false,
			&outcome{kind: "fallback", peerDia: smcwire.DiagNoSMCRDev}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := make(chan []byte, 1) // what the hostile server read after its answer
			go func() {
				c, err := ln.AcceptTCP()
				if err != nil {
					srv <- nil
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * hostileWait)) // hang guard
				hdr := make([]byte, 8)
				if _, err := io.ReadFull(c, hdr); err != nil {
					srv <- nil
					return
				}
				rest := make([]byte, int(binary.BigEndian.Uint16(hdr[5:]))-8)
				io.ReadFull(c, rest)
				if tt.answer != nil {
					c.Write(tt.answer)
				}
				if tt.closeIt {
					srv <- nil
					return
				}
				b, _ := io.ReadAll(io.LimitReader(c, 64<<10))
				srv <- b
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 20*hostileWait) // hang guard
			defer cancel()
			c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
			if tt.wantErr {
				require.Error(t, err)
				require.False(t, errors.Is(err, context.DeadlineExceeded), "the handshake timeout, not the hang guard, ends it: %v", err)
				<-srv
				return
			}
			require.NoError(t, err)
			i := info(c)
			require.Equal(t, smcr.ModeFallback, i.Mode)
			switch tt.want.kind {
			case "declined":
				require.Equal(t, tt.want.diag, i.Fallback)
				_, err := c.Write([]byte("after"))
				require.NoError(t, err)
				c.Close()
				b := <-srv
				m, err := smcwire.ParseCLC(b)
				require.NoError(t, err, "the client sent %x", b)
				if m.Type() == smcwire.CLCConfirm { // sent before the CONFIRM_LINK wait
					b = b[len(m):]
					m, err = smcwire.ParseCLC(b)
					require.NoError(t, err, "the client sent %x", b)
				}
				dc, err := smcwire.ParseDecline(m)
				require.NoError(t, err)
				require.Equal(t, tt.want.diag, dc.Diagnosis())
				require.Equal(t, tt.want.oos, dc.OutOfSync())
				require.Equal(t, "after", string(b[len(m):]), "the application's bytes follow the Decline")
			case "fallback":
				require.Equal(t, tt.want.peerDia, i.PeerDiagnosis)
				c.Close()
				<-srv
			}
		})
	}
}
