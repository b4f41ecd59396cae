package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/goroce/goroce/rocev2"
)

// config is what the command line asks for.
type config struct {
	file    string
	json    bool
	stats   bool
	quiet   bool // no per-packet output (with -stats)
	absTime bool
	count   int
	filter  filter
}

// filter selects the packets to print and count.
type filter struct {
	qp    uint32
	hasQP bool
	ops   *[256]bool // nil: every opcode
	host  netip.Addr // invalid: any host
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("rocedump", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rocedump -r FILE [flags]\n\nPrints the RoCEv2 packets of a pcap or pcapng capture. Times are seconds.microseconds\nsince the first frame of the file (-tt: since the Unix epoch).\n\nflags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.file, "r", "", "capture `file` to read, pcap or pcapng (- for stdin)")
	fs.BoolVar(&cfg.json, "json", false, "print one JSON object per RoCE packet per line")
	fs.BoolVar(&cfg.stats, "stats", false, "print per-QP packet, byte, retransmission and NAK counts at the end")
	fs.BoolVar(&cfg.quiet, "q", false, "print no packets, only -stats")
	fs.BoolVar(&cfg.absTime, "tt", false, "print absolute times (Unix seconds) instead of times since the first frame")
	fs.IntVar(&cfg.count, "c", 0, "stop after `count` printed packets (0: no limit)")
	fs.Func("qp", "only packets to destination QP `n` (decimal or 0x hex)", func(s string) error {
		v, err := strconv.ParseUint(s, 0, 32)
		if err != nil || v > 0xFFFFFF {
			return errors.New("not a 24-bit QP number")
		}
		cfg.filter.qp, cfg.filter.hasQP = uint32(v), true
		return nil
	})
	fs.Func("op", "only these opcodes: `names or numbers`, comma separated (e.g. SEND_ONLY, \"RC ACKNOWLEDGE\", 0x11, UD)", func(s string) error {
		set, err := parseOpcodes(s)
		cfg.filter.ops = set
		return err
	})
	fs.Func("host", "only packets from or to IP `addr`", func(s string) error {
		a, err := netip.ParseAddr(s)
		cfg.filter.host = a.Unmap()
		return err
	})
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if cfg.file == "" {
		fs.Usage()
		return cfg, errors.New("-r FILE is required")
	}
	if cfg.count < 0 {
		return cfg, errors.New("-c must not be negative")
	}
	return cfg, nil
}

// normOp folds the ways an opcode name can be typed: case, and space,
// hyphen or underscore between words.
func normOp(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' {
			return '_'
		}
		return r
	}, strings.ToUpper(strings.TrimSpace(s)))
}

// parseOpcodes reads a comma-separated list of opcode numbers, full names
// ("RC SEND_ONLY"), operation names matching every transport ("SEND_ONLY")
// or transports ("RC", "UC", "UD", "CNP").
func parseOpcodes(s string) (*[256]bool, error) {
	var set [256]bool
	for _, tok := range strings.Split(s, ",") {
		name := normOp(tok)
		if v, err := strconv.ParseUint(name, 0, 8); err == nil {
			set[v] = true
			continue
		}
		found := false
		for i := range 256 {
			op := rocev2.Opcode(i)
			if !op.Valid() {
				continue
			}
			full := normOp(op.String())
			_, short, _ := strings.Cut(full, "_")
			if name == full || name == short || name == op.Transport().String() {
				set[i], found = true, true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown opcode %q", strings.TrimSpace(tok))
		}
	}
	return &set, nil
}

// matchRoCE reports whether a RoCE packet passes the filter.
func (f *filter) matchRoCE(src, dst netip.Addr, op rocev2.Opcode, qp uint32) bool {
	if f.hasQP && qp != f.qp {
		return false
	}
	if f.ops != nil && !f.ops[op] {
		return false
	}
	return f.matchHost(src, dst)
}

// matchOther reports whether a non-RoCE frame (SMC CLC over TCP) passes:
// QP and opcode filters exclude it.
func (f *filter) matchOther(src, dst netip.Addr) bool {
	return !f.hasQP && f.ops == nil && f.matchHost(src, dst)
}

func (f *filter) matchHost(src, dst netip.Addr) bool {
	return !f.host.IsValid() || src == f.host || dst == f.host
}
