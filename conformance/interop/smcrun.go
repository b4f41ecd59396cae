//go:build linux

package main

// Running one SMC-R case: the guest's link groups cleared, its SMC
// statistics read before and after, a capture, the two sides' programs,
// then the checks of smccheck.go.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// smcOutcome is what an SMC case leaves besides the programs' output.
type smcOutcome struct {
	delta      smcStats   // the guest's SMC statistics, after - before
	lgrBefore  int        // link groups left from before (cleared by a reload)
	lgrAfter   string     // smcguest lgr after the case
	lgrGone    bool       // lgr-end cases: the link group ended in time
	hostConns  []hostConn // goroce's client connections
	hostServer bool       // goroce's server exited by itself
	// goroceStats: goroce's SMC statistics at the case's end (smcr stats
	// json), where goroce served.
	goroceStats map[string]int64
	failover    *failoverOutcome // a failover case's (smcfailover.go)
}

func (h *harness) runSMCCase(ctx context.Context, idx int, c *testCase, tag runTag) *result {
	r := &result{name: c.name(), dir: c.direction(), start: time.Now(), guestRC: -1, goroceRC: -1, tag: tag, smc: &smcOutcome{}}
	defer func() {
		r.dur = time.Since(r.start)
		r.pass = len(r.reasons) == 0
	}()
	s := c.smc
	if !s.hostTCP && !h.hostSMCBuilt() {
		r.skipped, r.skipWhy = true, fmt.Sprintf("host SMC-R not built yet (no %s)", filepath.Join(h.opts.bin, smcatProg))
		return r
	}
	if err := h.setEnv(ctx, c); err != nil {
		r.fail("setting up MTU/loss: %v", err)
		return r
	}
	base := filepath.Join(h.out, "cases", fmt.Sprintf("%02d-%s", idx, c.slug())) + tag.suffix()
	r.files = base
	port := c.port(tag.portIdx(idx))
	if !s.hostTCP {
		if err := h.smcFresh(ctx, r); err != nil {
			r.fail("clearing the guest's link groups: %v", err)
			return r
		}
	}
	if s.testlink > 0 {
		if _, err := h.vm.mustRun(ctx, 10*time.Second, fmt.Sprintf("sysctl -w net.smc.smcr_testlink_time=%d", s.testlink)); err != nil {
			r.fail("lowering net.smc.smcr_testlink_time: %v", err)
			return r
		}
		defer h.vm.run(context.WithoutCancel(ctx), 10*time.Second, "sysctl -w net.smc.smcr_testlink_time="+h.smcTestlinkDefault)
	}
	before, err := h.readSMCStats(ctx)
	if err != nil {
		r.fail("reading the guest's SMC statistics: %v", err)
		return r
	}
	var alias map[string]string
	if s.failover {
		if err := h.failoverAddrOnBr0(ctx, true); err != nil {
			r.fail("goroce's second address: %v", err)
			return r
		}
		defer h.failoverAddrOnBr0(context.WithoutCancel(ctx), false)
		r.smc.failover = &failoverOutcome{}
		alias = map[string]string{failoverAddr: hostIP} // goroce's either way
	}
	capt, err := startCapture(ctx, h.ns, h.ps, base+".pcap")
	if err != nil {
		r.fail("capture: %v", err)
		return r
	}
	switch {
	case s.hostTCP:
		h.smcHostTCP(ctx, c, r, port, base)
	case c.server == goroceServer && s.relay:
		h.smcGoroceRelay(ctx, c, r, port, base)
	case c.server == goroceServer:
		h.smcGoroceServer(ctx, c, r, port, base)
	default:
		h.smcGoroceClient(ctx, c, r, port, base)
	}
	dropped, cerr := capt.stop()
	if cerr != nil {
		r.fail("capture: %v", cerr)
	}
	after, err := h.readSMCStats(ctx)
	if err != nil {
		r.fail("reading the guest's SMC statistics after the case: %v", err)
	} else {
		r.smc.delta = after.delta(before)
		smcStatsAgree(c, r)
	}
	h.smcLgrAfter(ctx, c, r)
	os.WriteFile(base+".kernel.txt", []byte(r.guestOut), 0o644)
	os.WriteFile(base+".goroce.txt", []byte(r.goroceOut), 0o644)
	os.WriteFile(base+".smc-stats-delta.txt", []byte(formatCounters(r.smc.delta)+"\n"), 0o644)
	os.WriteFile(base+".lgr.txt", []byte(r.smc.lgrAfter+"\n"), 0o644)
	if r.smc.failover != nil {
		r.smc.failover.record(r, base)
	}
	if cerr == nil {
		cc, err := checkCaptureAs(ctx, filepath.Join(h.opts.bin, "rocedump"), base+".pcap", alias)
		if err != nil {
			r.fail("rocedump: %v", err)
		} else {
			cc.dropped = dropped
			r.cap = cc
			os.WriteFile(base+".stats.txt", []byte(cc.stats), 0o644)
		}
	}
	for _, x := range checkSMC(c, r) {
		r.fail("%s", x)
	}
	return r
}

// smcFresh makes sure no link group is left from an earlier case: each
// case is a first contact (CONFIRM_LINK, ADD_LINK), and a dead peer's
// link group cannot be picked up. The kernel keeps an unused link group
// for 10 minutes and has no command to end one: the smc module is
// reloaded (which ends them with DELETE_LINK) and set up again.
func (h *harness) smcFresh(ctx context.Context, r *result) error {
	out, err := h.vm.mustRun(ctx, 10*time.Second, "smcguest lgr | grep '^lgrs='")
	if err != nil {
		return err
	}
	var n int
	fmt.Sscanf(strings.TrimSpace(out), "lgrs=%d", &n)
	r.smc.lgrBefore = n
	if n == 0 {
		return nil
	}
	// The module was seen busy (EAGAIN) right after a failed case, which
	// made the case's retry fail on the reload: tried again for up to
	// 20 s, then the last refusal is the error.
	cmd := fmt.Sprintf("rmmod smc_diag 2>/dev/null; i=0; until rmmod smc 2>/dev/null; do i=$((i+1)); if [ $i -ge 20 ]; then rmmod smc; exit 1; fi; sleep 1; done; "+
		"insmod /lib/modules/smc.ko && insmod /lib/modules/smc_diag.ko && "+
		"smcguest pnet add %s eth0 rxe0 1 >/dev/null && smcguest ueid add %s >/dev/null && smcguest lgr | grep '^lgrs='", InteropPnetID, InteropUEID)
	out, err = h.vm.mustRun(ctx, 60*time.Second, cmd)
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) != "lgrs=0" {
		return fmt.Errorf("after reloading smc: %s", strings.TrimSpace(out))
	}
	r.notes = append(r.notes, fmt.Sprintf("%d link group(s) left from before: smc reloaded", n))
	return nil
}

// smcLgrAfter records the guest's link groups after the case; in an
// lgr-end case it waits (bounded) for the host side's linger to end the
// link group.
func (h *harness) smcLgrAfter(ctx context.Context, c *testCase, r *result) {
	wait := time.Duration(0)
	if c.smc.lgrEnd {
		wait = smcLinger + 20*time.Second
	}
	gone := func(out string) bool { return strings.Contains(out, "lgrs=0") }
	out, err := h.guestLgrUntil(ctx, wait, time.Second, gone)
	r.smc.lgrAfter = out
	if err != nil {
		r.fail("smcguest lgr: %v", err)
		return
	}
	r.smc.lgrGone = gone(out)
}

// guestLgrUntil runs the guest's smcguest lgr, again every interval,
// until done holds for its listing, d has passed or ctx ends (at least
// once); it returns the last listing, or the error that stopped it.
func (h *harness) guestLgrUntil(ctx context.Context, d, every time.Duration, done func(string) bool) (string, error) {
	deadline := time.Now().Add(d)
	for {
		out, _, err := h.vm.run(ctx, 10*time.Second, "smcguest lgr")
		if err != nil || done(out) || time.Now().After(deadline) {
			return out, err
		}
		select {
		case <-ctx.Done():
			return out, nil
		case <-time.After(every):
		}
	}
}

// guestServerStart starts the guest's smcguest server in the background
// and waits until it listens.
func (h *harness) guestServerStart(ctx context.Context, c *testCase, r *result, port int) bool {
	cmd := fmt.Sprintf("bgstart smcsrv %s", shellQuote(c.guestSMCCommand(port, guestEnds)))
	if _, err := h.vm.mustRun(ctx, 15*time.Second, cmd); err != nil {
		r.fail("starting the guest's smcguest server: %v", err)
		return false
	}
	if _, err := h.vm.mustRun(ctx, 30*time.Second, fmt.Sprintf("waitlisten %d 150", port)); err != nil {
		r.fail("the guest's smcguest server does not listen: %v", err)
		h.guestServerReap(ctx, r, 0)
		return false
	}
	return true
}

// guestServerReap gives the guest's server up to tenths/10 s to finish and
// collects its output and status.
func (h *harness) guestServerReap(ctx context.Context, r *result, tenths int) {
	out, _, err := h.vm.run(ctx, time.Duration(tenths)*100*time.Millisecond+30*time.Second, fmt.Sprintf("bgreap smcsrv %d", tenths))
	if err != nil {
		r.fail("collecting the guest's smcguest server: %v", err)
	}
	r.guestRC = exitStatus(out, "GOROCE-EXIT ")
	r.guestOut = strings.TrimSpace(r.guestOut + "\n" + stripLines(out, "GOROCE-EXIT "))
}

// smcHostTCP: the guest's SMC server, a plain TCP client (smcguest -tcp)
// on the host side.
func (h *harness) smcHostTCP(ctx context.Context, c *testCase, r *result, port int, base string) {
	if !h.guestServerStart(ctx, c, r, port) {
		return
	}
	argv := c.hostTCPCommand(port, guestEnds)
	cmd := h.ns.command(h.smcguest, argv[1:]...)
	os.WriteFile(base+".goroce.cmd", []byte(strings.Join(cmd.Args, " ")+"\n"), 0o644)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	p, err := h.ps.start("host TCP client", cmd)
	if err == nil {
		select {
		case <-p.done:
		case <-time.After(time.Duration(c.smcTimeout()+10) * time.Second):
			p.stop(3 * time.Second)
			r.notes = append(r.notes, "the host's TCP client ran past the case's time limit: stopped")
		}
		<-p.done
		r.goroceRC = p.exitCode()
	} else {
		r.fail("%v", err)
	}
	r.goroceOut = out.String()
	h.guestServerReap(ctx, r, 100)
}

// smcGoroceServer: goroce's echo server on the host side, the guest's
// client against it.
func (h *harness) smcGoroceServer(ctx context.Context, c *testCase, r *result, port int, base string) {
	h.goroceServes(ctx, c, r, smcatCommand(c, guestEnds, port), smcatListenLine, port, base)
}

// smcGoroceRelay: goroce's smc-relay in front of a plain TCP echo server
// on the host side, the guest's client against the relay.
func (h *harness) smcGoroceRelay(ctx context.Context, c *testCase, r *result, port int, base string) {
	relayArgv, serverArgv := relayCommands(c, guestEnds, port)
	srv := h.ns.command(h.smcguest, serverArgv[1:]...)
	var srvOut lockedBuffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	sp, err := h.ps.start("host TCP echo server", srv)
	if err != nil {
		r.fail("the plain TCP echo server: %v", err)
		return
	}
	defer func() {
		select {
		case <-sp.done:
		case <-time.After(10 * time.Second):
			sp.stop(3 * time.Second)
		}
		<-sp.done
		r.notes = append(r.notes, "plain TCP echo server: "+summarize(tail(srvOut.String(), 2)))
		if rc := sp.exitCode(); rc != 0 {
			r.fail("the plain TCP echo server behind the relay: exit status %d: %s", rc, tail(srvOut.String(), 5))
		}
	}()
	// The relay dials the server for the kernel's first connection: the
	// server must listen before the relay does.
	if err := waitListen(ctx, sp, &srvOut, 20*time.Second); err != nil {
		r.fail("the plain TCP echo server behind the relay: %v", err)
		return
	}
	h.goroceServes(ctx, c, r, relayArgv, relayListenLine, port, base)
}

// goroceServes runs goroce's server argv until it says listenLine, the
// guest's client against it, then reads both sides' QPs and goroce's
// statistics while goroce's link group lingers (psnProbe), and collects
// the server.
func (h *harness) goroceServes(ctx context.Context, c *testCase, r *result, argv []string, listenLine string, port int, base string) {
	p, err := h.startGoroce(argv, base)
	if err != nil {
		r.fail("%v", err)
		return
	}
	defer func() {
		select {
		case <-p.done:
			r.smc.hostServer = true
		case <-time.After(10 * time.Second):
			p.stop(3 * time.Second)
		}
		<-p.done
		r.goroceRC = p.exitCode()
		r.goroceOut = readFileString(base + ".goroce.txt")
	}()
	if err := waitForOutput(ctx, p, base+".goroce.txt", listenLine, 20*time.Second); err != nil {
		r.fail("goroce's %s: %v", argv[0], err)
		return
	}
	if c.smc.failover {
		h.failoverGuestClient(ctx, c, r, port, base)
	} else {
		t := c.smcTimeout()
		out, rc, err := h.vm.run(ctx, time.Duration(t+30)*time.Second,
			fmt.Sprintf("timeout %d %s", t, shellQuote(c.guestSMCCommand(port, guestEnds))))
		if err != nil {
			r.fail("the guest's smcguest client: %v", err)
		}
		r.guestOut, r.guestRC = out, rc
	}
	h.psnProbe(ctx, c, r, base) // goroce's link group lingers: both QPs are there
}

// smcGoroceClient: the guest's server, goroce's client on the host side:
// one process per connection fed and checked by the harness, or, for
// connections at once (which must share a link group, so a device, so a
// process), one smcat -P that checks its own echoes.
func (h *harness) smcGoroceClient(ctx context.Context, c *testCase, r *result, port int, base string) {
	if !h.guestServerStart(ctx, c, r, port) {
		return
	}
	argv := smcatCommand(c, guestEnds, port)
	prog := filepath.Join(h.abs(h.opts.bin), argv[0])
	os.WriteFile(base+".goroce.cmd", []byte(prog+" "+strings.Join(argv[1:], " ")+"\n"), 0o644)
	deadline := time.Now().Add(time.Duration(c.smcTimeout()) * time.Second)
	start := func(cmd *exec.Cmd) (*proc, error) { return h.ps.start("goroce smcat", cmd) }
	conns := make([]hostConn, c.smc.conns)
	waitEcho := c.smc.clientEnd == endClose
	switch {
	case c.smc.parallel:
		conns = h.patternClients(ctx, c, prog, argv[1:], deadline)
	default:
		for i := range conns {
			var hold *streamHold
			if c.smc.failover && i == 0 {
				hold = h.failoverHold(ctx, c, r)
			}
			if conns[i] = driveClient(ctx, start, h.ns.netCommand(prog, argv[1:]...), i, c.smc.sizes, c.smc.idle, waitEcho, hold, deadline); conns[i].rc != 0 {
				conns = conns[:i+1]
				break
			}
		}
	}
	r.smc.hostConns = conns
	r.goroceRC = 0
	var out strings.Builder
	for i, hc := range conns {
		fmt.Fprintf(&out, "--- conn %d: exit %d, %d bytes sent, %d echoed %s\n%s\n", i, hc.rc, hc.sent, hc.echoed, hc.mismatch, hc.out)
		if hc.rc != 0 && r.goroceRC == 0 {
			r.goroceRC = hc.rc
		}
	}
	r.goroceOut = out.String()
	h.guestServerReap(ctx, r, 100)
}

// patternClients runs one smcat -P -pattern process for the case's
// connections and reads their outcomes from its stdout.
func (h *harness) patternClients(ctx context.Context, c *testCase, prog string, args []string, deadline time.Time) []hostConn {
	cmd := h.ns.netCommand(prog, args...)
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	p, err := h.ps.start("goroce smcat -P", cmd)
	if err != nil {
		return []hostConn{{rc: -1, mismatch: err.Error()}}
	}
	select {
	case <-p.done:
	case <-time.After(time.Until(deadline)):
		p.stop(3 * time.Second)
	case <-ctx.Done():
		p.stop(3 * time.Second)
	}
	<-p.done
	conns := parsePatternLines(stdout.String(), c.smc.conns)
	for i := range conns {
		conns[i].rc = p.exitCode()
		conns[i].out = stderr.String()
		if i > 0 {
			conns[i].out = "(as conn 0)"
		}
	}
	return conns
}

// patternLineRE is smcat -pattern's line per connection.
var patternLineRE = regexp.MustCompile(`(?m)^conn (\d+): (\d+) bytes sent, (\d+) echoed and checked(.*)$`)

// parsePatternLines turns smcat -pattern's stdout into n connections'
// outcomes; a connection without its line is a mismatch that says so.
func parsePatternLines(out string, n int) []hostConn {
	conns := make([]hostConn, n)
	seen := make([]bool, n)
	for _, m := range patternLineRE.FindAllStringSubmatch(out, -1) {
		i, _ := strconv.Atoi(m[1])
		if i < 0 || i >= n {
			continue
		}
		seen[i] = true
		conns[i].sent, _ = strconv.ParseInt(m[2], 10, 64)
		conns[i].echoed, _ = strconv.ParseInt(m[3], 10, 64)
		if rest := m[4]; strings.Contains(rest, "differs") || strings.HasPrefix(rest, ":") {
			conns[i].mismatch = strings.TrimLeft(rest, ":, ")
		}
	}
	for i := range conns {
		if !seen[i] {
			conns[i].mismatch = "smcat printed no line for this connection"
		}
	}
	return conns
}
