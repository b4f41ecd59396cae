//go:build linux

package main

// The failover cases (smcSpec.failover): goroce has two devices, on
// failoverAddr (the first, so the first link's) and on hostIP (the TCP
// connection's address, so the second link's); the guest's one rxe0 has a
// link to each. A 16 MiB echo stops twice on its writer's side: at half
// way the harness sees the guest list two active links and deletes
// failoverAddr from br0; the writer goes on, so the first link's next
// sends fail (goroce's socket has no address, the kernel's packets no
// receiver) and the connection moves to the second link; at the end of
// what is sent the harness waits for goroce to report the first link
// down, adds failoverAddr back and waits for the guest to list two active
// links again (goroce adds the link anew), and the writer ends the
// connection. The holds make the cut fall mid-echo whatever the speed,
// and every wait is bounded.

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

const (
	// failoverAddr is goroce's second address on br0.
	failoverAddr = "198.18.0.2"
	// failoverHoldFile is the guest client's -hold prefix.
	failoverHoldFile = "/tmp/failover"
	// failoverBudget is what the case's time limit gets for the waits:
	// the second link (first contact, then again after relinkWait), the
	// failover.
	failoverBudget = 90 * time.Second
	twoLinksWait   = 30 * time.Second // the first ADD_LINK
	linkDownWait   = 30 * time.Second // the cut found, the connection moved
	relinkWait     = 45 * time.Second // goroce's relink: 5 s, then 10 s more if that attempt was early
	// failoverTestLink is goroce's TEST_LINK interval in the case: with
	// goroce serving, nothing else of goroce's goes over the cut link
	// (the kernel's sends into it are lost).
	failoverTestLink = 2 * time.Second
)

// failoverHolds are the stream offsets the writer stops at: half way and
// at the end.
func failoverHolds(sizes []int) []int {
	total := 0
	for _, s := range sizes {
		total += s
	}
	return []int{total / 2, total}
}

// failoverOutcome is what the harness saw of a failover case.
type failoverOutcome struct {
	lgrTwo   string // smcguest lgr before the cut
	lgrAgain string // ... after failoverAddr came back
	cut      bool   // failoverAddr was deleted
	restored bool   // ... and added back
	linkDown string // goroce's line reporting the first link down
}

// record keeps what the harness saw in base.failover.txt and a note.
func (fo *failoverOutcome) record(r *result, base string) {
	os.WriteFile(base+".failover.txt", []byte(fmt.Sprintf("# smcguest lgr before %[1]s was taken away\n%[2]s\n# goroce: %[3]s\n# smcguest lgr after %[1]s came back\n%[4]s\n",
		failoverAddr, fo.lgrTwo, fo.linkDown, fo.lgrAgain)), 0o644)
	r.notes = append(r.notes, fmt.Sprintf("failover: the guest listed %d active link(s) before the cut, %d after %s came back; goroce: %s",
		activeLinks(fo.lgrTwo), activeLinks(fo.lgrAgain), failoverAddr, strings.TrimSpace(strings.TrimPrefix(fo.linkDown, "smcat: "))))
}

// linkDownRE is smcat -v's line for a link that went down (describeLink).
var linkDownRE = regexp.MustCompile(`(?m)^.*: link \d+ down.*$`)

// activeLinksRE counts the links smcguest lgr lists as active.
var activeLinksRE = regexp.MustCompile(`(?m)^lgr\.\d+\.link\.\d+\.state=active$`)

// activeLinks is how many active links an smcguest lgr listing has.
func activeLinks(lgr string) int { return len(activeLinksRE.FindAllString(lgr, -1)) }

var linkFieldRE = regexp.MustCompile(`(?m)^lgr\.\d+\.link\.(\d+)\.(peer_gid|conns)=(\S+)$`)

// connsByPeer returns, from an smcguest lgr listing, how many connections
// the guest has on its links to each peer address (the IPv4 of the
// link's peer GID, ::ffff:a.b.c.d).
func connsByPeer(lgr string) map[string]int {
	peer, conns := map[string]string{}, map[string]int{}
	for _, m := range linkFieldRE.FindAllStringSubmatch(lgr, -1) {
		if m[2] == "conns" {
			conns[m[1]], _ = strconv.Atoi(m[3])
			continue
		}
		// 0000:…:ffff:c612:000b
		g := strings.Split(m[3], ":")
		if len(g) != 8 {
			continue
		}
		hi, err1 := strconv.ParseUint(g[6], 16, 16)
		lo, err2 := strconv.ParseUint(g[7], 16, 16)
		if err1 == nil && err2 == nil {
			peer[m[1]] = fmt.Sprintf("%d.%d.%d.%d", hi>>8, hi&0xff, lo>>8, lo&0xff)
		}
	}
	out := map[string]int{}
	for id, a := range peer {
		out[a] += conns[id]
	}
	return out
}

// failoverAddrOnBr0 adds (or deletes) failoverAddr on the namespace's
// bridge.
func (h *harness) failoverAddrOnBr0(ctx context.Context, add bool) error {
	op := map[bool]string{true: "add", false: "del"}[add]
	return h.ns.ip(ctx, "addr", op, fmt.Sprintf("%s/%d", failoverAddr, prefixLen), "dev", "br0")
}

// waitGuestLinks polls the guest's link groups until n links are active
// or d passes, and returns the last listing.
func (h *harness) waitGuestLinks(ctx context.Context, n int, d time.Duration) string {
	out, _ := h.guestLgrUntil(ctx, d, 200*time.Millisecond, func(out string) bool { return activeLinks(out) >= n })
	return out
}

// failoverStep is what the harness does at hold i, the writer stopped;
// goroceOut reads goroce's output so far.
func (h *harness) failoverStep(ctx context.Context, r *result, i int, goroceOut func() string) {
	fo := r.smc.failover
	switch i {
	case 0:
		fo.lgrTwo = h.waitGuestLinks(ctx, 2, twoLinksWait)
		if err := h.failoverAddrOnBr0(ctx, false); err != nil {
			r.fail("taking %s away: %v", failoverAddr, err)
			return
		}
		fo.cut = true
	case 1:
		if !fo.cut {
			return
		}
		deadline := time.Now().Add(linkDownWait)
		for fo.linkDown = linkDownRE.FindString(goroceOut()); fo.linkDown == "" && time.Now().Before(deadline); {
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			fo.linkDown = linkDownRE.FindString(goroceOut())
		}
		// Back at once: goroce adds the link again relinkWait after the
		// loss, on a path that must be there by then.
		if err := h.failoverAddrOnBr0(ctx, true); err != nil {
			r.fail("adding %s back: %v", failoverAddr, err)
			return
		}
		fo.restored = true
		fo.lgrAgain = h.waitGuestLinks(ctx, 2, relinkWait)
	}
}

// failoverGuestClient runs the guest's client of a failover case with
// goroce serving: in the background, the harness acting at each of its
// holds (smcguest -hold-at) and releasing it.
func (h *harness) failoverGuestClient(ctx context.Context, c *testCase, r *result, port int, base string) {
	t := c.smcTimeout()
	cmd := fmt.Sprintf("rm -f %s.* && bgstart cli timeout %d %s", failoverHoldFile, t, shellQuote(c.guestSMCCommand(port, guestEnds)))
	if _, err := h.vm.mustRun(ctx, 15*time.Second, cmd); err != nil {
		r.fail("starting the guest's smcguest client: %v", err)
		return
	}
	goroceOut := func() string { return readFileString(base + ".goroce.txt") }
	for i := range len(failoverHolds(c.smc.sizes)) {
		name := failoverHoldFile + "." + strconv.Itoa(i)
		// Until the hold is reached or the client has exited, in the
		// guest (one round trip), for at most the case's time limit.
		wait := fmt.Sprintf("i=0; while [ ! -e %[1]s.reached ] && ! bgdone cli && [ $i -lt %[2]d ]; do usleep 100000; i=$((i+1)); done; test -e %[1]s.reached",
			name, t*10)
		if _, err := h.vm.mustRun(ctx, time.Duration(t+10)*time.Second, wait); err != nil {
			r.fail("the guest's client never reached its hold %d (%s.reached): it exited or ran out of time", i, name)
			break
		}
		h.failoverStep(ctx, r, i, goroceOut)
		if _, err := h.vm.mustRun(ctx, 10*time.Second, "touch "+name); err != nil {
			r.fail("releasing the guest's client at hold %d: %v", i, err)
		}
	}
	// Whatever happened, no hold is left to wait on.
	h.vm.run(ctx, 10*time.Second, fmt.Sprintf("touch %[1]s.0 %[1]s.1", failoverHoldFile))
	out, _, err := h.vm.run(ctx, time.Duration(t+30)*time.Second, fmt.Sprintf("bgreap cli %d", t*10))
	if err != nil {
		r.fail("collecting the guest's smcguest client: %v", err)
	}
	r.guestRC = exitStatus(out, "GOROCE-EXIT ")
	r.guestOut = stripLines(out, "GOROCE-EXIT ")
}

// failoverHold is the hold of goroce's client in a failover case: the
// harness writes its stdin, and stops at the same points.
func (h *harness) failoverHold(ctx context.Context, c *testCase, r *result) *streamHold {
	at := failoverHolds(c.smc.sizes)
	hd := &streamHold{do: func(i int, stderr func() string) { h.failoverStep(ctx, r, i, stderr) }}
	for _, a := range at {
		hd.at = append(hd.at, int64(a))
	}
	return hd
}

// streamHold stops a host-side client's writer at stream offsets (at,
// increasing): do runs there, the writer waiting for it.
type streamHold struct {
	at []int64
	do func(i int, stderr func() string)
}

// until returns how many of n bytes from offset sent may be written
// before hold point next.
func (s *streamHold) until(next int, sent int64, n int) int {
	if s == nil || next >= len(s.at) || s.at[next] < sent {
		return n
	}
	return int(min(int64(n), s.at[next]-sent))
}

// checkFailover returns a failover case's failures: the guest's listings,
// and on the wire the first link's DELETE_LINK, the connection's CDCs
// before it on the first link and after it on the second (a failover
// validation among them), and a link added again after it.
func checkFailover(c *testCase, r *result) []string {
	fo := r.smc.failover
	if fo == nil {
		return []string{"the failover case kept no record"}
	}
	var f []string
	fail := func(format string, args ...any) { f = append(f, fmt.Sprintf(format, args...)) }
	if n := activeLinks(fo.lgrTwo); n != 2 {
		fail("before %s was taken away the guest listed %d active link(s), not 2: %s", failoverAddr, n, summarize(fo.lgrTwo))
	} else if n := connsByPeer(fo.lgrTwo)[failoverAddr]; n != c.smc.conns {
		fail("before the cut the guest listed %d connection(s) on its link to %s, not %d", n, failoverAddr, c.smc.conns)
	}
	if !fo.cut {
		return append(f, fmt.Sprintf("%s was not taken away", failoverAddr))
	}
	if fo.linkDown == "" {
		fail("goroce reported no link down within %v of %s's removal", linkDownWait, failoverAddr)
	}
	if !fo.restored {
		fail("%s was not added back", failoverAddr)
	} else if n := activeLinks(fo.lgrAgain); n != 2 {
		fail("within %v of %s's return the guest listed %d active link(s), not 2: %s", relinkWait, failoverAddr, n, summarize(fo.lgrAgain))
	} else if n := connsByPeer(fo.lgrAgain)[hostIP]; n != c.smc.conns {
		fail("after the failover the guest listed %d connection(s) on its link to %s (the surviving one), not %d", n, hostIP, c.smc.conns)
	}
	if r.cap == nil {
		return append(f, "no capture")
	}
	return append(f, checkFailoverWire(r.cap.smc.msgs)...)
}

// checkFailoverWire checks the capture's SMC messages of a failover case.
func checkFailoverWire(msgs []smcMsg) []string {
	var f []string
	fail := func(format string, args ...any) { f = append(f, fmt.Sprintf(format, args...)) }
	first := func(m smcMsg) bool { return m.on(guestIP, failoverAddr) }
	second := func(m smcMsg) bool { return m.on(guestIP, hostIP) }
	del := -1
	for i, m := range msgs {
		if m.kind == "LLC" && m.name == "DELETE_LINK" && !m.resp && !m.has("all") {
			del = i
			break
		}
	}
	if del < 0 {
		return []string{fmt.Sprintf("no DELETE_LINK of one link on the wire after %s was taken away", failoverAddr)}
	}
	if !second(msgs[del]) {
		fail("the DELETE_LINK went %s > %s, not over the surviving link (%s, %s)", msgs[del].from, msgs[del].to, guestIP, hostIP)
	}
	count := func(ms []smcMsg, match func(smcMsg) bool) int {
		n := 0
		for _, m := range ms {
			if match(m) {
				n++
			}
		}
		return n
	}
	before, after := msgs[:del], msgs[del+1:]
	cdcOn := func(path func(smcMsg) bool) func(smcMsg) bool {
		return func(m smcMsg) bool { return m.kind == "CDC" && path(m) }
	}
	if count(before, cdcOn(first)) == 0 {
		fail("no CDC on the first link (%s, %s) before the DELETE_LINK", guestIP, failoverAddr)
	}
	if count(after, cdcOn(second)) == 0 {
		fail("no CDC on the surviving link (%s, %s) after the DELETE_LINK", guestIP, hostIP)
	}
	// A connection moves with a failover validation: the first CDC on the
	// surviving link, whichever side moved first.
	for _, m := range msgs {
		if cdcOn(second)(m) {
			if !m.has("failover_validation") {
				fail("the first CDC on the surviving link (%s > %s) is no failover_validation", m.from, m.to)
			}
			break
		}
	}
	// A new link's ADD_LINK goes over the link there is, its CONFIRM_LINK
	// over the new one: the second link's over the first path, the
	// first's anew over the second.
	if !linkAdded(before, first, second) {
		fail("the second link was not added before the cut: no ADD_LINK answered on the first link with its CONFIRM_LINK answered on the second")
	}
	if !linkAdded(after, second, first) {
		fail("no link added again after the DELETE_LINK: no ADD_LINK answered (unrejected) on the surviving link with its CONFIRM_LINK answered on a new one to %s", failoverAddr)
	}
	return f
}

// linkAdded reports whether msgs add a link: an ADD_LINK and its
// unrejected answer on via, then CONFIRM_LINK and its answer for the same
// link number on the new link's path.
func linkAdded(msgs []smcMsg, via, path func(smcMsg) bool) bool {
	is := func(m smcMsg, name string, resp bool, on func(smcMsg) bool) bool {
		return m.kind == "LLC" && m.name == name && m.resp == resp && !m.has("rejected") && on(m)
	}
	for i, m := range msgs {
		if !is(m, "ADD_LINK", false, via) {
			continue
		}
		n, step := m.linkNum(), 0
		for _, x := range msgs[i+1:] {
			if x.linkNum() != n {
				continue
			}
			switch {
			case step == 0 && is(x, "ADD_LINK", true, via),
				step == 1 && is(x, "CONFIRM_LINK", false, path),
				step == 2 && is(x, "CONFIRM_LINK", true, path):
				step++
			}
		}
		if step == 3 {
			return true
		}
	}
	return false
}
