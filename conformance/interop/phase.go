//go:build linux

package main

// The guests of one run. The RC cases run on the RC guest (-kernel-pkg,
// 6.1 by default); the SMC-R cases on a 6.12 guest (-smc-kernel-pkg:
// stock 6.1's rxe breaks SMC-R), booted once the first is stopped: one
// QEMU at a time, on the same bridge and tap.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// guestKind says which guest a case needs.
type guestKind int

const (
	rcGuest  guestKind = iota // the verbs cases: rxe0 on eth0
	smcGuest                  // SMC-R cases: rxe0, smc, pnet entry and UEID
)

func (k guestKind) String() string {
	if k == smcGuest {
		return "smc"
	}
	return "rc"
}

// guestRun is one guest of the run: its kernel, its cases and how long
// each part took.
type guestRun struct {
	kind        guestKind
	kernelPkg   string
	cases       []testCase
	release     string // the kernel release it booted
	imageCached bool
	imageDur    time.Duration
	bootDur     time.Duration // boot and setup, to the first case
	casesDur    time.Duration
	results     []*result
}

// rcOnSMCSets are the RC cases -rc-on-smc-guest repeats on the SMC-R
// guest. rxe's completer stall (flaky.go) is a rule 6.12 still has, so the
// RC cases run on its rxe too; quick (rc_pingpong's 64 KiB case at path
// MTU 1024, both directions, where the stall was seen; and the RDMA CM's
// cases that cmOnSMC picks, since 6.12's CM is another kernel's) keeps the
// whole run within 15 minutes on two cores under TCG.
var rcOnSMCSets = map[string]func(c *testCase) bool{
	"none": func(*testCase) bool { return false },
	"all":  func(*testCase) bool { return true },
	"quick": func(c *testCase) bool {
		return c.tool == rcPingpong && c.mtu == 1024 && c.size == 65536 && !c.lossy() && !c.events && c.variant() == "" ||
			cmOnSMC(c)
	},
}

// allCases is cases(), with the RC cases that rcOnSMC selects repeated on
// the SMC-R guest (before its SMC-R cases).
func allCases(rcOnSMC string) []testCase {
	cs := cases()
	sel := rcOnSMCSets[rcOnSMC]
	if sel == nil {
		return cs
	}
	var rc, again, rest []testCase
	for _, c := range cs {
		switch {
		case c.guest != rcGuest:
			rest = append(rest, c)
		default:
			rc = append(rc, c)
			if sel(&c) {
				c.guest = smcGuest
				again = append(again, c)
			}
		}
	}
	return append(append(rc, again...), rest...)
}

// guestRuns groups the cases by the guest they need, RC guest first.
func (h *harness) guestRuns(todo []testCase) []*guestRun {
	var out []*guestRun
	for _, k := range []guestKind{rcGuest, smcGuest} {
		g := &guestRun{kind: k, kernelPkg: h.opts.kernelPkg}
		if k == smcGuest {
			g.kernelPkg = h.opts.smcKernelPkg
		}
		for _, c := range todo {
			if c.guest == k {
				g.cases = append(g.cases, c)
			}
		}
		if len(g.cases) > 0 || (h.opts.guestOnly && k == rcGuest && len(todo) == 0) {
			out = append(out, g)
		}
	}
	return out
}

// runGuest builds (or finds) the guest's image, boots and sets it up,
// checks it, runs its cases and stops it.
func (h *harness) runGuest(ctx context.Context, g *guestRun) ([]*result, error) {
	h.guest = g
	t0 := time.Now()
	img, err := buildImage(ctx, imageConfig{cacheDir: h.opts.cache, kernelPkg: g.kernelPkg, update: !h.opts.noUpdate, logf: logf})
	if err != nil {
		return nil, fmt.Errorf("building the %s guest's image (%s): %w", g.kind, g.kernelPkg, err)
	}
	h.opts.noUpdate = true // once per run is enough
	h.img = img
	g.release, g.imageCached, g.imageDur = img.kernelRelease, img.cached, time.Since(t0)
	if m, err := os.ReadFile(filepath.Join(img.dir, "manifest.txt")); err == nil {
		os.WriteFile(filepath.Join(h.out, fmt.Sprintf("image-manifest.%s.txt", g.kind)), m, 0o644)
	}
	if h.initrd, err = overlayInitrd(img.initrd, filepath.Join(h.out, fmt.Sprintf("initrd.%s.img", g.kind)),
		map[string]string{"usr/bin/smcguest": h.smcguest}); err != nil {
		return nil, err
	}

	t1 := time.Now()
	if err := h.boot(ctx); err != nil {
		return nil, err
	}
	defer func() {
		h.lastConsole = h.vm.consoleTail(40)
		h.vm.stop()
	}()
	var res []*result
	lb := h.guestLoopback(ctx)
	lb.on = g.kind
	res = append(res, lb)
	if !lb.pass {
		return res, fmt.Errorf("the %s guest's own rc_pingpong over rxe loopback failed: the guest is not usable", g.kind)
	}
	if g.kind == smcGuest {
		if err := h.smcSetup(ctx); err != nil {
			return res, fmt.Errorf("setting SMC-R up in the guest: %w", err)
		}
	}
	g.bootDur = time.Since(t1)
	if h.opts.guestOnly {
		if h.opts.exec != "" {
			out, rc, err := h.vm.run(ctx, 10*time.Minute, h.opts.exec)
			fmt.Printf("%s\n(guest exit status %d)\n", out, rc)
			if err != nil {
				return res, err
			}
		}
		return res, nil
	}
	t2 := time.Now()
	res, err = h.runCases(ctx, g.cases, res)
	g.casesDur = time.Since(t2)
	h.caseBase += len(g.cases)
	for _, r := range res {
		r.on = g.kind
	}
	g.results = res
	return res, err
}
