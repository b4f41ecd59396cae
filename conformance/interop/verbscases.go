//go:build linux

package main

// The UC, UD and SRQ ping-pongs and perftest's seven tools: rdma-core's
// ibv_uc_pingpong, ibv_ud_pingpong, ibv_srq_pingpong and Debian's perftest
// in the guest against goroce's cmd/uc_pingpong, cmd/ud_pingpong,
// cmd/srq_pingpong and cmd/ib_* (issue 13).

import (
	"fmt"
	"strconv"
)

// pingpongDev names each side's device for the ping-pongs, as for
// rc_pingpong.
var (
	pingpongGuestDev  = rcPingpong.guestDev
	pingpongGoroceDev = rcPingpong.goroceDev
)

var ucPingpong = &tool{
	name: "uc_pingpong", guestProg: "ibv_uc_pingpong", goroceCmd: "uc_pingpong",
	args: pingpongArgs, guestDev: pingpongGuestDev, goroceDev: pingpongGoroceDev,
	parse: parsePingpong, goroceListenLine: "local address:",
}

// udPingpong: ibv_ud_pingpong has no -m (messages are at most the port's
// active MTU, which the NIC's MTU sets); -c makes goroce's check the GRH
// area of every message it receives: the IPv4 header rxe sent, from the
// guest's address to goroce's.
var udPingpong = &tool{
	name: "ud_pingpong", guestProg: "ibv_ud_pingpong", goroceCmd: "ud_pingpong",
	args: func(c *testCase, port int) []string {
		a := []string{"-p", strconv.Itoa(port), "-s", strconv.Itoa(c.size), "-n", strconv.Itoa(c.iters)}
		if c.events {
			a = append(a, "-e")
		}
		if c.chk {
			a = append(a, "-c")
		}
		return a
	},
	guestDev: pingpongGuestDev, goroceDev: pingpongGoroceDev,
	parse: parsePingpong, goroceListenLine: "local address:",
}

// srqPingpong: -q RC QPs sharing one receive queue; -n counts the
// exchanges of all QPs together, as each side prints them.
var srqPingpong = &tool{
	name: "srq_pingpong", guestProg: "ibv_srq_pingpong", goroceCmd: "srq_pingpong",
	args: func(c *testCase, port int) []string {
		return append(pingpongArgs(c, port), "-q", strconv.Itoa(c.qps))
	},
	guestDev: pingpongGuestDev, goroceDev: pingpongGoroceDev,
	parse: parsePingpong, goroceListenLine: "local address:",
}

// perftestTool is one of perftest's programs: the guest's and goroce's
// have the same name.
func perftestTool(prog string, want func(c *testCase, server bool) (int, bool), oneWay func(c *testCase) bool) *tool {
	return &tool{
		name: prog, guestProg: prog, goroceCmd: prog,
		args: func(c *testCase, port int) []string {
			a := []string{"-p", strconv.Itoa(port)}
			if prog != "ib_atomic_bw" { // 8 bytes, and no -s
				a = append(a, "-s", strconv.Itoa(c.size))
			}
			a = append(a, "-m", strconv.Itoa(c.mtu))
			if c.dur > 0 {
				a = append(a, "-D", strconv.Itoa(c.dur))
			} else {
				a = append(a, "-n", strconv.Itoa(c.iters))
			}
			if c.conn != "" {
				a = append(a, "-c", c.conn)
			}
			if c.events {
				a = append(a, "-e")
			}
			return a
		},
		// -F: no CPU frequency warning (the guest's is whatever TCG says).
		guestDev: func(_ *testCase, e endpoints) []string {
			return []string{"-d", e.peerDev, "-i", "1", "-x", strconv.Itoa(e.peerGID), "-F"}
		},
		goroceDev: func(c *testCase, e endpoints) []string {
			return []string{"-d", e.deviceAddr(), "-x", "1", "-F", "-timeout", fmt.Sprintf("%ds", c.timeout())}
		},
		parse:            parsePerftest,
		goroceListenLine: "Waiting for client to connect",
		want:             want,
		oneWay:           oneWay,
		notes:            perftestNotes,
	}
}

// perftestAll: both sides print the run's table, with -n's iterations
// (a -D run: what was done in its time).
func perftestAll(c *testCase, _ bool) (int, bool) { return c.iters, true }

// perftestClient: only the client prints results (read_lat's server
// takes no part in the test once connected).
func perftestClient(c *testCase, server bool) (int, bool) { return c.iters, !server }

// sendUnreliable: a UC or UD SEND bandwidth test is acknowledged by
// nothing, so only the client sends.
func sendUnreliable(c *testCase) bool { return c.conn == "UC" || c.conn == "UD" }

var (
	ibSendBW   = perftestTool("ib_send_bw", perftestAll, sendUnreliable)
	ibWriteBW  = perftestTool("ib_write_bw", perftestAll, func(c *testCase) bool { return c.conn == "UC" })
	ibReadBW   = perftestTool("ib_read_bw", perftestAll, nil)
	ibAtomicBW = perftestTool("ib_atomic_bw", perftestAll, nil)
	ibSendLat  = perftestTool("ib_send_lat", perftestAll, nil)
	ibWriteLat = perftestTool("ib_write_lat", perftestAll, nil)
	ibReadLat  = perftestTool("ib_read_lat", perftestClient, nil)
)

// verbsCases are issue 13's cases: small iteration counts (they prove
// interoperation, not speed), each both ways, at path MTU 1024 but for a
// UD ping-pong of a 4096-byte MTU.
func verbsCases() []testCase {
	var cs []testCase
	add := func(c testCase) {
		if c.mtu == 0 {
			c.mtu = 1024
		}
		cs = append(cs, both(c)...)
	}
	add(testCase{tool: ucPingpong, size: 4096, iters: 100, chk: true})
	for _, size := range []int{1, 1024} {
		add(testCase{tool: udPingpong, size: size, iters: 100, chk: true})
	}
	add(testCase{tool: srqPingpong, size: 4096, iters: 100, qps: 4, chk: true})

	// perftest over RC.
	add(testCase{tool: ibSendBW, size: 65536, iters: 200})
	add(testCase{tool: ibWriteBW, size: 65536, iters: 200})
	add(testCase{tool: ibReadBW, size: 65536, iters: 200})
	add(testCase{tool: ibAtomicBW, size: 8, iters: 200})
	add(testCase{tool: ibSendLat, size: 2, iters: 200})
	add(testCase{tool: ibWriteLat, size: 2, iters: 200})
	add(testCase{tool: ibReadLat, size: 2, iters: 200})
	// UC and UD where perftest has them. Nothing tells a UC or UD SEND
	// client that the server's receive queue is empty: the server posts
	// its 512 receives (-r) before the client starts, so -n 200 needs no
	// more. (A -D run instead floods the slower side, drops most messages
	// at its socket and captures hundreds of megabytes.)
	add(testCase{tool: ibSendBW, size: 4096, iters: 200, conn: "UC"})
	add(testCase{tool: ibSendBW, size: 1024, iters: 200, conn: "UD"})
	add(testCase{tool: ibWriteBW, size: 65536, iters: 200, conn: "UC"})
	add(testCase{tool: ibSendLat, size: 2, iters: 200, conn: "UC"})
	add(testCase{tool: ibSendLat, size: 1024, iters: 200, conn: "UD"})
	add(testCase{tool: ibWriteLat, size: 2, iters: 200, conn: "UC"})

	// Loss, 5% of what the guest sends and of what it receives. RC: READ
	// responses lost (the requester re-reads from the missing packet) and
	// atomics (a duplicate is answered from the responder's replay, not
	// executed again: perftest's values go on adding up). UC: a lost
	// packet drops the rest of its message silently, the next one starts
	// clean; the WRITE client completes every one. UD and the UC
	// ping-pongs have no recovery: a lost message stalls them, as between
	// two kernel peers, so they have no loss case.
	add(testCase{tool: ibReadBW, size: 4096, iters: 100, loss: 5, lossIn: 5})
	add(testCase{tool: ibAtomicBW, size: 8, iters: 100, loss: 5, lossIn: 5})
	add(testCase{tool: ibWriteBW, size: 4096, iters: 200, conn: "UC", loss: 5, lossIn: 5})

	// Path MTU 4096 (NIC MTU 9000): a UD message of a whole MTU.
	add(testCase{tool: udPingpong, size: 4096, iters: 100, mtu: 4096, chk: true})
	return cs
}
