//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// runCases runs the cases in order on the booted guest: each once, a
// failed one once more (-retries), or each -repeat times. It stops starting
// cases once the run's budget is spent, and reboots the guest when its job
// channel broke.
func (h *harness) runCases(ctx context.Context, todo []testCase, res []*result) ([]*result, error) {
	for i := range todo {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		c := &todo[i]
		if h.budgetSpent() {
			for _, c := range todo[i:] {
				r := &result{name: c.name(), dir: c.direction(), iters: c.iters, guestRC: -1, goroceRC: -1}
				r.fail("not run: the run's budget (-budget %v) was spent", h.opts.budget)
				res = append(res, r)
			}
			return res, fmt.Errorf("the run's budget (-budget %v) was spent with %d cases left", h.opts.budget, len(todo)-i)
		}
		idx := h.caseBase + i + 1
		logf("case %d: %s, %s", idx, c.name(), c.direction())
		var r *result
		if h.opts.repeat > 1 {
			r = h.repeatCase(ctx, idx, c)
		} else {
			r = h.runOne(ctx, idx, c, runTag{attempt: 1})
			if !r.pass && !r.skipped && ctx.Err() == nil && h.vm.broken == nil && h.opts.retries > 0 {
				// Once more: the result says FLAKY if this passes, and keeps
				// the first attempt's failure (and files) in the report.
				logf("  FAIL (%.1fs) %s: trying once more%s", r.dur.Seconds(), strings.Join(r.reasons, "; "), knownFlake(c, r))
				r2 := h.runOne(ctx, idx, c, runTag{attempt: 2})
				r2.firstTry = r
				if k := knownFlake(c, r); k != "" {
					r2.notes = append(r2.notes, "first attempt"+k)
				}
				r = r2
			}
		}
		res = append(res, r)
		if ctx.Err() != nil {
			r.reasons = append([]string{"interrupted"}, r.reasons...)
			r.pass = false
			return res, errors.New("interrupted by a signal: everything started was stopped")
		}
		logf("  %s (%.1fs) %s", r.verdict(), r.dur.Seconds(), strings.Join(append(r.reasons, r.skipWhy), "; "))
		if h.vm.broken != nil && i+1 < len(todo) {
			if err := h.reboot(ctx); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// runOne runs one case once: an SMC-R case or a verbs program pair.
func (h *harness) runOne(ctx context.Context, idx int, c *testCase, tag runTag) *result {
	if c.smc != nil {
		return h.runSMCCase(ctx, idx, c, tag)
	}
	return h.runCase(ctx, idx, c, tag)
}

func (h *harness) budgetSpent() bool {
	return h.opts.budget > 0 && time.Since(h.start) > h.opts.budget
}

// reboot boots the guest again after its job channel broke.
func (h *harness) reboot(ctx context.Context) error {
	if h.boots >= 4 {
		return fmt.Errorf("guest job channel broken again (%v); giving up", h.vm.broken)
	}
	logf("guest job channel broken (%v): rebooting the guest", h.vm.broken)
	h.lastConsole = h.vm.consoleTail(40)
	h.vm.stop()
	if err := h.boot(ctx); err != nil {
		return err
	}
	if h.guest != nil && h.guest.kind == smcGuest {
		return h.smcSetup(ctx)
	}
	return nil
}

// runTag names one run of a case: its retry attempt, or its repetition
// under -repeat. Each run gets ports and files of its own.
type runTag struct {
	attempt int // 1, or 2 for the retry
	rep     int // 1.. under -repeat, else 0
}

// suffix is what the run's files add to the case's name.
func (t runTag) suffix() string {
	switch {
	case t.rep > 0:
		return fmt.Sprintf("-rep%03d", t.rep)
	case t.attempt > 1:
		return fmt.Sprintf("-try%d", t.attempt)
	}
	return ""
}

// portIdx is the index the run's TCP port is derived from: the case's own
// for a first attempt, 1000 on for a retry, and for repetitions a cycle of
// 20000 ports from 30000 on (so that nothing left of one run, such as a
// port in TIME_WAIT, meets the next).
func (t runTag) portIdx(idx int) int {
	switch {
	case t.rep > 0:
		return 30000 - 18515 + (idx*1000+t.rep)%20000
	case t.attempt > 1:
		return idx + 1000*(t.attempt-1)
	}
	return idx
}

// repeatCase runs one case -repeat times (no retries: every failure
// counts) and returns one result: passed only if every run passed, with
// the failed runs kept for the report. A passed run's files are deleted
// (a 64 KiB case's capture is over 100 MB); a failed run's are kept.
func (h *harness) repeatCase(ctx context.Context, idx int, c *testCase) *result {
	agg := &result{name: c.name(), dir: c.direction(), iters: c.iters, start: time.Now(), guestRC: -1, goroceRC: -1}
	for rep := 1; rep <= h.opts.repeat; rep++ {
		if ctx.Err() != nil || h.budgetSpent() {
			agg.notes = append(agg.notes, fmt.Sprintf("stopped after %d of %d runs (budget or signal)", agg.reps, h.opts.repeat))
			break
		}
		r := h.runOne(ctx, idx, c, runTag{attempt: 1, rep: rep})
		if ctx.Err() != nil {
			agg.notes = append(agg.notes, fmt.Sprintf("run %d interrupted: not counted", rep))
			break
		}
		agg.reps++
		if r.pass {
			agg.repPass++
			removeRunFiles(r.files)
		} else {
			agg.repFailed = append(agg.repFailed, r)
			logf("  run %d/%d: FAIL (%.1fs) %s; files %s.*", rep, h.opts.repeat, r.dur.Seconds(), strings.Join(r.reasons, "; "), r.files)
		}
		if rep%10 == 0 {
			logf("  %d runs: %d passed, %d failed (%.0fs)", agg.reps, agg.repPass, len(agg.repFailed), time.Since(agg.start).Seconds())
		}
		if h.vm.broken != nil {
			if err := h.reboot(ctx); err != nil {
				agg.fail("%v", err)
				break
			}
		}
	}
	agg.dur = time.Since(agg.start)
	for _, f := range agg.repFailed {
		agg.fail("run %d (files %s.*): %s%s", f.tag.rep, f.files, strings.Join(f.reasons, "; "), knownFlake(c, f))
	}
	agg.pass = len(agg.reasons) == 0
	return agg
}

// removeRunFiles deletes the files of one run (prefix.*).
func removeRunFiles(prefix string) {
	if prefix == "" {
		return
	}
	ms, _ := filepath.Glob(prefix + ".*")
	for _, m := range ms {
		os.Remove(m)
	}
}
