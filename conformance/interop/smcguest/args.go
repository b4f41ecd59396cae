//go:build linux

package main

// Command-line parsing: positional arguments and options in any order
// ("server 5000 -n 8 -shut" and "server -n 8 5000" alike), options as
// -name, --name, -name VALUE or -name=VALUE, "--" ending the options.

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// optSpec is one option a command takes.
type optSpec struct {
	name  string
	value bool // takes a value
}

type parsedArgs struct {
	pos  []string
	vals map[string]string
	set  map[string]bool
}

func parseArgs(args []string, specs []optSpec) (parsedArgs, error) {
	p := parsedArgs{vals: map[string]string{}, set: map[string]bool{}}
	byName := map[string]optSpec{}
	for _, s := range specs {
		byName[s.name] = s
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			p.pos = append(p.pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			p.pos = append(p.pos, a)
			continue
		}
		name := strings.TrimLeft(a, "-")
		val, hasVal := "", false
		if k, v, ok := strings.Cut(name, "="); ok {
			name, val, hasVal = k, v, true
		}
		s, ok := byName[name]
		if !ok {
			return p, fmt.Errorf("unknown option %s", a)
		}
		switch {
		case s.value && !hasVal:
			if i+1 >= len(args) {
				return p, fmt.Errorf("option -%s needs a value", name)
			}
			i++
			val = args[i]
		case !s.value && hasVal:
			return p, fmt.Errorf("option -%s takes no value", name)
		}
		if p.set[name] {
			return p, fmt.Errorf("option -%s given twice", name)
		}
		p.set[name] = true
		p.vals[name] = val
	}
	return p, nil
}

// intOpt returns the option's value as an integer in [lo, hi], or def.
func (p parsedArgs) intOpt(name string, def, lo, hi int) (int, error) {
	if !p.set[name] {
		return def, nil
	}
	n, err := strconv.Atoi(p.vals[name])
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("-%s %q: want a number from %d to %d", name, p.vals[name], lo, hi)
	}
	return n, nil
}

// durOpt returns the option's value as a duration (10s, 2m), or def.
func (p parsedArgs) durOpt(name string, def time.Duration) (time.Duration, error) {
	if !p.set[name] {
		return def, nil
	}
	d, err := time.ParseDuration(p.vals[name])
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("-%s %q: want a duration such as 30s", name, p.vals[name])
	}
	return d, nil
}

// parsePort reads a TCP port.
func parsePort(s string) (uint16, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q: want 1 to 65535", s)
	}
	return uint16(n), nil
}

// parseSizes reads a list of message sizes: 1,1024,64k,1m,16M.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := 1
		switch {
		case strings.HasSuffix(f, "k") || strings.HasSuffix(f, "K"):
			mult, f = 1<<10, f[:len(f)-1]
		case strings.HasSuffix(f, "m") || strings.HasSuffix(f, "M"):
			mult, f = 1<<20, f[:len(f)-1]
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > maxMessage/mult {
			return nil, fmt.Errorf("size %q: want 1 to %d bytes (k and m suffixes allowed)", f, maxMessage)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// maxMessage bounds one message (the largest case is 16 MiB).
const maxMessage = 256 << 20

// endMode is how a side ends a connection.
type endMode string

const (
	endShut  endMode = "shut"  // shutdown(SHUT_WR), read the peer's EOF, close
	endClose endMode = "close" // close
	endAbort endMode = "abort" // close with unread data in the receive queue
)

func parseEnd(s string) (endMode, error) {
	switch m := endMode(s); m {
	case endShut, endClose, endAbort:
		return m, nil
	}
	return "", fmt.Errorf("-end %q: want shut, close or abort", s)
}

// serverOpts is `smcguest server PORT [-n CONNS] [-shut|-close|-abort]
// [-peer-abort] [-tcp] [-addr A] [-timeout D]`.
type serverOpts struct {
	addr      netip.AddrPort
	conns     int
	end       endMode
	peerAbort bool // the clients abort: a reset is how a connection ends
	tcp       bool
	timeout   time.Duration
}

var serverSpecs = []optSpec{{"n", true}, {"shut", false}, {"close", false}, {"abort", false},
	{"peer-abort", false}, {"tcp", false}, {"addr", true}, {"timeout", true}}

func parseServer(args []string) (serverOpts, error) {
	o := serverOpts{end: endShut}
	p, err := parseArgs(args, serverSpecs)
	if err != nil {
		return o, err
	}
	if len(p.pos) != 1 {
		return o, fmt.Errorf("want: server PORT [options]")
	}
	port, err := parsePort(p.pos[0])
	if err != nil {
		return o, err
	}
	ip := netip.IPv4Unspecified()
	if p.set["addr"] {
		if ip, err = netip.ParseAddr(p.vals["addr"]); err != nil || !ip.Is4() {
			return o, fmt.Errorf("-addr %q: want an IPv4 address", p.vals["addr"])
		}
	}
	o.addr = netip.AddrPortFrom(ip, port)
	if o.conns, err = p.intOpt("n", 1, 1, 1024); err != nil {
		return o, err
	}
	n := 0
	for _, m := range []endMode{endShut, endClose, endAbort} {
		if p.set[string(m)] {
			o.end = m
			n++
		}
	}
	if n > 1 {
		return o, fmt.Errorf("-shut, -close and -abort exclude each other")
	}
	o.peerAbort, o.tcp = p.set["peer-abort"], p.set["tcp"]
	if o.timeout, err = p.durOpt("timeout", 120*time.Second); err != nil {
		return o, err
	}
	return o, nil
}

// clientOpts is `smcguest client ADDR PORT [-conns N] [-parallel] [-sizes
// LIST] [-end shut|close|abort] [-idle D] [-peer-abort] [-tcp] [-timeout D]
// [-hold-at LIST -hold PREFIX]`.
type clientOpts struct {
	addr      netip.AddrPort
	conns     int
	parallel  bool
	sizes     []int
	end       endMode
	idle      time.Duration // the connection idles this long before it ends
	peerAbort bool          // the server aborts: a reset before the end is expected
	tcp       bool
	timeout   time.Duration
	holds     *holds // the first connection's hold points (hold.go)
}

var clientSpecs = []optSpec{{"conns", true}, {"parallel", false}, {"sizes", true}, {"end", true},
	{"idle", true}, {"peer-abort", false}, {"tcp", false}, {"timeout", true}, {"hold-at", true}, {"hold", true}}

func parseClient(args []string) (clientOpts, error) {
	o := clientOpts{conns: 1, end: endShut, sizes: []int{1, 1024, 65536}}
	p, err := parseArgs(args, clientSpecs)
	if err != nil {
		return o, err
	}
	if len(p.pos) != 2 {
		return o, fmt.Errorf("want: client ADDR PORT [options]")
	}
	ip, err := netip.ParseAddr(p.pos[0])
	if err != nil || !ip.Is4() {
		return o, fmt.Errorf("address %q: want an IPv4 address", p.pos[0])
	}
	port, err := parsePort(p.pos[1])
	if err != nil {
		return o, err
	}
	o.addr = netip.AddrPortFrom(ip, port)
	if o.conns, err = p.intOpt("conns", 1, 1, 1024); err != nil {
		return o, err
	}
	if p.set["sizes"] {
		if o.sizes, err = parseSizes(p.vals["sizes"]); err != nil {
			return o, err
		}
	}
	if p.set["end"] {
		if o.end, err = parseEnd(p.vals["end"]); err != nil {
			return o, err
		}
	}
	o.parallel, o.peerAbort, o.tcp = p.set["parallel"], p.set["peer-abort"], p.set["tcp"]
	if o.idle, err = p.durOpt("idle", 0); err != nil {
		return o, err
	}
	if o.timeout, err = p.durOpt("timeout", 120*time.Second); err != nil {
		return o, err
	}
	if o.idle >= o.timeout {
		return o, fmt.Errorf("-idle %v must be shorter than -timeout %v", o.idle, o.timeout)
	}
	if o.holds, err = parseHolds(p, o.sizes); err != nil {
		return o, err
	}
	return o, nil
}

// parseHolds reads -hold-at LIST (stream offsets, in increasing order, up
// to the bytes the connection sends) and -hold PREFIX, which come
// together.
func parseHolds(p parsedArgs, sizes []int) (*holds, error) {
	if p.set["hold-at"] != p.set["hold"] {
		return nil, fmt.Errorf("-hold-at and -hold come together")
	}
	if !p.set["hold"] {
		return nil, nil
	}
	at, err := parseSizes(p.vals["hold-at"])
	if err != nil {
		return nil, fmt.Errorf("-hold-at: %w", err)
	}
	total := 0
	for _, s := range sizes {
		total += s
	}
	h := &holds{prefix: p.vals["hold"]}
	for i, a := range at {
		if a > total || (i > 0 && a <= at[i-1]) {
			return nil, fmt.Errorf("-hold-at %s: want increasing offsets up to the %d bytes sent", p.vals["hold-at"], total)
		}
		h.at = append(h.at, uint64(a))
	}
	if h.prefix == "" {
		return nil, fmt.Errorf("-hold: want a file name prefix")
	}
	return h, nil
}
