//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// capture is a tcpdump on the namespace's bridge, writing one file.
type capture struct {
	file   string
	proc   *proc
	mu     sync.Mutex
	stderr bytes.Buffer
}

// lockedWriter collects tcpdump's stderr and signals when it listens.
type lockedWriter struct {
	c         *capture
	listening chan struct{}
	once      sync.Once
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	w.c.stderr.Write(b)
	if strings.Contains(w.c.stderr.String(), "listening on") {
		w.once.Do(func() { close(w.listening) })
	}
	return len(b), nil
}

// startCapture starts tcpdump on br0 and waits until it listens.
func startCapture(ctx context.Context, ns *netns, ps *procs, file string) (*capture, error) {
	c := &capture{file: file}
	cmd := ns.command("tcpdump", "-i", "br0", "-n", "-s", "0", "-B", "262144", "--immediate-mode", "-U", "-w", file)
	w := &lockedWriter{c: c, listening: make(chan struct{})}
	cmd.Stderr = w
	p, err := ps.start("tcpdump", cmd)
	if err != nil {
		return nil, err
	}
	c.proc = p
	select {
	case <-w.listening:
		return c, nil
	case <-p.done:
		return nil, fmt.Errorf("tcpdump exited: %s", c.errText())
	case <-time.After(10 * time.Second):
		p.stop(time.Second)
		return nil, fmt.Errorf("tcpdump did not start listening in 10 s: %s", c.errText())
	case <-ctx.Done():
		p.stop(time.Second)
		return nil, ctx.Err()
	}
}

func (c *capture) errText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.TrimSpace(c.stderr.String())
}

var droppedRE = regexp.MustCompile(`(\d+) packets? dropped by kernel`)

// stop ends tcpdump (SIGINT, so it flushes) and returns how many packets
// the kernel dropped before tcpdump saw them.
func (c *capture) stop() (dropped int, err error) {
	// Let the last packets through the bridge reach the socket first.
	time.Sleep(100 * time.Millisecond)
	c.proc.signal(syscall.SIGINT, 5*time.Second)
	if m := droppedRE.FindStringSubmatch(c.errText()); m != nil {
		dropped, _ = strconv.Atoi(m[1])
	}
	if _, err := os.Stat(c.file); err != nil {
		return dropped, fmt.Errorf("tcpdump wrote no file: %s", c.errText())
	}
	return dropped, nil
}

// captureCheck is what rocedump says about one capture.
type captureCheck struct {
	packets      int            // RoCE packets
	bySrc        map[string]int // RoCE packets per source address
	icrcBad      int
	unverifiable int
	psnNAKs      int // NAK, PSN sequence error
	otherNAKs    int // NAK of any other code
	rnrNAKs      int
	retrans      int // per rocedump -stats
	dropped      int // by the kernel, per tcpdump
	stats        string
	// Per source address: the PSN of the last request packet it sent
	// (SEND/WRITE LAST or ONLY) and whether an ACK from the other side
	// covering it appears after it.
	lastReq      map[string]uint32
	lastReqAcked map[string]bool
	smc          *smcWire // the SMC messages (CLC, LLC, CDC) by sender
	// Per source address: its last message's history (flaky.go).
	lastMsg map[string]*msgHistory
	lastAt  map[string]float64 // time of its last packet
	// alias maps wire addresses to the role addresses the maps above are
	// keyed by (an IPv6 case's link-local addresses to guestIP, hostIP).
	alias map[string]string
	// wire is every RoCE packet's sender-chosen fields (wirecheck.go).
	wire []wireFrame
	// opPSNs is, per source address and opcode ("198.18.0.1
	// RDMA_READ_REQUEST"), the PSNs it sent them with: a retransmission
	// counts once.
	opPSNs map[string]map[uint32]bool
}

var textLineRE = regexp.MustCompile(`^(\S+) (\S+)\.\d+ > (\S+)\.\d+: (?:RC|UC|UD|RD) (\S+) qp \S+ psn (\d+)`)

// psnAtOrAfter reports whether a is b or up to 2^23 PSNs after it.
func psnAtOrAfter(a, b uint32) bool { return (a-b)&0xFFFFFF < 1<<23 }

type rocedumpJSON struct {
	Frame  int    `json:"frame"`
	Opcode uint8  `json:"opcode"`
	OpName string `json:"opname"`
	DQPN   uint32 `json:"dqpn"`
	ICRCOK *bool  `json:"icrc_ok"`
	AETH   *struct {
		Kind string `json:"kind"`
		Code int    `json:"code"`
	} `json:"aeth"`
	DETH *struct {
		SQPN uint32 `json:"sqpn"`
	} `json:"deth"`
	Src       string  `json:"src"`
	SPort     uint16  `json:"sport"`
	TTL       uint8   `json:"ttl"`
	IPv4ID    *uint16 `json:"ipid"`
	DF        *bool   `json:"df"`
	FlowLabel *uint32 `json:"flowlabel"`
}

// checkCapture runs rocedump on the file three ways: -json (ICRC and NAKs
// of every packet), text (who sent what) and -stats -q (retransmissions).
func checkCapture(ctx context.Context, rocedump, file string) (*captureCheck, error) {
	return checkCaptureAs(ctx, rocedump, file, nil)
}

// checkCaptureAs is checkCapture with the wire addresses of alias counted
// as the role addresses they map to.
func checkCaptureAs(ctx context.Context, rocedump, file string, alias map[string]string) (*captureCheck, error) {
	cc := newCaptureCheck()
	cc.alias = alias
	out, err := exec.CommandContext(ctx, rocedump, "-r", file, "-json").Output()
	if err != nil {
		return nil, fmt.Errorf("rocedump -json: %v", exitText(err))
	}
	if err := cc.addJSON(string(out)); err != nil {
		return nil, err
	}
	out, err = exec.CommandContext(ctx, rocedump, "-r", file).Output()
	if err != nil {
		return nil, fmt.Errorf("rocedump: %v", exitText(err))
	}
	cc.addText(string(out))
	out, err = exec.CommandContext(ctx, rocedump, "-r", file, "-stats", "-q").Output()
	if err != nil {
		return nil, fmt.Errorf("rocedump -stats: %v", exitText(err))
	}
	cc.addStats(string(out))
	return cc, nil
}

func newCaptureCheck() *captureCheck {
	return &captureCheck{bySrc: map[string]int{}, lastReq: map[string]uint32{}, lastReqAcked: map[string]bool{}, smc: newSMCWire(),
		lastMsg: map[string]*msgHistory{}, lastAt: map[string]float64{}, opPSNs: map[string]map[uint32]bool{}}
}

// addJSON counts rocedump -json's lines: ICRC results and NAKs.
func (cc *captureCheck) addJSON(out string) error {
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, `"opcode"`) {
			continue
		}
		var j rocedumpJSON
		if err := json.Unmarshal([]byte(l), &j); err != nil {
			return fmt.Errorf("rocedump -json line %q: %v", l, err)
		}
		cc.packets++
		cc.addWire(&j)
		switch {
		case j.ICRCOK == nil:
			cc.unverifiable++
		case !*j.ICRCOK:
			cc.icrcBad++
		}
		if j.AETH != nil {
			switch j.AETH.Kind {
			case "nak":
				if j.AETH.Code == 0 {
					cc.psnNAKs++
				} else {
					cc.otherNAKs++
				}
			case "rnr":
				cc.rnrNAKs++
			}
		}
	}
	return nil
}

// addText reads rocedump's text lines: packets per source, and whether
// each source's last request packet was ACKed.
func (cc *captureCheck) addText(out string) {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, " smc ") {
			cc.smc.add(l, cc.role)
		}
		m := textLineRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		t, _ := strconv.ParseFloat(m[1], 64)
		from, to, op := cc.role(m[2]), cc.role(m[3]), m[4]
		cc.bySrc[from]++
		cc.lastAt[from] = t
		psn64, _ := strconv.ParseUint(m[5], 10, 32)
		psn := uint32(psn64)
		if k := from + " " + op; cc.opPSNs[k] == nil {
			cc.opPSNs[k] = map[uint32]bool{psn: true}
		} else {
			cc.opPSNs[k][psn] = true
		}
		switch {
		case strings.HasPrefix(op, "RDMA_READ_RESPONSE"):
		case strings.HasSuffix(op, "_LAST") || strings.HasSuffix(op, "_ONLY") ||
			strings.Contains(op, "_LAST_WITH_") || strings.Contains(op, "_ONLY_WITH_"):
			cc.sentReq(from, psn)
			cc.lastReq[from] = psn
			cc.lastReqAcked[from] = false
			cc.sentLast(from, psn, t)
		case strings.HasSuffix(op, "_FIRST") || strings.HasSuffix(op, "_MIDDLE"):
			cc.sentReq(from, psn)
		case op == "ACKNOWLEDGE" && strings.Contains(l, "aeth(ACK"):
			if p, ok := cc.lastReq[to]; ok && psnAtOrAfter(psn, p) {
				cc.lastReqAcked[to] = true
				cc.ackedLast(to, t)
			}
		}
	}
}

// addStats keeps rocedump -stats's table and its total retransmissions.
func (cc *captureCheck) addStats(out string) {
	cc.stats = out
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 6 && f[0] == "total" {
			cc.retrans, _ = strconv.Atoi(f[3])
		}
	}
}

func exitText(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return fmt.Sprintf("%v: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err.Error()
}
