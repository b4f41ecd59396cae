//go:build linux

package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A case is one run of a peer program in the guest (the kernel's rxe)
// against goroce's version of it on the host side, one of them the server.
//
// To add a case, add a line to cases() below. To add a program pair (say
// ibv_uc_pingpong against cmd/uc_pingpong), add a tool: its two program
// names, how to build their arguments and how to read their results.

// side is where the server runs.
type side int

const (
	guestServer  side = iota // the kernel's program serves, goroce's connects
	goroceServer             // goroce's program serves, the kernel's connects
)

func (s side) String() string {
	if s == guestServer {
		return "rxe srv ← goroce cli"
	}
	return "goroce srv ← rxe cli"
}

// tool is a program pair: the guest's (rdma-core's) and goroce's.
type tool struct {
	name      string
	guestProg string // in the guest's PATH
	goroceCmd string // under -bin
	// args returns the arguments both programs share (the server address
	// is added for the client, the device options per side).
	args func(c *testCase, port int) []string
	// guestDev and goroceDev are the options naming each side's device.
	guestDev, goroceDev func(c *testCase, e endpoints) []string
	// parse reads one program's output.
	parse func(out string) perf
	// goroceListenLine is what goroce's server prints once it listens:
	// the harness starts the guest's client after it.
	goroceListenLine string
	// want says what one side must report: the iterations (0: any number,
	// as a -D run reports what it did in its time) and whether it prints
	// results at all (perftest's read_lat server prints none, and goroce's
	// must not either). nil: every side reports c.iters.
	want func(c *testCase, server bool) (iters int, results bool)
	// notes finds what is worth knowing in one side's output (nil: nothing).
	notes func(who, out string) []string
	// oneWay: only the client sends RoCE packets (a UC or UD perftest
	// bandwidth test: nothing is acknowledged), so the capture need not
	// have packets from the server.
	oneWay func(c *testCase) bool
	// serverAddr is how the client names the server (nil: the address as
	// the last argument).
	serverAddr func(addr string) []string
	// guestListening is the guest command that waits until the guest's
	// server listens on the case's port (nil: waitlisten, a TCP port).
	guestListening func(port int) string
	// checkCapture finds what the capture must show for the tool's case
	// and does not (nil: nothing more than every case's checks).
	checkCapture func(c *testCase, cc *captureCheck) []string
}

// expect is what a case's side must report (tool.want).
func (c *testCase) expect(server bool) (iters int, results bool) {
	if c.tool.want == nil {
		return c.iters, true
	}
	return c.tool.want(c, server)
}

// oneWay reports whether only the client sends RoCE packets in the case.
func (c *testCase) oneWay() bool { return c.tool.oneWay != nil && c.tool.oneWay(c) }

// pingpongArgs are the options ibv_*_pingpong and goroce's take alike.
func pingpongArgs(c *testCase, port int) []string {
	a := []string{"-p", strconv.Itoa(port), "-s", strconv.Itoa(c.size), "-m", strconv.Itoa(c.mtu), "-n", strconv.Itoa(c.iters)}
	if c.events {
		a = append(a, "-e")
	}
	if c.chk {
		a = append(a, "-c")
	}
	return a
}

var rcPingpong = &tool{
	name: "rc_pingpong", guestProg: "ibv_rc_pingpong", goroceCmd: "rc_pingpong",
	args: pingpongArgs,
	guestDev: func(_ *testCase, e endpoints) []string {
		return []string{"-d", e.peerDev, "-i", "1", "-g", strconv.Itoa(e.peerGID)}
	},
	goroceDev: func(c *testCase, e endpoints) []string {
		return []string{"-d", e.deviceAddr(), "-g", "1", "-timeout", fmt.Sprintf("%ds", c.timeout())}
	},
	parse:            parsePingpong,
	goroceListenLine: "local address:",
}

// endpoints are what the programs' arguments name: the kernel side's
// device, its GID index and address, and goroce's address (the
// out-of-band exchange's too). goroceAddr6 is goroce's IPv6 address for
// the IPv6 cases, goroceDev the address its device takes when it is not
// goroceAddr, goroceIface the interface of its AF_PACKET backend.
type endpoints struct {
	peerDev     string
	peerGID     int
	peerAddr    string
	goroceAddr  string
	goroceAddr6 string
	goroceDev   string
	goroceIface string
}

// guestEnds are the harness's own: the guest's rxe0 and the bridge.
var guestEnds = endpoints{peerDev: "rxe0", peerGID: 1, peerAddr: guestIP, goroceAddr: hostIP,
	goroceAddr6: hostLinkLocal + "%br0", goroceIface: "br0"}

// commands returns the case's two command lines (program and arguments):
// the kernel side's and goroce's, the client's with the server's address.
func (c *testCase) commands(idx int, e endpoints) (guest, goroce []string) {
	e = c.ends(e)
	port := c.port(idx)
	common := c.tool.args(c, port)
	guest = append(append([]string{c.tool.guestProg}, c.tool.guestDev(c, e)...), common...)
	goroce = append(append([]string{c.tool.goroceCmd}, c.tool.goroceDev(c, e)...), common...)
	goroce = append(goroce, c.backendArgs(e)...)
	server := func(addr string) []string { return []string{addr} }
	if c.tool.serverAddr != nil {
		server = c.tool.serverAddr
	}
	if c.server == guestServer {
		goroce = append(goroce, server(e.peerAddr)...)
	} else {
		guest = append(guest, server(e.goroceAddr)...)
	}
	return guest, goroce
}

// port is the case's TCP port for the programs' out-of-band exchange: one
// per case, so that nothing left of a case meets the next one.
func (c *testCase) port(idx int) int { return 18515 + idx }

// testCase is one case.
type testCase struct {
	guest  guestKind // the guest it needs
	smc    *smcSpec  // an SMC-R case (tool is then nil)
	tool   *tool
	server side
	size   int
	iters  int
	mtu    int     // path MTU: 1024 (NIC MTU 1500) or 4096 (NIC MTU 9000)
	events bool    // -e
	chk    bool    // -c
	loss   float64 // percent: netem loss on what the guest sends (rxe's packets)
	lossIn float64 // percent: netem loss on what the guest receives (goroce's packets)
	// madLoss loses every second MAD the guest sends (madLossQdisc): the
	// CM's messages are lost, and the MAD retries of both sides recover.
	madLoss bool
	// backend is goroce's packet backend: "" (its UDP socket) or
	// afpacket (whole frames on br0), and ipv6 makes the case RoCEv2 over
	// IPv6 (afcases.go).
	backend string
	ipv6    bool
	conn    string // perftest's -c (UC, UD; "" is RC, perftest's default)
	dur     int    // perftest's -D in seconds (0: -n iters)
	qps     int    // srq_pingpong's -q
}

func (c *testCase) name() string {
	if c.smc != nil {
		return c.smcName()
	}
	s := fmt.Sprintf("%s s=%d m=%d n=%d", c.tool.name, c.size, c.mtu, c.iters)
	if c.dur > 0 {
		s = fmt.Sprintf("%s s=%d m=%d D=%d", c.tool.name, c.size, c.mtu, c.dur)
	}
	if c.conn != "" {
		s += " -c " + c.conn
	}
	if c.qps > 0 {
		s += fmt.Sprintf(" q=%d", c.qps)
	}
	if c.events {
		s += " -e"
	}
	if c.chk {
		s += " -c"
	}
	if c.loss > 0 {
		s += fmt.Sprintf(" loss=%g%%", c.loss)
	}
	if c.lossIn > 0 {
		s += fmt.Sprintf(" lossin=%g%%", c.lossIn)
	}
	if c.madLoss {
		s += " madloss=1/2"
	}
	return s + c.variant()
}

// direction says who serves and who connects.
func (c *testCase) direction() string {
	if c.smc != nil {
		return c.smcDirection()
	}
	return c.server.String()
}

// slug is the case's name as a file name.
func (c *testCase) slug() string {
	s := c.name() + " " + map[side]string{guestServer: "rxesrv", goroceServer: "gorocesrv"}[c.server]
	if c.smc != nil {
		s = c.name() + " " + map[side]string{guestServer: "kernelsrv", goroceServer: "gorocesrv"}[c.server]
	}
	return strings.NewReplacer(" ", "_", "=", "", "%", "pct", "-", "", ",", "_", ":", "", "/", "_").Replace(s)
}

// nicMTU is the Ethernet MTU the case needs.
func (c *testCase) nicMTU() int {
	if c.mtu > 1024 {
		return 9000
	}
	return 1500
}

// timeout bounds each program of the case, in seconds.
func (c *testCase) timeout() int {
	t := 30 + c.size/1024*c.iters/2000 + c.dur // a generous 2 MB/s floor
	if c.lossy() {
		t *= 4
	}
	return t
}

func (c *testCase) lossy() bool { return c.loss > 0 || c.lossIn > 0 || c.madLoss }

// both adds the case once per direction.
func both(c testCase) []testCase {
	a, b := c, c
	a.server, b.server = guestServer, goroceServer
	return []testCase{a, b}
}

// cases is the list the harness runs, in this order (grouped by MTU so
// the NIC MTU changes twice).
func cases() []testCase {
	var cs []testCase
	for _, mtu := range []int{1024, 4096} {
		for _, size := range []int{1, 1024, 4096, 65536} {
			for _, ev := range []bool{false, true} {
				cs = append(cs, both(testCase{tool: rcPingpong, size: size, iters: 1000, mtu: mtu, events: ev})...)
			}
		}
	}
	// Loss: netem drops 5% of what the guest's eth0 sends, requests and
	// responses alike, so rxe retransmits to goroce (lost requests) and
	// goroce to rxe (lost ACKs).
	for _, size := range []int{1024, 4096, 65536} {
		cs = append(cs, both(testCase{tool: rcPingpong, size: size, iters: 200, mtu: 1024, loss: 5})...)
	}
	cs = append(cs, both(testCase{tool: rcPingpong, size: 65536, iters: 100, mtu: 4096, loss: 5, events: true})...)
	// And 5% of what it receives too (netem on an ifb that eth0's ingress
	// is redirected to): goroce's requests are lost, rxe NAKs, goroce goes
	// back N.
	cs = append(cs, both(testCase{tool: rcPingpong, size: 4096, iters: 200, mtu: 1024, loss: 5, lossIn: 5})...)
	cs = append(cs, both(testCase{tool: rcPingpong, size: 65536, iters: 100, mtu: 4096, loss: 5, lossIn: 5, events: true})...)
	cs = append(cs, backendCases()...)
	cs = append(cs, verbsCases()...)
	cs = append(cs, cmCases()...)
	return append(cs, smcCases()...)
}

// perf is what a program reports.
type perf struct {
	ok       bool // both lines found
	bytes    int64
	secs     float64
	mbits    float64
	iters    int
	usecIter float64
}

var (
	bytesRE = regexp.MustCompile(`(?m)^(\d+) bytes in ([0-9.]+) seconds = ([0-9.]+) Mbit/sec`)
	itersRE = regexp.MustCompile(`(?m)^(\d+) iters in ([0-9.]+) seconds = ([0-9.]+) usec/iter`)
)

// parsePingpong reads the two result lines ibv_*_pingpong prints.
func parsePingpong(out string) perf {
	var p perf
	m1 := bytesRE.FindStringSubmatch(out)
	m2 := itersRE.FindStringSubmatch(out)
	if m1 == nil || m2 == nil {
		return p
	}
	p.ok = true
	p.bytes, _ = strconv.ParseInt(m1[1], 10, 64)
	p.secs, _ = strconv.ParseFloat(m1[2], 64)
	p.mbits, _ = strconv.ParseFloat(m1[3], 64)
	p.iters, _ = strconv.Atoi(m2[1])
	p.usecIter, _ = strconv.ParseFloat(m2[3], 64)
	return p
}
