//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	hostIP    = "198.18.0.1"
	guestIP   = "198.18.0.11"
	prefixLen = 24
	guestMAC  = "52:54:00:12:00:0b"
	// guestGID1 is GID index 1 of the guest's rxe0: ::ffff:198.18.0.11.
	guestGID1 = "0000:0000:0000:0000:0000:ffff:c612:000b"
)

type options struct {
	out, bin, cache, kernelPkg, accel, run string
	smcKernelPkg                           string
	bootTimeout, budget                    time.Duration
	noUpdate, guestOnly, list              bool
	rcOnSMC                                string
	retries, repeat                        int
	guestPrep                              string
	exec                                   string
	peer, peerDev, goroceAddr              string
	goroceAddr6, goroceIface               string
	peerGID                                int
	memMB, cpus                            int
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "out/interop", "directory for captures, logs and the summary (emptied first)")
	flag.StringVar(&o.bin, "bin", "bin", "directory with goroce's programs (rc_pingpong, rocedump)")
	flag.StringVar(&o.cache, "cache", envOr("GOROCE_INTEROP_CACHE", "/var/cache/goroce-interop"), "package and image cache")
	flag.StringVar(&o.kernelPkg, "kernel-pkg", "linux-image-amd64", "Debian kernel package of the guest of the RC cases")
	flag.StringVar(&o.rcOnSMC, "rc-on-smc-guest", "quick", "the RC cases run on the SMC-R guest's kernel (6.12) too, before its SMC-R cases: quick (rc_pingpong's 64 KiB case at path MTU 1024, where rxe's completer stall was seen), all, or none")
	flag.StringVar(&o.smcKernelPkg, "smc-kernel-pkg", "linux-image-6.12-amd64", "Debian kernel package of the guest of the SMC-R cases (stock 6.1's rxe breaks SMC-R)")
	flag.StringVar(&o.accel, "accel", "auto", "QEMU accelerator: auto (KVM if /dev/kvm is usable), kvm or tcg")
	flag.DurationVar(&o.bootTimeout, "boot-timeout", 0, "time for the guest to boot (0: 90s with KVM, 300s with TCG); retried once")
	flag.DurationVar(&o.budget, "budget", 25*time.Minute, "stop starting cases after this long (the rest count as failed), so that a broken goroce cannot hold CI for hours; 0: no limit")
	flag.StringVar(&o.run, "run", "", "run only the cases whose name and direction match this regular expression")
	flag.BoolVar(&o.noUpdate, "no-update", false, "do not run apt-get update (use the package lists there are)")
	flag.BoolVar(&o.guestOnly, "guest-only", false, "boot the guest and run only its own checks (no goroce program)")
	flag.BoolVar(&o.list, "list", false, "list the cases and exit")
	flag.IntVar(&o.retries, "retries", 1, "run a failed case once more (0: never); a case that then passes is FLAKY: it does not fail the run, and the report keeps the first attempt's failure")
	flag.IntVar(&o.repeat, "repeat", 1, "run each selected case this many times (bounded by -budget), without retries; the report counts the failed runs and keeps their files (a passed run's are deleted)")
	flag.StringVar(&o.guestPrep, "guest-prep", "", "a shell command line run in the guest after its setup (for debugging, e.g. enabling dynamic debug)")
	flag.StringVar(&o.exec, "exec", "", "with -guest-only: run this shell command line in the guest after its checks and print its output (for debugging)")
	flag.StringVar(&o.peer, "peer", "", "with -list: the address of a real rxe or RNIC host to print the commands for")
	flag.StringVar(&o.peerDev, "peer-dev", "rxe0", "with -list -peer: that host's RDMA device")
	flag.IntVar(&o.peerGID, "peer-gid", 1, "with -list -peer: that device's GID index of its RoCEv2 IPv4 address (see show_gids)")
	flag.StringVar(&o.goroceAddr, "goroce-addr", "", "with -list -peer: the local address goroce binds (the source address of the route to -peer)")
	flag.StringVar(&o.goroceAddr6, "goroce-addr6", "", "with -list -peer: goroce's IPv6 address for the IPv6 cases (a link-local one with its zone: fe80::1%eth0)")
	flag.StringVar(&o.goroceIface, "goroce-iface", "", "with -list -peer: the interface of goroce's AF_PACKET backend")
	flag.IntVar(&o.memMB, "mem", 1024, "guest memory in MiB")
	flag.IntVar(&o.cpus, "smp", 2, "guest CPUs")
	flag.Parse()
	os.Exit(mainErr(o))
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "interop: "+format+"\n", args...)
}

func mainErr(o options) int {
	start := time.Now()
	var sel *regexp.Regexp
	if o.run != "" {
		var err error
		if sel, err = regexp.Compile(o.run); err != nil {
			logf("-run: %v", err)
			return 2
		}
	}
	var todo []testCase
	if _, ok := rcOnSMCSets[o.rcOnSMC]; !ok {
		logf("-rc-on-smc-guest %q: want quick, all or none", o.rcOnSMC)
		return 2
	}
	for _, c := range allCases(o.rcOnSMC) {
		if sel == nil || sel.MatchString(c.name()+" "+c.direction()+" on "+c.guest.String()) {
			todo = append(todo, c)
		}
	}
	if o.list {
		e := guestEnds
		if o.peer != "" {
			e = endpoints{peerDev: o.peerDev, peerGID: o.peerGID, peerAddr: o.peer, goroceAddr: o.goroceAddr,
				goroceAddr6: o.goroceAddr6, goroceIface: o.goroceIface}
		}
		for i, c := range todo {
			if c.smc != nil {
				listSMC(i+1, &c, e)
				continue
			}
			g, h := c.commands(i+1, e)
			on := ""
			if c.guest == smcGuest {
				on = " (on the SMC-R guest: -smc-kernel-pkg)"
			}
			fmt.Printf("%2d  %s, %s%s\n", i+1, c.name(), c.server, on)
			fmt.Printf("    kernel: %s\n    goroce: bin/%s\n", shellQuote(g), shellQuote(h))
			fmt.Printf("    (NIC MTU %d", c.nicMTU())
			if c.loss > 0 {
				fmt.Printf("; kernel side: tc qdisc replace dev IFACE root netem loss %g%%", c.loss)
			}
			if c.lossIn > 0 {
				fmt.Printf("; and %g%% loss on what it receives", c.lossIn)
			}
			fmt.Printf(")\n")
		}
		return 0
	}
	if os.Geteuid() != 0 {
		logf("must run as root (network namespaces, taps, apt-get)")
		return 2
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer cancel()
	h := &harness{opts: o, ps: newProcs(), curMTU: 1500, start: start}
	defer h.ps.stopAll() // whatever is still running, by PID

	res, err := h.run(ctx, todo)
	h.cleanup()
	wall := time.Since(start)
	if len(res) > 0 || err == nil {
		h.report(os.Stdout, res, wall)
	}
	if err != nil {
		logf("FAILED: %v", err)
		if len(res) == 0 && h.lastConsole != "" {
			fmt.Fprintf(os.Stderr, "--- guest console (last lines) ---\n%s\n---\n", h.lastConsole)
		}
		return 1
	}
	for _, r := range res {
		if !r.pass {
			return 1
		}
	}
	return 0
}

type harness struct {
	start       time.Time
	opts        options
	ps          *procs
	ns          *netns
	vm          *vm
	img         *image
	out         string
	sockDir     string
	kvm         bool
	curMTU      int
	curLoss     float64
	curLossIn   float64
	curMADLoss  bool
	curIPv6     bool // IPv6 on br0 and the guest's eth0 (afcases.go)
	boots       int
	caseBase    int // cases of earlier guests, for the numbering
	lastConsole string
	guestInfo   string
	smcguest    string      // the guest SMC program, built for this run
	initrd      string      // the image's initramfs with smcguest added
	guests      []*guestRun // the guests booted so far, with their times
	guest       *guestRun   // the one running now
	// smcTestlinkDefault is net.smc.smcr_testlink_time as the SMC guest
	// booted (restored after the case that lowers it).
	smcTestlinkDefault string
}

// run prepares the host, then runs each guest's cases: the guests one
// after the other (one QEMU at a time), each stopped before the next boots.
func (h *harness) run(ctx context.Context, todo []testCase) ([]*result, error) {
	if err := h.prepareHost(ctx, todo); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(h.opts.out); err != nil {
		return nil, err
	}
	h.out = h.opts.out
	if err := os.MkdirAll(filepath.Join(h.out, "cases"), 0o755); err != nil {
		return nil, err
	}
	var err error
	if h.sockDir, err = os.MkdirTemp("", "goroce-interop-"); err != nil {
		return nil, err
	}
	if h.smcguest, err = buildSMCGuest(ctx, h.out); err != nil {
		return nil, err
	}
	removeStaleNetns(ctx, logf)
	h.ns, err = createNetns(ctx, fmt.Sprintf("%s%d", nsPrefix, os.Getpid()), hostIP, prefixLen, []string{"tap0"}, 1500)
	if err != nil {
		return nil, err
	}
	logf("network namespace %s: br0 %s/%d, tap0", h.ns.name, hostIP, prefixLen)
	var res []*result
	for _, g := range h.guestRuns(todo) {
		h.guests = append(h.guests, g)
		r, err := h.runGuest(ctx, g)
		res = append(res, r...)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// prepareHost checks for the host's programs and installs the missing
// ones with apt-get (qemu-system-x86, tcpdump), and for goroce's programs
// that the cases run.
func (h *harness) prepareHost(ctx context.Context, todo []testCase) error {
	need := map[string]string{"qemu-system-x86_64": "qemu-system-x86", "tcpdump": "tcpdump", "dpkg-deb": "dpkg", "xz": "xz-utils"}
	var missing []string
	for prog, pkg := range need {
		if _, err := exec.LookPath(prog); err != nil {
			missing = append(missing, pkg)
		}
	}
	for _, prog := range []string{"ip", "apt-get", "apt-cache"} {
		if _, err := exec.LookPath(prog); err != nil {
			return fmt.Errorf("this host has no %s", prog)
		}
	}
	if len(missing) > 0 {
		logf("installing %s", strings.Join(missing, " "))
		if !h.opts.noUpdate {
			runOut(ctx, "apt-get", "update")
			h.opts.noUpdate = true // done: the image step need not again
		}
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "-q", "--no-install-recommends"}, missing...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get install %s: %v\n%s", strings.Join(missing, " "), err, tail(string(out), 20))
		}
	}
	progs := []string{"rocedump"}
	if !h.opts.guestOnly {
		seen := map[string]bool{}
		for _, c := range todo {
			if c.tool != nil && !seen[c.tool.goroceCmd] {
				seen[c.tool.goroceCmd] = true
				progs = append(progs, c.tool.goroceCmd)
			}
		}
	}
	for _, p := range progs {
		if _, err := os.Stat(filepath.Join(h.opts.bin, p)); err != nil {
			return fmt.Errorf("%s/%s is missing: build it first (go build -o %s/ ./cmd/%s)", h.opts.bin, p, h.opts.bin, p)
		}
	}
	ok, why := kvmUsable()
	switch h.opts.accel {
	case "auto":
		h.kvm = ok
		if !ok {
			logf("TCG, not KVM: %s", why)
		}
	case "kvm":
		if !ok {
			return fmt.Errorf("-accel kvm: %s", why)
		}
		h.kvm = true
	case "tcg":
	default:
		return fmt.Errorf("-accel %s: want auto, kvm or tcg", h.opts.accel)
	}
	return nil
}

var exitRE = map[string]*regexp.Regexp{}

// exitStatus finds "PREFIXn" in out; -1 when absent.
func exitStatus(out, prefix string) int {
	re, ok := exitRE[prefix]
	if !ok {
		re = regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(prefix) + `(-?\d+)\s*$`)
		exitRE[prefix] = re
	}
	m := re.FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func (h *harness) cleanup() {
	ctx := context.Background()
	if h.vm != nil {
		if h.lastConsole == "" {
			h.lastConsole = h.vm.consoleTail(40)
		}
		h.vm.stop()
	}
	h.ps.stopAll()
	if h.ns != nil {
		if err := h.ns.delete(ctx); err != nil {
			logf("%v", err)
		}
	}
	if h.sockDir != "" {
		os.RemoveAll(h.sockDir)
	}
}

// shellQuote quotes args for the guest's shell.
func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/=,%") == "" {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
