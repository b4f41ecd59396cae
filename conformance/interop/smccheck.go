//go:build linux

package main

// What an SMC-R case must show, from three sources: the programs (exit 0,
// every connection SMC-R and every echo intact), the guest kernel's own
// statistics (its SMC-R connection and byte counters up by what the case
// did, its fallback counters unchanged: a fallback is a failure with its
// reason), and the capture (valid ICRCs, the CLC handshake, and the LLC
// and CDC messages the case is about).

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// smcWire counts the SMC messages of a capture by sender (its role
// address): CLC types, LLC types ("ADD_LINK_v2", "ADD_LINK_v2 RESP") and
// CDC connection flags; msgs are the LLC and CDC messages in order, by
// their wire addresses.
type smcWire struct {
	clc  map[string]map[string]int
	llc  map[string]map[string]int
	cdc  map[string]map[string]int
	msgs []smcMsg
}

// smcMsg is one LLC or CDC message of a capture.
type smcMsg struct {
	from, to string // wire addresses
	kind     string // LLC or CDC
	name     string // an LLC's type without its version ("ADD_LINK")
	resp     bool
	words    []string // the rest of rocedump's summary: flags, fields
}

// on reports whether m went between a and b, either way.
func (m smcMsg) on(a, b string) bool { return (m.from == a && m.to == b) || (m.from == b && m.to == a) }

// has reports whether m's summary has word (a CDC flag, "rejected").
func (m smcMsg) has(word string) bool {
	for _, w := range m.words {
		if w == word {
			return true
		}
	}
	return false
}

// linkNum is the link number an LLC's summary names ("link 2"), or "".
func (m smcMsg) linkNum() string {
	for i, w := range m.words[:max(len(m.words)-1, 0)] {
		if w == "link" {
			return m.words[i+1]
		}
	}
	return ""
}

var llcVersionRE = regexp.MustCompile(`_v\d$`)

func newSMCWire() *smcWire {
	return &smcWire{clc: map[string]map[string]int{}, llc: map[string]map[string]int{}, cdc: map[string]map[string]int{}}
}

var smcLineRE = regexp.MustCompile(`^\S+ (\S+)\.\d+ > (\S+)\.\d+: .*? smc (CLC|LLC|CDC) (.*)$`)

var cdcFlags = []string{"peer_done_writing", "peer_conn_closed", "peer_conn_abort"}

// add reads one rocedump text line; role maps a wire address to the one
// the counts are by.
func (w *smcWire) add(line string, role func(string) string) {
	m := smcLineRE.FindStringSubmatch(line)
	if m == nil {
		return
	}
	from, kind, rest := role(m[1]), m[3], strings.Fields(m[4])
	if len(rest) == 0 {
		return
	}
	if kind != "CLC" {
		msg := smcMsg{from: m[1], to: m[2], kind: kind, words: rest}
		if kind == "LLC" {
			msg.name, msg.resp = llcVersionRE.ReplaceAllString(rest[0], ""), len(rest) > 1 && rest[1] == "RESP"
		}
		w.msgs = append(w.msgs, msg)
	}
	inc := func(mm map[string]map[string]int, k string) {
		if mm[from] == nil {
			mm[from] = map[string]int{}
		}
		mm[from][k]++
	}
	switch kind {
	case "CLC":
		inc(w.clc, rest[0])
	case "LLC":
		name := rest[0]
		if len(rest) > 1 && rest[1] == "RESP" {
			name += " RESP"
		}
		inc(w.llc, name)
	case "CDC":
		for _, f := range rest {
			for _, fl := range cdcFlags {
				if f == fl {
					inc(w.cdc, fl)
				}
			}
		}
	}
}

// llcCount counts LLC messages from a sender whose name starts with
// prefix and is (resp) or is not a response.
func (w *smcWire) llcCount(from, prefix string, resp bool) int {
	n := 0
	for k, v := range w.llc[from] {
		if strings.HasPrefix(k, prefix) && strings.HasSuffix(k, " RESP") == resp {
			n += v
		}
	}
	return n
}

// checkSMC returns the case's failures.
func checkSMC(c *testCase, r *result) []string {
	var f []string
	s, o := c.smc, r.smc
	fail := func(format string, args ...any) { f = append(f, fmt.Sprintf(format, args...)) }

	// The programs.
	kernelProg := "the guest's smcguest " + map[bool]string{true: "client", false: "server"}[c.server == goroceServer && !s.hostTCP]
	if r.guestRC != 0 {
		fail("%s exit status %d", kernelProg, r.guestRC)
	}
	switch {
	case s.hostTCP:
		if r.goroceRC != 0 {
			fail("the host's TCP client exit status %d", r.goroceRC)
		}
	case c.server == goroceServer:
		if !o.hostServer {
			fail("goroce's smcat server did not exit after its %d connection(s) (stopped; exit %d)", s.conns, r.goroceRC)
		} else if r.goroceRC != 0 {
			fail("goroce's smcat server exit status %d", r.goroceRC)
		}
	default:
		f = append(f, checkHostConns(c, o.hostConns)...)
	}
	out := r.guestOut + "\n" + r.goroceOut
	wantDone := fmt.Sprintf("done conns=%d", s.conns)
	if !strings.Contains(out, wantDone) {
		fail("no %q from smcguest", wantDone)
	}
	// The kernel side's own account of each connection (smc_diag).
	kout := r.guestOut
	modes := modeRE.FindAllStringSubmatch(kout, -1)
	switch {
	case s.hostTCP:
		if !strings.Contains(kout, "mode=fallback reason=0x03010000") {
			fail("the guest's server did not report its connection fallen back with 0x03010000 (peer did not indicate SMC)")
		}
	default:
		for _, m := range modes {
			if m[1] != "smcr" {
				fail("a connection ran as %s, not SMC-R", strings.TrimSpace(m[0]))
			}
		}
	}

	// The kernel's statistics.
	d := o.delta
	reasons, fb := d.fallbacks()
	switch {
	case s.hostTCP:
		if d["fallback.srv_cnt"] != int64(s.conns) || d["fallback.srv.0x03010000"] != int64(s.conns) {
			fail("the kernel counted fallbacks %v (server total %+d), not %d × server 0x03010000 (peer did not indicate SMC)", reasons, d["fallback.srv_cnt"], s.conns)
		}
		if n := d.smcrConns("srv"); n != 0 {
			fail("the kernel counted %d SMC-R server connection(s) for a plain TCP client", n)
		}
		return append(f, checkHostTCPWire(r)...)
	case fb != 0:
		fail("fallback to TCP: the kernel counted %d fallback(s): %s", fb, strings.Join(reasons, ", "))
	}
	side, sideName := "clnt", "client"
	if c.server == guestServer {
		side, sideName = "srv", "server"
	}
	if n := d.smcrConns(side); n != int64(s.conns) {
		fail("the kernel counted %d SMC-R %s connection(s) (v1+v2), not %d", n, sideName, s.conns)
	}
	if tx, rx := c.expectedBytes(); d["smcr.tx_bytes"] < tx || d["smcr.rx_bytes"] < rx {
		fail("the kernel's SMC-R byte counters rose by tx %d, rx %d: want at least tx %d, rx %d", d["smcr.tx_bytes"], d["smcr.rx_bytes"], tx, rx)
	}
	if s.lgrEnd && !o.lgrGone {
		fail("the link group did not end within %v of its last connection (goroce's linger %v): %s", smcLinger+20*time.Second, smcLinger, summarize(o.lgrAfter))
	}
	f = append(f, checkSMCWire(c, r)...)
	if s.failover {
		f = append(f, checkFailover(c, r)...)
	}
	return f
}

var modeRE = regexp.MustCompile(`mode=(\S+)( reason=\S+ \([^)]*\))?`)

// checkHostConns checks goroce's client connections: exit 0 and the whole
// echo back (an aborting client or server leaves some of it).
func checkHostConns(c *testCase, conns []hostConn) []string {
	var f []string
	if len(conns) != c.smc.conns {
		f = append(f, fmt.Sprintf("goroce's smcat client ran %d of %d connections", len(conns), c.smc.conns))
	}
	for i, hc := range conns {
		if hc.rc != 0 {
			f = append(f, fmt.Sprintf("goroce's smcat client (conn %d) exit status %d: %s", i, hc.rc, summarize(tail(hc.out, 3))))
		}
		if hc.mismatch != "" {
			f = append(f, fmt.Sprintf("conn %d: %s", i, hc.mismatch))
			continue
		}
		partial := c.smc.clientEnd == endAbort || c.smc.serverEnd == endAbort
		if !partial && hc.echoed != hc.sent {
			f = append(f, fmt.Sprintf("conn %d: %d bytes sent, %d echoed", i, hc.sent, hc.echoed))
		}
	}
	return f
}

// checkHostTCPWire: a plain TCP connection puts no RoCE and no CLC on the
// wire.
func checkHostTCPWire(r *result) []string {
	if r.cap == nil {
		return []string{"no capture"}
	}
	var f []string
	if r.cap.packets != 0 {
		f = append(f, fmt.Sprintf("%d RoCE packets on the wire for a plain TCP connection", r.cap.packets))
	}
	for from, m := range r.cap.smc.clc {
		f = append(f, fmt.Sprintf("CLC messages from %s (%v) for a plain TCP connection", from, m))
	}
	return f
}

// checkSMCWire checks the capture of a case against goroce.
func checkSMCWire(c *testCase, r *result) []string {
	cc := r.cap
	if cc == nil {
		return []string{"no capture"}
	}
	var f []string
	fail := func(format string, args ...any) { f = append(f, fmt.Sprintf(format, args...)) }
	s, w := c.smc, cc.smc
	kernel, goroce := guestIP, hostIP
	client, server := kernel, goroce
	if c.server == guestServer {
		client, server = goroce, kernel
	}
	name := map[string]string{guestIP: "the kernel", hostIP: "goroce"}

	if cc.packets == 0 {
		fail("the capture has no RoCE packets")
	}
	if cc.icrcBad > 0 {
		fail("%d of %d RoCE packets have a bad ICRC", cc.icrcBad, cc.packets)
	}
	if cc.unverifiable > 0 {
		fail("%d of %d RoCE packets could not be ICRC-checked", cc.unverifiable, cc.packets)
	}
	if cc.otherNAKs > 0 {
		fail("%d NAKs other than PSN sequence error", cc.otherNAKs)
	}
	if c.loss == 0 && cc.psnNAKs > 0 {
		fail("%d PSN-sequence NAKs in a loss-free case", cc.psnNAKs)
	}
	for _, x := range []struct{ from, typ string }{{client, "Proposal"}, {server, "Accept"}, {client, "Confirm"}} {
		if w.clc[x.from][x.typ] == 0 {
			fail("no CLC %s from %s", x.typ, name[x.from])
		}
	}
	if n := w.clc[client]["Decline"] + w.clc[server]["Decline"]; n > 0 {
		fail("%d CLC Decline(s) on the wire", n)
	}
	// Each case starts without a link group: a first contact.
	if w.llcCount(server, "CONFIRM_LINK", false) == 0 || w.llcCount(client, "CONFIRM_LINK", true) == 0 {
		fail("no CONFIRM_LINK from %s answered by %s", name[server], name[client])
	}
	if s.addLink {
		if w.llcCount(server, "ADD_LINK", false) == 0 && c.server == guestServer {
			fail("the kernel (server) sent no ADD_LINK")
		}
		if w.llcCount(server, "ADD_LINK", false) > 0 && w.llcCount(client, "ADD_LINK", true) == 0 {
			fail("%s's ADD_LINK got no answer from %s", name[server], name[client])
		}
	}
	if s.testlink > 0 {
		if w.llcCount(kernel, "TEST_LINK", false) == 0 {
			fail("the kernel sent no TEST_LINK in the idle time (smcr_testlink_time %ds, idle %v)", s.testlink, s.idle)
		} else if w.llcCount(goroce, "TEST_LINK", true) == 0 {
			fail("goroce answered none of the kernel's %d TEST_LINK(s)", w.llcCount(kernel, "TEST_LINK", false))
		}
	}
	if s.lgrEnd && w.llcCount(goroce, "DELETE_LINK", false) == 0 {
		fail("goroce sent no DELETE_LINK after its linger")
	}
	// How each side ended its connections shows in its CDC flags.
	want := map[string]string{endShut: "peer_done_writing", endClose: "peer_conn_closed", endAbort: "peer_conn_abort"}
	// (A server that aborts after the first byte ends the connection
	// before the client gets to end it.)
	if fl := want[s.clientEnd]; w.cdc[client][fl] == 0 && s.serverEnd != endAbort {
		fail("no CDC %s from %s (client end %s)", fl, name[client], s.clientEnd)
	}
	if s.serverEnd == endAbort && w.cdc[server]["peer_conn_abort"] == 0 {
		fail("no CDC peer_conn_abort from %s (server end abort)", name[server])
	}
	return f
}
