package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/goroce/goroce/internal/devinfo"
	"github.com/goroce/goroce/internal/rundir"
	"github.com/goroce/goroce/rocev2/device"
)

// The views of running devices, after the flags as with rdma (rdma -j res
// show qp):
//
//	roce-devinfo [-j] [-d ADDR [-udp-port N]] res [show] [qp|cq|mr|pd]
//	roce-devinfo [-j] [-p] [-d ADDR [-udp-port N]] statistic [show]
//
// They list every goroce device that publishes (device.Publish) in the
// run directory, the user's own processes' (and root's, every user's,
// each believed only if that user owns and serves it), or those on -d's
// address (and -udp-port's port, when given).

// view is a parsed view command.
type view struct {
	stat bool   // statistic; else res
	kind string // res: qp, cq, mr, pd; "" the summary
}

// parseView reads the operands after the flags; ok false when there are
// none (roce-devinfo's own layouts).
func parseView(args []string) (v view, ok bool, err error) {
	if len(args) == 0 {
		return view{}, false, nil
	}
	obj, rest := args[0], args[1:]
	switch {
	case isAbbrev(obj, "resource", 3):
	case isAbbrev(obj, "statistic", 4):
		v.stat = true
	default:
		return v, true, fmt.Errorf("unknown object %q: want res (resource) or statistic, as rdma's", obj)
	}
	if len(rest) > 0 && (isAbbrev(rest[0], "show", 2) || isAbbrev(rest[0], "list", 2)) {
		rest = rest[1:]
	}
	if v.stat {
		if len(rest) > 0 {
			return v, true, fmt.Errorf("statistic show: unexpected %q (select a device with -d ADDR before the object)", rest[0])
		}
		return v, true, nil
	}
	if len(rest) > 0 {
		v.kind, rest = rest[0], rest[1:]
		known := false
		for _, k := range devinfo.Views {
			known = known || k == v.kind
		}
		if !known {
			return v, true, fmt.Errorf("res show %q: want one of %s", v.kind, strings.Join(devinfo.Views, ", "))
		}
	}
	if len(rest) > 0 {
		return v, true, fmt.Errorf("res show %s: unexpected %q (filters are not supported; select a device with -d ADDR before the object)", v.kind, rest[0])
	}
	return v, true, nil
}

// isAbbrev reports whether s is word or a prefix of it at least min long,
// as rdma takes "res" for "resource".
func isAbbrev(s, word string, min int) bool {
	return len(s) >= min && strings.HasPrefix(word, s)
}

// runView prints a view of the running devices c selects; its exit status.
func runView(c config, v view, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	match := func(ap netip.AddrPort) bool {
		return (!c.addrSet || ap.Addr().Unmap() == c.addr) && (!c.portExplicit || c.udpPort == 0 || ap.Port() == c.udpPort)
	}
	devs, err := device.ReadRunning(ctx, match, func(err error) {
		fmt.Fprintf(stderr, "roce-devinfo: %s\n", rundir.Printable(err.Error()))
	})
	if err != nil {
		fmt.Fprintln(stderr, "roce-devinfo:", err) // the user's run directory: untrusted, unreadable
		return 1
	}
	if len(devs) == 0 && !c.json {
		what := "no running goroce device publishes"
		if c.addrSet {
			what += " on " + c.addr.String()
		}
		fmt.Fprintf(stderr, "roce-devinfo: %s in %s (goroce programs publish: rc_pingpong, perftest's tools, roce-perf, smcat)\n", what, device.RunDir())
	}
	switch {
	case v.stat:
		err = devinfo.WriteStatistic(stdout, devs, c.json, c.pretty)
	case v.kind == "":
		err = devinfo.WriteResSummary(stdout, devs, c.json)
	default:
		err = devinfo.WriteRes(stdout, v.kind, devs, c.json)
	}
	if err != nil {
		fmt.Fprintln(stderr, "roce-devinfo:", err)
		return 1
	}
	return 0
}
