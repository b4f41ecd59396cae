//go:build linux

package main

// The RDMA CM (issue 22): librdmacm's rping in the guest against goroce's
// cmd/rping, each side the server once; the connection is made with CM
// MADs over QP 1, so the capture has the kernel's CM and goroce's.

import (
	"fmt"
	"regexp"
	"strconv"
)

// rpingPort is the rdma_cm port of a case: one per case, as the TCP ports
// of the other tools.
func rpingPort(port int) int { return 7174 + port - 18515 }

var rping = &tool{
	name: "rping", guestProg: "rping", goroceCmd: "rping",
	args: func(c *testCase, port int) []string {
		a := []string{"-p", strconv.Itoa(rpingPort(port)), "-C", strconv.Itoa(c.iters), "-S", strconv.Itoa(c.size), "-v"}
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
	serverAddr:       func(addr string) []string { return []string{"-a", addr} },
	parse:            parseRping,
	goroceListenLine: "rdma_listen",
	guestListening:   cmListening,
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
// port (rdma_cm has no socket for waitlisten to see): rdma res show cm_id
// lists it.
func cmListening(port int) string {
	return fmt.Sprintf(`n=0; while [ $n -lt 150 ] && ! rdma res show cm_id 2>/dev/null | grep -q "LISTEN.*:%d\b"; do usleep 100000; n=$((n+1)); done; [ $n -lt 150 ] || { echo "nothing listens on RDMA CM port %d"; rdma res show cm_id; false; }`,
		rpingPort(port), rpingPort(port))
}

// cmCases are issue 22's: rping both ways with -V (data checked) at the
// two sizes, -C 100; and a loss case where the CM's MADs must be resent.
func cmCases() []testCase {
	var cs []testCase
	for _, size := range []int{64, 65000} {
		cs = append(cs, both(testCase{tool: rping, size: size, iters: 100, mtu: 1024, chk: true})...)
	}
	return append(cs, both(testCase{tool: rping, size: 64, iters: 20, mtu: 1024, chk: true, loss: 20, lossIn: 20})...)
}

// cmOnSMC picks the RDMA CM cases repeated on the 6.12 guest: rping at
// -S 64 both ways.
func cmOnSMC(c *testCase) bool { return c.tool == rping && c.size == 64 && !c.lossy() }
