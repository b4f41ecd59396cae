//go:build linux

package main

// The PSN proof: at a case's end both sides' views of their queue pairs
// (the guest's `rdma -j res show qp`, goroce's `roce-devinfo -j res show
// qp`) must agree for the same QP pair: each side's SQ PSN, the next PSN
// its requester sends, is the other's RQ PSN, the next its responder
// expects, once nothing is in flight. A disagreement names the side that
// lost track of what it sent or accepted.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// resQP is one queue pair of rdma's (or roce-devinfo's) -j res show qp.
type resQP struct {
	IfName string `json:"ifname"`
	LQPN   uint32 `json:"lqpn"`
	RQPN   uint32 `json:"rqpn"`
	Type   string `json:"type"`
	State  string `json:"state"`
	RQPSN  uint32 `json:"rq-psn"`
	SQPSN  uint32 `json:"sq-psn"`
}

// parseResQP reads a -j res show qp array.
func parseResQP(out string) ([]resQP, error) {
	i := strings.IndexByte(out, '[')
	if i < 0 {
		return nil, fmt.Errorf("no JSON array in %q", tail(out, 3))
	}
	var qps []resQP
	if err := json.Unmarshal([]byte(out[i:strings.LastIndexByte(out, ']')+1]), &qps); err != nil {
		return nil, fmt.Errorf("res show qp: %v in %q", err, tail(out, 3))
	}
	return qps, nil
}

// psnPairs matches goroce's RC queue pairs with the guest's by their
// numbers and compares their PSNs; it returns a line per pair and the
// disagreements. No pair at all is a disagreement too.
func psnPairs(goroce, guest []resQP) (pairs, bad []string) {
	for _, g := range goroce {
		if g.Type != "RC" {
			continue
		}
		for _, k := range guest {
			if k.Type != "RC" || k.LQPN != g.RQPN || k.RQPN != g.LQPN {
				continue
			}
			line := fmt.Sprintf("goroce QP %#x (sq-psn %d, rq-psn %d) <-> guest QP %#x (sq-psn %d, rq-psn %d)",
				g.LQPN, g.SQPSN, g.RQPSN, k.LQPN, k.SQPSN, k.RQPSN)
			pairs = append(pairs, line)
			if g.SQPSN != k.RQPSN || g.RQPSN != k.SQPSN {
				bad = append(bad, line)
			}
		}
	}
	if len(pairs) == 0 {
		bad = append(bad, fmt.Sprintf("no QP pair in both views (goroce %d QPs, guest %d)", len(goroce), len(guest)))
	}
	return pairs, bad
}

// psnProbe reads both sides' queue pairs at the end of an SMC-R case
// with goroce serving (its link group still lingers), until they agree
// (what was in flight lands) or a few reads have passed, and fails the
// case if they never do; base.psn.txt keeps both views. It also holds
// goroce's SMC statistics against the guest's (smcStatsAgree).
func (h *harness) psnProbe(ctx context.Context, c *testCase, r *result, base string) {
	var last []string
	var log strings.Builder
	for try := 0; try < 10; try++ {
		gout, _, gerr := h.vm.run(ctx, 10*time.Second, "rdma -j res show qp")
		hout, herr := exec.CommandContext(ctx, filepath.Join(h.opts.bin, "roce-devinfo"), "-j", "res", "show", "qp").Output()
		fmt.Fprintf(&log, "# try %d\n# guest: rdma -j res show qp\n%s\n# goroce: roce-devinfo -j res show qp\n%s\n", try, gout, hout)
		if gerr != nil || herr != nil {
			last = []string{fmt.Sprintf("reading the QPs: guest %v, goroce %v", gerr, herr)}
			break
		}
		gq, err1 := parseResQP(gout)
		hq, err2 := parseResQP(string(hout))
		if err1 != nil || err2 != nil {
			last = []string{fmt.Sprintf("parsing the QPs: guest %v, goroce %v", err1, err2)}
			break
		}
		pairs, bad := psnPairs(hq, gq)
		if len(bad) == 0 {
			r.notes = append(r.notes, "PSNs agree: "+strings.Join(pairs, "; "))
			last = nil
			break
		}
		last = bad
		time.Sleep(200 * time.Millisecond) // what is in flight lands; bounded by the count
	}
	os.WriteFile(base+".psn.txt", []byte(log.String()), 0o644)
	for _, b := range last {
		r.fail("the two sides' QP views disagree at the end: %s", b)
	}
	h.readGoroceStats(ctx, r)
}

// readGoroceStats keeps goroce's SMC statistics (smcr stats json of the
// serving process, read while it lingers) for smcStatsAgree.
func (h *harness) readGoroceStats(ctx context.Context, r *result) {
	out, err := exec.CommandContext(ctx, filepath.Join(h.opts.bin, "smcr"), "stats", "json").Output()
	if err != nil {
		r.fail("goroce's smcr stats json: %v", err)
		return
	}
	var st map[string]map[string]int64
	if err := json.Unmarshal(out, &st); err != nil {
		r.fail("goroce's smcr stats json: %v: %s", err, tail(string(out), 2))
		return
	}
	r.smc.goroceStats = st["SMCR"]
}

// smcStatsAgree holds goroce's SMC statistics against the guest's delta: the
// SMC-R connections the kernel made as a client goroce took as a server,
// and every payload byte each way (Linux and goroce count what the
// application's calls moved; the CDC and LLC messages, and the RDMA
// WRITEs' headers, are in neither). A case that aborts leaves the counts
// of whatever moved, which need not agree byte for byte.
func smcStatsAgree(c *testCase, r *result) {
	g, d := r.smc.goroceStats, r.smc.delta
	if g == nil {
		return
	}
	r.notes = append(r.notes, fmt.Sprintf("goroce's statistics: srv v2 %d, tx %d, rx %d bytes", g["SMC_SRV_V2_SUCC_CNT"], g["SMC_TX_BYTES"], g["SMC_RX_BYTES"]))
	if got, want := g["SMC_SRV_V1_SUCC_CNT"]+g["SMC_SRV_V2_SUCC_CNT"], d.smcrConns("clnt"); got != want {
		r.fail("goroce counted %d SMC-R server connection(s), the kernel %d client one(s)", got, want)
	}
	if c.smc.clientEnd == endAbort || c.smc.serverEnd == endAbort {
		return
	}
	if g["SMC_TX_BYTES"] != d["smcr.rx_bytes"] || g["SMC_RX_BYTES"] != d["smcr.tx_bytes"] {
		r.fail("goroce counted tx %d, rx %d bytes; the kernel rx %d, tx %d", g["SMC_TX_BYTES"], g["SMC_RX_BYTES"], d["smcr.rx_bytes"], d["smcr.tx_bytes"])
	}
}
