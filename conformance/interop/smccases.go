//go:build linux

package main

// The SMC-R cases: the guest's kernel (smcguest, AF_SMC) against goroce's
// SMC-R (smcat) on the host side, one of them the server. Each is one line
// in smcCases(); what a case checks is in smccheck.go.

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// smcSpec is what an SMC-R case does.
type smcSpec struct {
	conns     int
	parallel  bool  // the connections at once
	sizes     []int // one message per size, each echoed
	clientEnd string
	serverEnd string        // after the client's EOF; abort: at once, data unread
	idle      time.Duration // the client idles before it ends (TEST_LINK)
	testlink  int           // net.smc.smcr_testlink_time for the case (s); 0: as booted
	lgrEnd    bool          // the link group must end after the host side's linger
	addLink   bool          // the server's ADD_LINK must be answered
	hostTCP   bool          // host side: plain TCP (smcguest -tcp): the kernel must fall back
	// relay: goroce's side is smc-relay in front of a plain TCP echo
	// server (smcguest server -tcp), the kernel's client unmodified.
	relay bool
	// failover: goroce has a second device (failoverAddr, its first
	// link's) beside hostIP (the TCP connection's and the second link's);
	// mid-echo failoverAddr is deleted, then added back (smcfailover.go).
	failover bool
}

const (
	endShut  = "shut"
	endClose = "close"
	endAbort = "abort"
	// smcLinger is the link group linger the host side is given in the
	// lgr-end cases (the kernel's own is 10 minutes, and fixed).
	smcLinger = 3 * time.Second
)

var (
	sizesAll   = []int{1, 1 << 10, 64 << 10, 1 << 20, 16 << 20}
	sizesSmall = []int{1, 1 << 10, 64 << 10}
)

// smcCases are the SMC-R cases, in order.
func smcCases() []testCase {
	var cs []testCase
	one := func(srv side, s smcSpec, loss float64) {
		if s.conns == 0 {
			s.conns = 1
		}
		if s.clientEnd == "" {
			s.clientEnd = endShut
		}
		if s.serverEnd == "" {
			s.serverEnd = endShut
		}
		cs = append(cs, testCase{guest: smcGuest, smc: &s, server: srv, loss: loss, mtu: 1024})
	}
	two := func(s smcSpec, loss float64) {
		one(goroceServer, s, loss)
		one(guestServer, s, loss)
	}
	// The guest side's own proof, no goroce: a plain TCP client must make
	// the kernel's SMC server fall back ("peer did not indicate SMC") and
	// count it. (The kernel against itself is no check: to its own address
	// SMC routes over lo, which has no RoCE device; given one in the pnet
	// table, CONFIRM_LINK times out over rxe0's loopback and both sides
	// fall back with 0x02010000.)
	one(guestServer, smcSpec{hostTCP: true, sizes: sizesSmall}, 0)
	// Against goroce.
	two(smcSpec{sizes: sizesAll}, 0)
	two(smcSpec{conns: 8, parallel: true, sizes: []int{1, 1 << 10, 64 << 10, 1 << 20}}, 0)
	for _, end := range []string{endShut, endClose, endAbort} {
		two(smcSpec{sizes: sizesSmall, clientEnd: end}, 0)
	}
	for _, end := range []string{endClose, endAbort} {
		two(smcSpec{sizes: sizesSmall, serverEnd: end}, 0)
	}
	two(smcSpec{sizes: []int{1 << 10}, lgrEnd: true}, 0)
	two(smcSpec{sizes: []int{1}, addLink: true}, 0)
	two(smcSpec{sizes: []int{1 << 10}, testlink: 2, idle: 7 * time.Second}, 0)
	two(smcSpec{sizes: []int{16 << 20}}, 5)
	// SMC-R on goroce's AF_PACKET backend (smcr.Config.Backend): whole
	// frames on the bridge, as rxe's own, instead of a UDP socket.
	for _, srv := range []side{goroceServer, guestServer} {
		cs = append(cs, testCase{guest: smcGuest, server: srv, mtu: 1024, backend: afpacket,
			smc: &smcSpec{conns: 1, sizes: []int{1, 64 << 10, 1 << 20}, clientEnd: endShut, serverEnd: endShut}})
	}
	// An unmodified TCP server behind goroce's relay, for the kernel's
	// SMC-R client.
	one(goroceServer, smcSpec{sizes: sizesSmall, relay: true}, 0)
	// Link redundancy: two links, one path taken away mid-echo and back.
	two(smcSpec{sizes: []int{16 << 20}, failover: true}, 0)
	return cs
}

// sizeList prints sizes as the programs take them: 1,1k,64k,1m,16m.
func sizeList(sizes []int) string {
	var f []string
	for _, s := range sizes {
		switch {
		case s >= 1<<20 && s%(1<<20) == 0:
			f = append(f, strconv.Itoa(s>>20)+"m")
		case s >= 1<<10 && s%(1<<10) == 0:
			f = append(f, strconv.Itoa(s>>10)+"k")
		default:
			f = append(f, strconv.Itoa(s))
		}
	}
	return strings.Join(f, ",")
}

// smcName is an SMC case's name.
func (c *testCase) smcName() string {
	s := c.smc
	switch {
	case s.hostTCP:
		return "smc fallback: kernel SMC server, plain TCP client"
	}
	n := fmt.Sprintf("smcr conns=%d sizes=%s", s.conns, sizeList(s.sizes))
	if s.parallel {
		n += " parallel"
	}
	if s.relay {
		n += " via smc-relay"
	}
	if s.clientEnd != endShut || s.serverEnd != endShut {
		n += fmt.Sprintf(" end=%s/%s", s.clientEnd, s.serverEnd)
	}
	if s.lgrEnd {
		n += " lgr-end"
	}
	if s.addLink {
		n += " add-link"
	}
	if s.testlink > 0 {
		n += fmt.Sprintf(" testlink=%ds", s.testlink)
	}
	if s.failover {
		n += " failover"
	}
	if c.loss > 0 {
		n += fmt.Sprintf(" loss=%g%%", c.loss)
	}
	return n + c.variant()
}

// smcDirection says who serves and who connects.
func (c *testCase) smcDirection() string {
	switch {
	case c.smc.hostTCP:
		return "kernel srv ← host TCP cli"
	case c.server == guestServer:
		return "kernel srv ← goroce cli"
	}
	return "goroce srv ← kernel cli"
}

// smcTimeout bounds each program of the case, in seconds: a 2 MB/s floor
// for the data (more under loss), plus the idle time.
func (c *testCase) smcTimeout() int {
	total := 0
	for _, s := range c.smc.sizes {
		total += s
	}
	t := 30 + total*c.smc.conns/(1<<20)
	if c.loss > 0 {
		t *= 4
	}
	if c.smc.failover {
		t += int(failoverBudget / time.Second)
	}
	return t + int(c.smc.idle/time.Second)
}

// expectedBytes returns what the kernel's side must have sent and
// received (its SMC-R tx/rx byte counters) in the case.
func (c *testCase) expectedBytes() (tx, rx int64) {
	var total int64
	for _, s := range c.smc.sizes {
		total += int64(s)
	}
	total *= int64(c.smc.conns)
	unread := int64(0)
	if c.smc.clientEnd == endAbort {
		unread = int64(min(c.smc.sizes[len(c.smc.sizes)-1], smcAbortUnread)) * int64(c.smc.conns)
	}
	kernelIsClient := c.server == goroceServer
	switch {
	case c.smc.serverEnd == endAbort && kernelIsClient:
		return 0, 0 // how much the client sent before the reset varies
	case c.smc.serverEnd == endAbort:
		return 0, int64(c.smc.conns) // one byte read per connection
	case kernelIsClient:
		return total, total - unread
	case c.smc.clientEnd == endAbort:
		// goroce's client aborts once it has sent everything (smcat
		// --end abort: SetLinger(0), Close), wherever the echo is.
		return 0, 0
	}
	return total, total
}

// smcAbortUnread is how much of its last echo an aborting smcguest client
// leaves unread (smcguest's abortUnread).
const smcAbortUnread = 32 << 10

// guestSMCCommand returns the guest's program line for the case: its
// client when goroce serves, its server when goroce connects.
func (c *testCase) guestSMCCommand(port int, e endpoints) []string {
	s := c.smc
	t := strconv.Itoa(c.smcTimeout()) + "s"
	if c.server == goroceServer {
		a := []string{"smcguest", "client", e.goroceAddr, strconv.Itoa(port), "-conns", strconv.Itoa(s.conns),
			"-sizes", sizeList(s.sizes), "-end", s.clientEnd, "-timeout", t}
		if s.parallel {
			a = append(a, "-parallel")
		}
		if s.idle > 0 {
			a = append(a, "-idle", s.idle.String())
		}
		if s.serverEnd == endAbort {
			a = append(a, "-peer-abort")
		}
		if s.failover {
			a = append(a, "-hold-at", sizeList(failoverHolds(s.sizes)), "-hold", failoverHoldFile)
		}
		return a
	}
	a := []string{"smcguest", "server", strconv.Itoa(port), "-n", strconv.Itoa(s.conns), "-timeout", t}
	if s.serverEnd != endShut {
		a = append(a, "-"+s.serverEnd)
	}
	if s.clientEnd == endAbort {
		a = append(a, "-peer-abort")
	}
	return a
}

// hostTCPCommand is the plain TCP client of the fallback case, run on the
// host side (smcguest runs there too: it is a static linux/amd64 program).
func (c *testCase) hostTCPCommand(port int, e endpoints) []string {
	return []string{"smcguest", "client", e.peerAddr, strconv.Itoa(port), "-tcp", "-conns", strconv.Itoa(c.smc.conns),
		"-sizes", sizeList(c.smc.sizes), "-end", c.smc.clientEnd, "-timeout", strconv.Itoa(c.smcTimeout()) + "s"}
}

// listSMC prints an SMC case for -list: both sides' command lines.
func listSMC(i int, c *testCase, e endpoints) {
	port := c.port(i)
	fmt.Printf("%2d  %s, %s (guest kernel: -smc-kernel-pkg)\n", i, c.name(), c.direction())
	switch {
	case c.smc.hostTCP:
		fmt.Printf("    kernel: %s\n    host:   %s\n", shellQuote(c.guestSMCCommand(port, e)), shellQuote(c.hostTCPCommand(port, e)))
	default:
		per := ""
		if c.server == guestServer {
			per = fmt.Sprintf(" (one per connection, x%d; the harness feeds stdin and checks stdout)", c.smc.conns)
		}
		fmt.Printf("    kernel: %s\n    goroce: bin/%s%s\n", shellQuote(c.guestSMCCommand(port, e)), shellQuote(smcatCommand(c, e, port)), per)
	}
	if c.loss > 0 {
		fmt.Printf("    (kernel side: tc qdisc replace dev IFACE root netem loss %g%%)\n", c.loss)
	}
	if c.smc.testlink > 0 {
		fmt.Printf("    (kernel side: sysctl -w net.smc.smcr_testlink_time=%d)\n", c.smc.testlink)
	}
	if c.smc.failover {
		fmt.Printf("    (host side: ip addr add %s/%d dev br0; at the writer's first hold deleted, at its second added back)\n", failoverAddr, prefixLen)
	}
}
