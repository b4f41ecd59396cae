//go:build linux

package main

// The RDMA CM (issue 22): librdmacm's rping in the guest against goroce's
// cmd/rping, each side the server once; the connection is made with CM
// MADs over QP 1, so the capture has the kernel's CM and goroce's.

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/goroce/goroce/rdmacm/cmwire"
)

// rpingPort is the rdma_cm port of a case: one per case, as the TCP ports
// of the other tools.
func rpingPort(port int) int { return 7174 + port - 18515 }

var rping = &tool{
	name: "rping", guestProg: "rping", goroceCmd: "rping",
	args: func(c *testCase, port int) []string {
		a := []string{"-p", strconv.Itoa(rpingPort(port)), "-C", strconv.Itoa(c.iters), "-S", strconv.Itoa(c.size)}
		if c.size <= rpingVerboseMax {
			a = append(a, "-v")
		}
		if c.chk {
			a = append(a, "-V")
		}
		return a
	},
	guestDev: func(c *testCase, e endpoints) []string {
		if c.server == guestServer {
			return []string{"-s", "-a", e.peerAddr}
		}
		return []string{"-c"}
	},
	goroceDev: func(c *testCase, e endpoints) []string {
		a := []string{"-c", "-I", e.deviceAddr()}
		if c.server == goroceServer {
			// -d: the server's "rdma_listen" line, which the harness waits
			// for before it starts the guest's client.
			a = []string{"-s", "-d", "-a", e.deviceAddr()}
		}
		return append(a, "--timeout", fmt.Sprintf("%ds", c.timeout()))
	},
	serverAddr: func(addr string) []string { return []string{"-a", addr} },
	parse:      parseRping,
	want: func(c *testCase, _ bool) (int, bool) {
		if c.size > rpingVerboseMax {
			return 0, false // no -v: the capture counts the pings
		}
		return c.iters, true
	},
	checkCapture:     rpingPings,
	goroceListenLine: "rdma_listen",
	guestListening:   cmListening(rpingPort),
}

// rpingVerboseMax is the largest -S run with -v: each ping's line holds
// the whole buffer, and -S 65000's 6.5 MB from the guest (through its job
// channel, under TCG) took more than the 30 s the harness gives it.
const rpingVerboseMax = 4096

// rpingPings checks that the server READ each ping and WROTE it back: one
// RDMA READ request and one RDMA WRITE (its ONLY or FIRST packet) per
// ping, retransmissions aside.
func rpingPings(c *testCase, cc *captureCheck) []string {
	srv := map[side]string{guestServer: guestIP, goroceServer: hostIP}[c.server]
	reads := len(cc.opPSNs[srv+" RDMA_READ_REQUEST"])
	writes := len(cc.opPSNs[srv+" RDMA_WRITE_ONLY"]) + len(cc.opPSNs[srv+" RDMA_WRITE_FIRST"])
	if reads != c.iters || writes != c.iters {
		return []string{fmt.Sprintf("the server sent %d RDMA READ requests and %d RDMA WRITEs, not one of each per ping (%d)", reads, writes, c.iters)}
	}
	return nil
}

var rpingDataRE = regexp.MustCompile(`(?m)^(server )?ping data: rdma-ping-(\d+): `)

// parseRping counts the pings a side printed (-v), checking that they
// come in order from 0.
func parseRping(out string) perf {
	var p perf
	for _, m := range rpingDataRE.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[2])
		if n != p.iters {
			return perf{}
		}
		p.iters++
	}
	p.ok = p.iters > 0
	return p
}

// cmListening is the guest command that waits for an RDMA CM listener on
// rdma_cm port cmPort (rdma_cm has no socket for waitlisten to see): rdma
// res show cm_id lists it.
func cmListening(cmPort func(int) int) func(port int) string {
	return func(port int) string {
		p := cmPort(port)
		return fmt.Sprintf(`n=0; while [ $n -lt 150 ] && ! rdma res show cm_id 2>/dev/null | grep -q "LISTEN.*:%d\b"; do usleep 100000; n=$((n+1)); done; [ $n -lt 150 ] || { echo "nothing listens on RDMA CM port %d"; rdma res show cm_id; false; }`, p, p)
	}
}

// ucmatosePort is a case's ucmatose port (its default is 7471).
func ucmatosePort(port int) int { return 7471 + port - 18515 }

// udaddyPort is udaddy's: fixed (its -p chooses the port space).
func udaddyPort(int) int { return 7174 }

// cmatoseArgs are what ucmatose and udaddy take alike: -c connections
// (c.qps), -C messages (c.iters) of -S bytes.
func cmatoseArgs(c *testCase) []string {
	return []string{"-c", strconv.Itoa(c.qps), "-C", strconv.Itoa(c.iters), "-S", strconv.Itoa(c.size)}
}

// cmatoseTool is ucmatose or udaddy: the server binds (-b) its address,
// the client names the server with -s and binds goroce's device with -b.
func cmatoseTool(name, prefix string, port func(int) int) *tool {
	return &tool{
		name: name, guestProg: name, goroceCmd: name,
		args: func(c *testCase, p int) []string {
			a := cmatoseArgs(c)
			if name == "ucmatose" {
				a = append(a, "-p", strconv.Itoa(port(p)))
			}
			return a
		},
		guestDev: func(c *testCase, e endpoints) []string {
			if c.server == guestServer {
				return []string{"-b", e.peerAddr}
			}
			return nil
		},
		goroceDev: func(c *testCase, e endpoints) []string {
			return []string{"-b", e.deviceAddr(), "--timeout", fmt.Sprintf("%ds", c.timeout())}
		},
		serverAddr:       func(addr string) []string { return []string{"-s", addr} },
		parse:            parseCmatose,
		want:             func(*testCase, bool) (int, bool) { return 0, true }, // parseCmatose's "some"
		goroceListenLine: prefix + ": starting server",
		guestListening:   cmListening(port),
	}
}

var (
	ucmatose = cmatoseTool("ucmatose", "cmatose", ucmatosePort)
	udaddy   = cmatoseTool("udaddy", "udaddy", udaddyPort)
)

// parseCmatose reads how ucmatose and udaddy end: every message of every
// connection went both ways ("data transfers complete") and the status.
func parseCmatose(out string) perf {
	if !strings.Contains(out, "data transfers complete\n") || !strings.Contains(out+"\n", "return status 0\n") {
		return perf{}
	}
	return perf{ok: true, iters: 1}
}

// cmCases are issue 22's: rping both ways with -V (data checked) at the
// two sizes, -C 100; and a loss case where the CM's MADs must be resent.
func cmCases() []testCase {
	var cs []testCase
	for _, size := range []int{64, 65000} {
		cs = append(cs, both(testCase{tool: rping, size: size, iters: 100, mtu: 1024, chk: true})...)
	}
	// The kernel's first REP, or RTU, lost (madLossQdisc): the kernel's
	// CM resends its REP after its timeout, or goroce's its REP and the
	// kernel answers the duplicate with the RTU again (about 4 s each).
	cs = append(cs, both(testCase{tool: rping, size: 64, iters: 20, mtu: 1024, chk: true, madLoss: true})...)
	// Several connections (ucmatose) and UD endpoints (udaddy) at once.
	cs = append(cs, both(testCase{tool: ucmatose, size: 1000, iters: 50, mtu: 1024, qps: 4})...)
	cs = append(cs, both(testCase{tool: udaddy, size: 1000, iters: 50, mtu: 1024, qps: 3})...)
	// perftest -R: its channel and its test QP both connected through the
	// RDMA CM, on the same port one after the other.
	cs = append(cs, both(testCase{tool: ibSendBWCM, size: 65536, iters: 200, mtu: 1024})...)
	return append(cs, both(testCase{tool: ibWriteLatCM, size: 2, iters: 200, mtu: 1024})...)
}

// perftestCM is a perftest tool run with -R: the exchanges go over an
// RDMA CM connection on the test's port (rdma_cm's, so no TCP socket
// listens there: the guest's server is seen in rdma res show cm_id), and
// the test's QPs are connected through the CM too.
func perftestCM(t *tool) *tool {
	cp := *t
	cp.name = t.name + " -R"
	args := t.args
	cp.args = func(c *testCase, port int) []string { return append(args(c, port), "-R") }
	cp.guestListening = cmListening(func(port int) int { return port })
	return &cp
}

var (
	ibSendBWCM   = perftestCM(ibSendBW)
	ibWriteLatCM = perftestCM(ibWriteLat)
)

// cmOnSMC picks the RDMA CM cases repeated on the 6.12 guest: rping at
// -S 64 both ways.
func cmOnSMC(c *testCase) bool { return c.tool == rping && c.size == 64 && !c.lossy() }

// madResent reports whether the kernel's CM counters (rxeCounters) show a
// MAD resent or a duplicate received: what a madLoss case must cause.
func madResent(counters map[string]int64) bool {
	for k, v := range counters {
		if v > 0 && (strings.HasPrefix(k, "cm_tx_retries/") || strings.HasPrefix(k, "cm_rx_duplicates/")) {
			return true
		}
	}
	return false
}

// madLossQdisc loses the first, third, ... REP, RTU or DREP leaving the
// guest's eth0: a prio qdisc whose second band, where u32 filters send
// those MADs (IPv4 without options: UDP's destination port at 22, the
// BTH's opcode at 28, its destination QP in the low 24 bits at 32, the MAD's
// attribute ID at 64), is a netem alternating between a state that loses
// everything and one that loses nothing (Gilbert-Elliott, p = r = 100%,
// starting in the losing one). The kernel's REP or RTU is lost and comes
// again after the CM's timeout; the REQ and DREQ are not, since an rping
// client that exits after its DREQ resends nothing (cm_destroy_id), and
// its server, Linux's as goroce's, would wait for ever. netem rather than
// a filter's drop action: rxe resends at once a packet the qdisc refuses
// (NET_XMIT_DROP gives rxe_xmit_packet -EAGAIN), while netem's loss
// reports success, so the MAD is lost on the wire. Each case makes it
// afresh, to start in the losing state; it replaces the root qdisc, so a
// case has either loss or madLoss.
var madLossQdisc = func() string {
	cmd := "{ tc qdisc del dev eth0 root 2>/dev/null; true; } && tc qdisc add dev eth0 root handle 1: prio bands 2 priomap 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 && " +
		"tc qdisc add dev eth0 parent 1:2 handle 20: netem loss gemodel 100% 100% 0% 100%"
	for _, attr := range []cmwire.AttrID{cmwire.AttrREP, cmwire.AttrRTU, cmwire.AttrDREP} {
		cmd += fmt.Sprintf(" && tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip protocol 17 0xff "+
			"match u16 4791 0xffff at 22 match u8 0x64 0xff at 28 match u32 0x00000001 0x00ffffff at 32 "+
			"match u16 %#04x 0xffff at 64 flowid 1:2", uint16(attr))
	}
	return cmd
}()
