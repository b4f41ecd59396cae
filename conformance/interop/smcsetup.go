//go:build linux

package main

// SMC-R in the guest: the pnet entry and UEID the kernel needs for
// SMC-Rv2 over rxe (without a UEID only SMC-Rv1 is proposed, which needs
// RoCE v1 GIDs that rxe lacks), checked step by step, and the statistics
// every SMC case reads before and after.

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

	"github.com/goroce/goroce/smcr/smcwire"
)

const (
	// InteropUEID is the user-defined EID the guest's kernel is given;
	// goroce's SMC-R side must offer the same one (smcat -ueid) for the
	// two to agree on SMC-Rv2.
	InteropUEID = "GOROCE-INTEROP-UEID"
	// InteropPnetID ties the guest's eth0 to rxe0 port 1 (the kernel
	// upper-cases PNET IDs).
	InteropPnetID = "GOROCEPNET"
)

// smcSetupStep is one step of the SMC setup: a guest command and what its
// output must contain.
type smcSetupStep struct {
	what string
	cmd  string
	want []string // substrings the output must have
}

// smcSetupSteps are the SMC setup's steps, in order.
func smcSetupSteps() []smcSetupStep {
	return []smcSetupStep{
		{"smc and smc_diag loaded", "grep -E '^(smc|smc_diag) ' /proc/modules | cut -d' ' -f1", []string{"smc\n", "smc_diag"}},
		// The command numbers the harness relies on, as the kernel has them:
		// GET_LINK_SMCR 3, GET_STATS 7, GET_FBACK_STATS 8 (dump); ADD_UEID 10 (do).
		{"SMC_GEN_NETLINK commands", "smcguest genl SMC_GEN_NETLINK", []string{"op.3=dump", "op.7=dump", "op.8=dump", "op.9=dump", "op.10=do"}},
		{"SMC_PNETID commands", "smcguest genl SMC_PNETID", []string{"op.1=do,dump", "op.2=do"}},
		{"pnet entry", fmt.Sprintf("smcguest pnet add %s eth0 rxe0 1 && smcguest pnet list", InteropPnetID),
			[]string{"pnetid=" + InteropPnetID + " eth=eth0 ", "pnetid=" + InteropPnetID + " eth=n/a ib=rxe0 port=1"}},
		{"UEID", fmt.Sprintf("smcguest ueid add %s && smcguest ueid list", InteropUEID), []string{"ueid=" + InteropUEID}},
		{"SMC-Rv2 support", "smcguest info", []string{"is_smcr_v2=1"}},
		// busybox's sysctl reads them (smcguest needs no sysctl command).
		{"net.smc sysctls", "sysctl -a 2>/dev/null | grep '^net.smc'", []string{"net.smc.smcr_testlink_time = ", "net.smc.rmem = ", "net.smc.wmem = "}},
		{"statistics", "smcguest stats", []string{"smcr.clnt_v2_succ=", "fallback.srv_cnt="}},
		{"no link group yet", "smcguest lgr", []string{"lgrs=0"}},
	}
}

// smcSetup runs the SMC setup steps, printing each, and keeps their
// output in guest-setup.smc-r.txt.
func (h *harness) smcSetup(ctx context.Context) error {
	var log strings.Builder
	defer func() { os.WriteFile(filepath.Join(h.out, "guest-setup.smc-r.txt"), []byte(log.String()), 0o644) }()
	for _, s := range smcSetupSteps() {
		out, err := h.vm.mustRun(ctx, 30*time.Second, s.cmd)
		fmt.Fprintf(&log, "# %s: %s\n%s\n", s.what, s.cmd, out)
		if err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		if missing := missingLines(out, s.want); len(missing) > 0 {
			return fmt.Errorf("%s: %q printed no %q:\n%s", s.what, s.cmd, missing, tail(out, 20))
		}
		logf("smc setup: %s: ok (%s)", s.what, summarize(out))
	}
	if out, err := h.vm.mustRun(ctx, 10*time.Second, "sysctl -n net.smc.smcr_testlink_time"); err == nil {
		h.smcTestlinkDefault = strings.TrimSpace(out)
	}
	return nil
}

// missingLines returns the wanted substrings that out lacks.
func missingLines(out string, want []string) []string {
	var miss []string
	for _, w := range want {
		if !strings.Contains(out+"\n", w) {
			miss = append(miss, w)
		}
	}
	return miss
}

// summarize shortens a command's output to one log line.
func summarize(out string) string {
	f := strings.Fields(out)
	s := strings.Join(f, " ")
	if len(s) > 110 {
		s = s[:107] + "..."
	}
	return s
}

// smcStats is the guest's `smcguest stats`: key → value.
type smcStats map[string]int64

var statsLineRE = regexp.MustCompile(`^([a-z0-9_.]+)=(\d+)$`)

// parseSMCStats reads smcguest stats' key=value lines; comments and
// anything else are skipped.
func parseSMCStats(out string) smcStats {
	st := smcStats{}
	for _, l := range strings.Split(out, "\n") {
		m := statsLineRE.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		v, err := strconv.ParseInt(m[2], 10, 64)
		if err == nil {
			st[m[1]] = v
		}
	}
	return st
}

// readSMCStats reads the guest's SMC statistics.
func (h *harness) readSMCStats(ctx context.Context) (smcStats, error) {
	out, err := h.vm.mustRun(ctx, 20*time.Second, "smcguest stats")
	if err != nil {
		return nil, err
	}
	st := parseSMCStats(out)
	if _, ok := st["smcr.clnt_v2_succ"]; !ok {
		return nil, fmt.Errorf("smcguest stats printed no smcr.clnt_v2_succ:\n%s", tail(out, 10))
	}
	return st, nil
}

// delta returns after-before for every key of either (keys that did not
// change are left out).
func (after smcStats) delta(before smcStats) smcStats {
	d := smcStats{}
	for k, v := range after {
		if v != before[k] {
			d[k] = v - before[k]
		}
	}
	for k, v := range before {
		if _, ok := after[k]; !ok && v != 0 {
			d[k] = -v
		}
	}
	return d
}

// smcrConns is how many SMC-R connections the delta shows for a side:
// "clnt" or "srv", SMC-Rv1 and v2 together.
func (d smcStats) smcrConns(side string) int64 {
	return d["smcr."+side+"_v1_succ"] + d["smcr."+side+"_v2_succ"]
}

// fallbacks returns the fallback reasons that counted in the delta, as
// "client 0x03030008 (peer sent no UEID) ×1", and their total.
func (d smcStats) fallbacks() ([]string, int64) {
	var out []string
	for k, v := range d {
		side, code, ok := strings.Cut(strings.TrimPrefix(k, "fallback."), ".")
		if !strings.HasPrefix(k, "fallback.") || !ok || v == 0 {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimPrefix(code, "0x"), 16, 32)
		if err != nil {
			continue
		}
		who := map[string]string{"srv": "server", "clnt": "client"}[side]
		out = append(out, fmt.Sprintf("%s %s ×%d", who, smcwire.DiagCode(n), v))
	}
	sort.Strings(out)
	return out, d["fallback.srv_cnt"] + d["fallback.clnt_cnt"]
}
