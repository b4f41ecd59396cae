//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// result is one case's outcome.
type result struct {
	name, dir string
	iters     int
	pass      bool
	reasons   []string // failures
	notes     []string // worth knowing, not failures
	guestOut  string
	goroceOut string
	guestRC   int
	goroceRC  int
	guest     perf
	goroce    perf
	cap       *captureCheck
	counters  map[string]int64 // rxe0's hw_counters that changed in the case
	files     string           // path prefix of the case's files
	raced     bool             // passed, but a side lost rc_pingpong's end race (see endRace)
	firstTry  *result          // when this is a retry: the failed first attempt
	tag       runTag           // which run of the case this is
	on        guestKind        // the guest it ran on
	skipped   bool             // not run, and not a failure (skipWhy says why)
	skipWhy   string
	reps      int         // under -repeat: runs done
	repPass   int         // ... and passed
	repFailed []*result   // ... and the failed ones
	stall     string      // the guest's QP state while one side waited on the other
	smc       *smcOutcome // an SMC case's statistics, link groups, host connections
	start     time.Time
	dur       time.Duration
}

func (r *result) fail(format string, args ...any) {
	r.reasons = append(r.reasons, fmt.Sprintf(format, args...))
}

func (r *result) verdict() string {
	if r.skipped {
		return "SKIP"
	}
	if r.reps > 0 {
		if r.pass {
			return fmt.Sprintf("PASS %d/%d", r.repPass, r.reps)
		}
		return fmt.Sprintf("FAIL %d/%d", r.reps-r.repPass, r.reps)
	}
	if r.pass && r.firstTry != nil {
		return "FLAKY"
	}
	if r.pass && r.raced {
		return "PASS*"
	}
	if r.pass {
		return "PASS"
	}
	return "FAIL"
}

// runCase runs one case: environment, capture, the two programs, the
// capture check, the verdict.
func (h *harness) runCase(ctx context.Context, idx int, c *testCase, tag runTag) *result {
	r := &result{name: c.name(), dir: c.direction(), iters: c.iters, start: time.Now(), guestRC: -1, goroceRC: -1, tag: tag}
	defer func() { // runs last: after the verdict's defer below
		r.dur = time.Since(r.start)
		r.pass = len(r.reasons) == 0
	}()
	if err := h.setEnv(ctx, c); err != nil {
		r.fail("setting up MTU/loss: %v", err)
		return r
	}
	base := filepath.Join(h.out, "cases", fmt.Sprintf("%02d-%s", idx, c.slug())) + tag.suffix()
	portIdx := tag.portIdx(idx) // a retry or repetition gets ports of its own
	r.files = base
	before, _ := h.rxeCounters(ctx)
	capt, err := startCapture(ctx, h.ns, h.ps, base+".pcap")
	if err != nil {
		r.fail("capture: %v", err)
		return r
	}
	gCmd, hCmd := c.commands(portIdx, guestEnds)
	h.runPair(ctx, c, r, c.port(portIdx), gCmd, hCmd, base)
	dropped, err := capt.stop()
	if err != nil {
		r.fail("capture: %v", err)
	}
	if after, cerr := h.rxeCounters(ctx); cerr == nil && before != nil {
		r.counters = counterDelta(before, after)
	}
	if c.madLoss && !madResent(r.counters) {
		r.fail("the kernel's CM resent no MAD and met no duplicate: the MAD loss missed")
	}
	os.WriteFile(base+".rxe.txt", []byte(r.guestOut), 0o644)
	os.WriteFile(base+".goroce.txt", []byte(r.goroceOut), 0o644)
	os.WriteFile(base+".rxe-counters.txt", []byte(formatCounters(r.counters)+"\n"), 0o644)

	r.guest, r.goroce = c.tool.parse(r.guestOut), c.tool.parse(r.goroceOut)
	if c.tool.notes != nil {
		r.notes = append(r.notes, c.tool.notes("rxe", r.guestOut)...)
		r.notes = append(r.notes, c.tool.notes("goroce", r.goroceOut)...)
	}
	var progFails []string // the programs' failures, apart from the capture's
	if r.guestRC != 0 {
		progFails = append(progFails, fmt.Sprintf("%s (rxe) exit status %d", c.tool.guestProg, r.guestRC))
	}
	if r.goroceRC != 0 {
		progFails = append(progFails, fmt.Sprintf("goroce %s exit status %d", c.tool.goroceCmd, r.goroceRC))
	}
	for _, s := range []struct {
		who    string
		p      perf
		server bool
	}{{"rxe", r.guest, c.server == guestServer}, {"goroce", r.goroce, c.server == goroceServer}} {
		iters, results := c.expect(s.server)
		switch {
		case !results && s.p.ok:
			progFails = append(progFails, fmt.Sprintf("%s printed a result table, which the original's %s does not", s.who, map[bool]string{true: "server", false: "client"}[s.server]))
		case !results:
		case !s.p.ok:
			if r.guestRC == 0 && r.goroceRC == 0 {
				progFails = append(progFails, fmt.Sprintf("%s printed no result lines", s.who))
			}
		case iters == 0 && s.p.iters <= 0:
			progFails = append(progFails, fmt.Sprintf("%s did no iterations", s.who))
		case iters > 0 && s.p.iters != iters:
			progFails = append(progFails, fmt.Sprintf("%s did %d iterations, not %d", s.who, s.p.iters, iters))
		}
	}
	defer func() {
		if len(progFails) > 0 && r.cap != nil && len(r.reasons) == 0 {
			if why, ok := endRace(c, r); ok {
				r.raced = true
				r.notes = append(r.notes, why)
				return
			}
		}
		r.reasons = append(progFails, r.reasons...)
	}()

	if err == nil {
		cc, err := checkCaptureAs(ctx, filepath.Join(h.opts.bin, "rocedump"), base+".pcap", c.wireAliases())
		if err != nil {
			r.fail("rocedump: %v", err)
			return r
		}
		cc.dropped = dropped
		r.cap = cc
		os.WriteFile(base+".stats.txt", []byte(cc.stats), 0o644)
		if dropped > 0 {
			r.notes = append(r.notes, fmt.Sprintf("tcpdump: %d packets dropped by the kernel (the capture is incomplete)", dropped))
		}
		switch {
		case cc.packets == 0:
			r.fail("the capture has no RoCE packets")
		case c.oneWay():
			client := map[side]string{guestServer: hostIP, goroceServer: guestIP}[c.server]
			if cc.bySrc[client] == 0 {
				r.fail("the capture has no RoCE packets from the client: %d from rxe, %d from goroce", cc.bySrc[guestIP], cc.bySrc[hostIP])
			}
		case cc.bySrc[guestIP] == 0 || cc.bySrc[hostIP] == 0:
			r.fail("the capture lacks one side: %d RoCE packets from rxe, %d from goroce", cc.bySrc[guestIP], cc.bySrc[hostIP])
		}
		if cc.icrcBad > 0 {
			r.fail("%d of %d RoCE packets have a bad ICRC", cc.icrcBad, cc.packets)
		}
		if cc.unverifiable > 0 {
			r.fail("%d of %d RoCE packets could not be ICRC-checked", cc.unverifiable, cc.packets)
		}
		if cc.otherNAKs > 0 {
			r.fail("%d NAKs other than PSN sequence error", cc.otherNAKs)
		}
		if !c.lossy() && cc.psnNAKs > 0 {
			r.fail("%d PSN-sequence NAKs in a loss-free case", cc.psnNAKs)
		}
		if cc.rnrNAKs > 0 {
			r.notes = append(r.notes, fmt.Sprintf("%d RNR NAKs", cc.rnrNAKs))
		}
		fails, notes := cc.checkWire(c)
		r.reasons = append(r.reasons, fails...)
		if c.tool.checkCapture != nil {
			r.reasons = append(r.reasons, c.tool.checkCapture(c, cc)...)
		}
		r.notes = append(r.notes, notes...)
	}
	return r
}

// runPair runs the two programs of a case: the server first, the client
// once the server listens. Once either has exited, the other gets a grace
// period before it is stopped (a side left waiting for an ACK that was lost
// at the very end would otherwise wait for its time-out).
func (h *harness) runPair(ctx context.Context, c *testCase, r *result, port int, gCmd, hCmd []string, base string) {
	t := c.timeout()
	job := "cli"
	if c.server == guestServer {
		job = "srv"
	}
	guestCmd := fmt.Sprintf("bgstart %s timeout %d %s", job, t, shellQuote(gCmd))
	var p *proc
	var err error
	guestStarted := false
	collectGuest := func(tenths int) {
		if !guestStarted {
			return
		}
		out, _, err := h.vm.run(ctx, time.Duration(tenths)*100*time.Millisecond+30*time.Second, fmt.Sprintf("bgreap %s %d", job, tenths))
		if err != nil {
			r.fail("collecting the guest's %s: %v", c.tool.guestProg, err)
		}
		r.guestRC = exitStatus(out, "GOROCE-EXIT ")
		r.guestOut = stripLines(out, "GOROCE-EXIT ")
	}
	startGuest := func() bool {
		if _, err := h.vm.mustRun(ctx, 15*time.Second, guestCmd); err != nil {
			r.fail("starting the guest's %s: %v", c.tool.guestProg, err)
			return false
		}
		guestStarted = true
		return true
	}
	collectGoroce := func() {
		if p == nil {
			return
		}
		if !p.exited() {
			p.stop(3 * time.Second)
		}
		<-p.done
		r.goroceRC = p.exitCode()
		r.goroceOut = readFileString(base + ".goroce.txt")
	}
	defer collectGoroce()

	if c.server == guestServer {
		if !startGuest() {
			return
		}
		wait := fmt.Sprintf("waitlisten %d 150", port)
		if c.tool.guestListening != nil {
			wait = c.tool.guestListening(port)
		}
		if _, err := h.vm.mustRun(ctx, 30*time.Second, wait); err != nil {
			r.fail("the guest's server does not listen: %v", err)
			collectGuest(0)
			return
		}
		if p, err = h.startGoroce(hCmd, base); err != nil {
			r.fail("%v", err)
			collectGuest(0)
			return
		}
	} else {
		if p, err = h.startGoroce(hCmd, base); err != nil {
			r.fail("%v", err)
			return
		}
		if err := waitForOutput(ctx, p, base+".goroce.txt", c.tool.goroceListenLine, 20*time.Second); err != nil {
			r.fail("goroce's server: %v", err)
			return
		}
		if !startGuest() {
			return
		}
	}

	const grace = 10 * time.Second
	deadline := time.Now().Add(time.Duration(t+15) * time.Second)
	// Both programs stop at their own time limit (t): a stall in which
	// neither exits first is probed just before.
	probeAt := time.Now().Add(time.Duration(t)*time.Second - stallProbeBefore)
	var hostDone, guestDone time.Time
	lastPoll := time.Time{}
	for {
		now := time.Now()
		if hostDone.IsZero() && p.exited() {
			hostDone = now
		}
		if guestDone.IsZero() && now.Sub(lastPoll) >= 500*time.Millisecond {
			lastPoll = now
			_, rc, err := h.vm.run(ctx, 15*time.Second, "bgdone "+job)
			if err != nil {
				r.fail("polling the guest's %s: %v", c.tool.guestProg, err)
				return
			}
			if rc == 0 {
				guestDone = now
			}
		}
		if r.stall == "" && hostDone.IsZero() && guestDone.IsZero() && now.After(probeAt) {
			r.stall = h.stallProbe(ctx, base)
		}
		if r.stall == "" && (hostDone.IsZero() != guestDone.IsZero()) {
			done := hostDone
			if done.IsZero() {
				done = guestDone
			}
			if now.Sub(done) > stallProbeAfter {
				r.stall = h.stallProbe(ctx, base)
			}
		}
		switch {
		case !hostDone.IsZero() && !guestDone.IsZero():
		case !hostDone.IsZero() && now.Sub(hostDone) > grace:
			r.notes = append(r.notes, fmt.Sprintf("the guest's %s was still running %v after goroce's had exited: stopped", c.tool.guestProg, grace))
		case !guestDone.IsZero() && now.Sub(guestDone) > grace:
			r.notes = append(r.notes, fmt.Sprintf("goroce's %s was still running %v after the guest's had exited: stopped", c.tool.goroceCmd, grace))
		case now.After(deadline):
			r.notes = append(r.notes, fmt.Sprintf("the case's time limit (%ds) ran out: both stopped", t+15))
		case ctx.Err() != nil:
		default:
			select {
			case <-time.After(100 * time.Millisecond):
			case <-p.done:
			case <-ctx.Done():
			}
			continue
		}
		break
	}
	collectGoroce()
	collectGuest(0)
}

// stallProbeAfter is how long one side may wait for the other before the
// harness records the guest's QP state (stallProbe).
const stallProbeAfter = 2 * time.Second

// stallProbeBefore is how long before the programs' own time limit the
// harness records the guest's QP state when neither has exited.
const stallProbeBefore = 5 * time.Second

// stallProbe records, while one program has exited and the other still
// waits, the guest's view: its QPs (rdma res show qp: sq-psn is rxe's
// requester PSN, rq-psn its responder's expected PSN), rxe0's counters and
// the kernel log's tail, in base.stall.txt. This is the state a stalled
// rxe is in, which is gone once its program is stopped.
func (h *harness) stallProbe(ctx context.Context, base string) string {
	out, _, err := h.vm.run(ctx, 20*time.Second, "echo '# rdma res show qp'; rdma res show qp; echo '# hw_counters'; grep . /sys/class/infiniband/rxe0/ports/1/hw_counters/*; echo '# dmesg'; dmesg | tail -n 3000")
	if err != nil {
		out += fmt.Sprintf("\n(probe: %v)", err)
	}
	os.WriteFile(base+".stall.txt", []byte(out+"\n"), 0o644)
	return out
}

// startGoroce starts goroce's program in the namespace, its output (stdout
// and stderr) going to base.goroce.txt.
func (h *harness) startGoroce(argv []string, base string) (*proc, error) {
	f, err := os.Create(base + ".goroce.txt")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := h.ns.command(filepath.Join(h.abs(h.opts.bin), argv[0]), argv[1:]...)
	if argv[0] == smcatProg || argv[0] == relayProg {
		cmd = h.ns.netCommand(filepath.Join(h.abs(h.opts.bin), argv[0]), argv[1:]...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	os.WriteFile(base+".goroce.cmd", []byte(strings.Join(cmd.Args, " ")+"\n"), 0o644)
	return h.ps.start("goroce "+argv[0], cmd)
}

// waitForOutput waits until file has line in it, the process exits or d
// passes.
func waitForOutput(ctx context.Context, p *proc, file, line string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if strings.Contains(readFileString(file), line) {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("exited (status %d) before printing %q", p.exitCode(), line)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("printed no %q in %v", line, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (h *harness) abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// stripLines removes the lines starting with prefix.
func stripLines(s, prefix string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, prefix) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// rxeCounters reads rxe0's hw_counters in the guest.
func (h *harness) rxeCounters(ctx context.Context) (map[string]int64, error) {
	// And the CM's counters (ib_cm's cm_tx_msgs, cm_tx_retries,
	// cm_rx_msgs, cm_rx_duplicates), keyed by directory and file.
	out, err := h.vm.mustRun(ctx, 10*time.Second, "grep . /sys/class/infiniband/rxe0/ports/1/hw_counters/* && "+
		"{ grep -s . /sys/class/infiniband/rxe0/ports/1/cm_*/* || true; }")
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err == nil {
			if dir := filepath.Base(filepath.Dir(k)); strings.HasPrefix(dir, "cm_") {
				m[dir+"/"+filepath.Base(k)] = n
			} else {
				m[filepath.Base(k)] = n
			}
		}
	}
	return m, nil
}

// counterDelta returns the counters that changed.
func counterDelta(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		if v != before[k] {
			d[k] = v - before[k]
		}
	}
	return d
}

// formatCounters prints counters sorted by name.
func formatCounters(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}

var gaveUpRE = regexp.MustCompile(`(?i)retry|Terminated`)

// endRace reports whether a lossy case's only failure is one of
// rc_pingpong's two end races, which no transport can win: a side exits as
// soon as its own work is done, so when the ACK of the other side's last
// SEND is lost, that SEND can never complete (its retransmissions find no
// QP; it retries until retry-exceeded, or until the harness stops it). The
// client exits once it has the server's last message; the server exits once
// its last message is ACKed, which can be before the client has the ACK of
// its own last message.
//
// It counts as that only if one side did every iteration and exited 0, the
// other failed on retries (or was stopped), every capture check passed, and
// the capture shows no ACK of the failed side's last request packet, or
// shows one that the guest drops on receipt (lossIn: goroce's ACK to rxe).
// An ACK on the wire that reached the failed side makes the failure its own.
//
// Only rc_pingpong's: perftest's programs end with a TCP hand-shake after
// the last completion, so a lossy perftest case that fails has no such
// excuse.
func endRace(c *testCase, r *result) (string, bool) {
	if !c.lossy() || c.tool != rcPingpong {
		return "", false
	}
	type side struct {
		name, ip string
		rc       int
		p        perf
		out      string
	}
	rxe := side{"rxe", guestIP, r.guestRC, r.guest, r.guestOut}
	gor := side{"goroce", hostIP, r.goroceRC, r.goroce, r.goroceOut}
	ok, failed := rxe, gor
	if r.guestRC != 0 {
		ok, failed = gor, rxe
	}
	if ok.rc != 0 || !ok.p.ok || ok.p.iters != c.iters || failed.rc == 0 {
		return "", false
	}
	if failed.rc != 143 && !gaveUpRE.MatchString(failed.out) {
		return "", false
	}
	last, seen := r.cap.lastReq[failed.ip]
	if !seen {
		return "", false
	}
	droppedAfterCapture := failed.name == "rxe" && c.lossIn > 0
	if r.cap.lastReqAcked[failed.ip] && !droppedAfterCapture {
		return "", false
	}
	role := "client"
	if (failed.name == "rxe") == (c.server == guestServer) {
		role = "server"
	}
	return fmt.Sprintf("end race: %s did all %d iterations and exited; the ACK of %s's last SEND (psn %d) was lost, so %s (the %s, exit %d) could not complete it. A limit of rc_pingpong itself, as between two kernel peers",
		ok.name, c.iters, failed.name, last, failed.name, role, failed.rc), true
}
