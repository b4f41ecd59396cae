// Command interop runs rdma-core's own programs on a Linux kernel rxe
// device against goroce's versions of them: `make interop`.
//
// It builds a small bootable image from Debian's packages (kernel with
// rdma_rxe, busybox, rdma-core's userland), boots it under QEMU (KVM when
// /dev/kvm is usable, TCG otherwise) on a bridge in a network namespace of
// its own, and runs each case of cases() with one side in the guest and
// goroce's program on the bridge's address, capturing every case on the
// bridge and checking the capture with rocedump: every RoCE packet, the
// kernel's and goroce's, has a valid ICRC, and loss-free cases have no
// PSN-sequence NAKs. It prints a table and exits 1 on any failure.
//
// Must run as root (namespaces, taps, apt-get). Everything it starts is
// stopped by PID at the end, on failure and on Ctrl-C; the namespace is
// deleted. See README.md beside this file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
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
	bootTimeout, budget                    time.Duration
	noUpdate, guestOnly, list              bool
	retries, repeat                        int
	guestPrep                              string
	exec                                   string
	peer, peerDev, goroceAddr              string
	peerGID                                int
	memMB, cpus                            int
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "out/interop", "directory for captures, logs and the summary (emptied first)")
	flag.StringVar(&o.bin, "bin", "bin", "directory with goroce's programs (rc_pingpong, rocedump)")
	flag.StringVar(&o.cache, "cache", envOr("GOROCE_INTEROP_CACHE", "/var/cache/goroce-interop"), "package and image cache")
	flag.StringVar(&o.kernelPkg, "kernel-pkg", "linux-image-amd64", "Debian kernel package of the guest")
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
	for _, c := range cases() {
		if sel == nil || sel.MatchString(c.name()+" "+c.direction()) {
			todo = append(todo, c)
		}
	}
	if o.list {
		e := guestEnds
		if o.peer != "" {
			e = endpoints{peerDev: o.peerDev, peerGID: o.peerGID, peerAddr: o.peer, goroceAddr: o.goroceAddr}
		}
		for i, c := range todo {
			g, h := c.commands(i+1, e)
			fmt.Printf("%2d  %s, %s\n", i+1, c.name(), c.server)
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
	boots       int
	caseBase    int // cases of earlier guests, for the numbering
	lastConsole string
	guestInfo   string
}

func (h *harness) run(ctx context.Context, todo []testCase) ([]*result, error) {
	if err := h.prepareHost(ctx); err != nil {
		return nil, err
	}
	img, err := buildImage(ctx, imageConfig{cacheDir: h.opts.cache, kernelPkg: h.opts.kernelPkg, update: !h.opts.noUpdate, logf: logf})
	if err != nil {
		return nil, fmt.Errorf("building the guest image: %w", err)
	}
	h.img = img
	if err := os.RemoveAll(h.opts.out); err != nil {
		return nil, err
	}
	h.out = h.opts.out
	if err := os.MkdirAll(filepath.Join(h.out, "cases"), 0o755); err != nil {
		return nil, err
	}
	if h.sockDir, err = os.MkdirTemp("", "goroce-interop-"); err != nil {
		return nil, err
	}
	if m, err := os.ReadFile(filepath.Join(img.dir, "manifest.txt")); err == nil {
		os.WriteFile(filepath.Join(h.out, "image-manifest.txt"), m, 0o644)
	}

	removeStaleNetns(ctx, logf)
	h.ns, err = createNetns(ctx, fmt.Sprintf("%s%d", nsPrefix, os.Getpid()), hostIP, prefixLen, []string{"tap0"}, 1500)
	if err != nil {
		return nil, err
	}
	logf("network namespace %s: br0 %s/%d, tap0", h.ns.name, hostIP, prefixLen)

	if err := h.boot(ctx); err != nil {
		return nil, err
	}
	var res []*result
	lb := h.guestLoopback(ctx)
	res = append(res, lb)
	if !lb.pass {
		return res, fmt.Errorf("the guest's own rc_pingpong over rxe loopback failed: the guest is not usable")
	}
	if h.opts.guestOnly {
		if h.opts.exec != "" {
			out, rc, err := h.vm.run(ctx, 10*time.Minute, h.opts.exec)
			fmt.Printf("%s\n(guest exit status %d)\n", out, rc)
			if err != nil {
				return res, err
			}
		}
		return res, nil
	}
	return h.runCases(ctx, todo, res)
}

// prepareHost checks for the host's programs and installs the missing
// ones with apt-get (qemu-system-x86, tcpdump).
func (h *harness) prepareHost(ctx context.Context) error {
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
		progs = append(progs, rcPingpong.goroceCmd)
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

// boot boots the guest (retrying once on a boot time-out) and sets it up.
func (h *harness) boot(ctx context.Context) error {
	bt := h.opts.bootTimeout
	if bt == 0 {
		bt = 90 * time.Second
		if !h.kvm {
			bt = 300 * time.Second
		}
	}
	accel := "TCG"
	if h.kvm {
		accel = "KVM"
	}
	cfg := vmConfig{name: "guest", kernel: h.img.kernel, initrd: h.img.initrd, dir: h.out, sockDir: h.sockDir,
		tap: "tap0", mac: guestMAC, kvm: h.kvm, memMB: h.opts.memMB, cpus: h.opts.cpus, bootTimeout: bt}
	if err := h.ns.setMTU(ctx, 1500); err != nil {
		return err
	}
	h.curMTU, h.curLoss, h.curLossIn = 1500, 0, 0
	var err error
	for try := 1; try <= 2; try++ {
		h.boots++
		cfg.boot = h.boots
		logf("booting the guest (%s, kernel %s, try %d, console %s)", accel, h.img.kernelRelease, try,
			filepath.Join(h.out, fmt.Sprintf("guest-console.%d.log", h.boots)))
		h.vm, err = bootVM(ctx, h.ns, h.ps, cfg)
		if err == nil {
			logf("guest up in %.1fs", h.vm.bootDur.Seconds())
			break
		}
		h.lastConsole = tail(readFileString(filepath.Join(h.out, fmt.Sprintf("guest-console.%d.log", h.boots))), 40)
		if !errors.Is(err, errBootTimeout) || try == 2 {
			return fmt.Errorf("booting the guest: %w", err)
		}
		if h.kvm && h.opts.accel == "auto" {
			h.kvm, cfg.kvm, cfg.bootTimeout = false, false, 300*time.Second
			accel = "TCG"
			logf("%v: retrying under TCG", err)
			continue
		}
		logf("%v: retrying", err)
	}
	if err := h.guestSetup(ctx); err != nil {
		h.lastConsole = h.vm.consoleTail(40)
		return fmt.Errorf("setting the guest up: %w", err)
	}
	if h.opts.guestPrep != "" {
		out, err := h.vm.mustRun(ctx, time.Minute, h.opts.guestPrep)
		if err != nil {
			return fmt.Errorf("-guest-prep: %w", err)
		}
		logf("-guest-prep: %s", strings.TrimSpace(out))
	}
	return nil
}

// guestSetup gives the guest its address and its rxe device and checks
// the device is what the cases expect.
func (h *harness) guestSetup(ctx context.Context) error {
	v := h.vm
	steps := []string{
		fmt.Sprintf("ip link set eth0 mtu 1500 && ip addr add %s/%d dev eth0 && ip link set eth0 up", guestIP, prefixLen),
		"rdma link add rxe0 type rxe netdev eth0 && rdma link show",
		"ibv_devices",
		"ibv_devinfo -d rxe0",
		fmt.Sprintf(`n=0; while [ "$(cat /sys/class/infiniband/rxe0/ports/1/gids/1)" != "%s" ] && [ $n -lt 50 ]; do usleep 100000; n=$((n+1)); done; cat /sys/class/infiniband/rxe0/ports/1/gids/1; [ "$(cat /sys/class/infiniband/rxe0/ports/1/gids/1)" = "%s" ]`, guestGID1, guestGID1),
		fmt.Sprintf("ping -c 1 -W 5 %s", hostIP),
	}
	var info strings.Builder
	for _, s := range steps {
		out, err := v.mustRun(ctx, 30*time.Second, s)
		if err != nil {
			return err
		}
		fmt.Fprintf(&info, "# %s\n%s\n", s, out)
	}
	uname, _ := v.mustRun(ctx, 10*time.Second, "uname -a; ibv_rc_pingpong --help 2>&1 | head -1; cat /sys/class/infiniband/rxe0/ports/1/gids/1")
	fmt.Fprintf(&info, "# uname -a\n%s\n", uname)
	h.guestInfo = info.String()
	os.WriteFile(filepath.Join(h.out, "guest-setup.txt"), []byte(h.guestInfo), 0o644)
	return nil
}

// guestLoopback runs ibv_rc_pingpong against itself in the guest over rxe:
// the guest works before goroce is involved.
func (h *harness) guestLoopback(ctx context.Context) *result {
	r := &result{name: "rc_pingpong s=4096 m=1024 n=1000", dir: "rxe srv ← rxe cli (guest loopback)", start: time.Now(), iters: 1000}
	cmd := "bgstart lb timeout 60 ibv_rc_pingpong -d rxe0 -g 1 -s 4096 -n 1000 -p 18000 >/dev/null; " +
		"waitlisten 18000 100 && timeout 60 ibv_rc_pingpong -d rxe0 -g 1 -s 4096 -n 1000 -p 18000 " + guestIP + "; echo \"CLIENT-EXIT $?\"; " +
		"bgreap lb 100"
	before, _ := h.rxeCounters(ctx)
	out, _, err := h.vm.run(ctx, 90*time.Second, cmd)
	r.dur = time.Since(r.start)
	if after, cerr := h.rxeCounters(ctx); cerr == nil && before != nil {
		r.counters = counterDelta(before, after)
	}
	client, server, _ := strings.Cut(out, "CLIENT-EXIT ")
	r.goroceOut, r.guestOut = client, server
	r.goroce, r.guest = parsePingpong(client), parsePingpong(server)
	r.goroceRC = exitStatus(out, "CLIENT-EXIT ")
	r.guestRC = exitStatus(out, "GOROCE-EXIT ")
	switch {
	case err != nil:
		r.fail("%v", err)
	case r.goroceRC != 0 || r.guestRC != 0:
		r.fail("exit status client %d, server %d", r.goroceRC, r.guestRC)
	case !r.guest.ok || !r.goroce.ok || r.guest.iters != r.iters || r.goroce.iters != r.iters:
		r.fail("no complete result lines")
	}
	r.pass = len(r.reasons) == 0
	os.WriteFile(filepath.Join(h.out, "guest-loopback.txt"), []byte(out), 0o644)
	return r
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

// setEnv sets the NIC MTU and the guest's loss for a case.
func (h *harness) setEnv(ctx context.Context, c *testCase) error {
	if mtu := c.nicMTU(); mtu != h.curMTU {
		guest := fmt.Sprintf("ip link set eth0 mtu %d", mtu)
		if mtu > h.curMTU {
			if err := h.ns.setMTU(ctx, mtu); err != nil {
				return err
			}
			if _, err := h.vm.mustRun(ctx, 10*time.Second, guest); err != nil {
				return err
			}
		} else {
			if _, err := h.vm.mustRun(ctx, 10*time.Second, guest); err != nil {
				return err
			}
			if err := h.ns.setMTU(ctx, mtu); err != nil {
				return err
			}
		}
		h.curMTU = mtu
		out, err := h.vm.mustRun(ctx, 10*time.Second, "ibv_devinfo -d rxe0 | grep -E 'max_mtu|active_mtu'")
		if err != nil {
			return err
		}
		if !strings.Contains(out, fmt.Sprintf("active_mtu:\t\t%d (", c.mtu)) {
			return fmt.Errorf("guest NIC MTU %d gives rxe0 %s, not active MTU %d", mtu, strings.Join(strings.Fields(out), " "), c.mtu)
		}
	}
	if c.loss != h.curLoss {
		cmd := "tc qdisc del dev eth0 root"
		if c.loss > 0 {
			cmd = fmt.Sprintf("tc qdisc replace dev eth0 root netem loss %g%%", c.loss)
		}
		if _, err := h.vm.mustRun(ctx, 10*time.Second, cmd); err != nil {
			return err
		}
		h.curLoss = c.loss
	}
	if c.lossIn != h.curLossIn {
		var cmd string
		switch {
		case c.lossIn == 0:
			cmd = "tc qdisc del dev eth0 ingress && tc qdisc del dev ifb0 root"
		case h.curLossIn == 0:
			// Loading ifb made ifb0 already (numifbs=2).
			cmd = "{ [ -e /sys/class/net/ifb0 ] || ip link add ifb0 type ifb; } && ip link set ifb0 mtu 9000 up && tc qdisc add dev eth0 handle ffff: ingress && " +
				"tc filter add dev eth0 parent ffff: matchall action mirred egress redirect dev ifb0 && " +
				fmt.Sprintf("tc qdisc add dev ifb0 root netem loss %g%%", c.lossIn)
		default:
			cmd = fmt.Sprintf("tc qdisc replace dev ifb0 root netem loss %g%%", c.lossIn)
		}
		if _, err := h.vm.mustRun(ctx, 10*time.Second, cmd); err != nil {
			return err
		}
		h.curLossIn = c.lossIn
	}
	return nil
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

// report prints the table and, for each failure, what the programs said.
func (h *harness) report(w io.Writer, res []*result, wall time.Duration) {
	var sb strings.Builder
	accel := "TCG"
	if h.kvm {
		accel = "KVM"
	}
	kernel := ""
	if h.img != nil {
		kernel = h.img.kernelRelease
	}
	fmt.Fprintf(&sb, "goroce interop: guest kernel %s (rdma_rxe) under QEMU/%s; goroce on %s\n\n", kernel, accel, hostIP)
	tw := tabwriter.NewWriter(&sb, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tcase\tdirection\tresult\titers\trxe Mbit/s\trxe µs/iter\tgoroce Mbit/s\tgoroce µs/iter\tRoCE pkts rxe/goroce\tretrans\tPSN NAKs\ttime")
	pass, fail, flaky := 0, 0, 0
	for i, r := range res {
		if r.pass {
			pass++
		} else {
			fail++
		}
		if r.pass && r.firstTry != nil {
			flaky++
		}
		pk := "-"
		if r.cap != nil {
			pk = fmt.Sprintf("%d/%d", r.cap.bySrc[guestIP], r.cap.bySrc[hostIP])
		}
		retx, naks := "-", "-"
		if r.cap != nil {
			retx, naks = strconv.Itoa(r.cap.retrans), strconv.Itoa(r.cap.psnNAKs)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1fs\n", i, r.name, r.dir, r.verdict(), itersCol(r),
			num(r.guest.ok, r.guest.mbits), num(r.guest.ok, r.guest.usecIter), num(r.goroce.ok, r.goroce.mbits), num(r.goroce.ok, r.goroce.usecIter),
			pk, retx, naks, r.dur.Seconds())
	}
	tw.Flush()
	fmt.Fprintf(&sb, "\n%d passed, %d failed\n", pass, fail)
	if flaky > 0 {
		fmt.Fprintf(&sb, "(%d of the passed are FLAKY: failed once, passed when run again; see below)\n", flaky)
	}
	garbled := 0
	if h.vm != nil {
		garbled = h.vm.garbled
	}
	fmt.Fprintf(&sb, "wall time %.0fs (guest boots: %d, job lines resent: %d); captures and outputs in %s\n", wall.Seconds(), h.boots, garbled, h.out)
	if len(res) > 0 && strings.Contains(res[0].dir, "loopback") {
		fmt.Fprintf(&sb, "(row 0 is the guest's own check: both programs are rdma-core's on rxe0; its 'goroce' columns are the client's)\n")
	}
	for _, r := range res {
		if r.raced {
			fmt.Fprintf(&sb, "(PASS*: lost to rc_pingpong's end race, not to the transport: see the note below and conformance/interop/README.md)\n")
			break
		}
	}
	fmt.Fprintf(&sb, "(iters: rxe/goroce when they differ; retrans and PSN NAKs: rocedump -stats of the case's capture, both directions)\n")
	for i, r := range res {
		if r.pass && len(r.notes) == 0 && i > 0 && r.firstTry == nil {
			continue
		}
		fmt.Fprintf(&sb, "\n--- #%d %s, %s: %s\n", i, r.name, r.dir, r.verdict())
		if f := r.firstTry; f != nil {
			fmt.Fprintf(&sb, "  first attempt: FAIL (%.1fs): %s\n", f.dur.Seconds(), strings.Join(f.reasons, "; "))
			if len(f.counters) > 0 {
				fmt.Fprintf(&sb, "    rxe0 counters: %s\n", formatCounters(f.counters))
			}
			fmt.Fprintf(&sb, "    files: %s.*\n", f.files)
			fmt.Fprintf(&sb, "    rxe side, exit %d:\n%s\n", f.guestRC, indent(indent(tail(f.guestOut, 6))))
			fmt.Fprintf(&sb, "    goroce side, exit %d:\n%s\n", f.goroceRC, indent(indent(tail(f.goroceOut, 6))))
		}
		for _, x := range r.reasons {
			fmt.Fprintf(&sb, "  failure: %s\n", x)
		}
		for _, x := range r.notes {
			fmt.Fprintf(&sb, "  note: %s\n", x)
		}
		if len(r.counters) > 0 {
			fmt.Fprintf(&sb, "  rxe0 counters: %s\n", formatCounters(r.counters))
		}
		if r.pass {
			continue
		}
		if r.files != "" {
			fmt.Fprintf(&sb, "  files: %s.*\n", r.files)
		}
		fmt.Fprintf(&sb, "  rxe side (%s), exit %d:\n%s\n", "guest", r.guestRC, indent(tail(r.guestOut, 15)))
		fmt.Fprintf(&sb, "  goroce side, exit %d:\n%s\n", r.goroceRC, indent(tail(r.goroceOut, 15)))
		if r.cap != nil {
			fmt.Fprintf(&sb, "  rocedump -stats:\n%s\n", indent(r.cap.stats))
		}
	}
	if fail > 0 && h.lastConsole != "" {
		fmt.Fprintf(&sb, "\n--- guest console (last lines) ---\n%s\n", h.lastConsole)
	}
	io.WriteString(w, sb.String())
	if h.out != "" {
		os.WriteFile(filepath.Join(h.out, "summary.txt"), []byte(sb.String()), 0o644)
	}
}

func itersCol(r *result) string {
	switch {
	case r.guest.ok && r.goroce.ok && r.guest.iters == r.goroce.iters:
		return strconv.Itoa(r.guest.iters)
	case r.guest.ok || r.goroce.ok:
		side := func(p perf) string {
			if !p.ok {
				return "-"
			}
			return strconv.Itoa(p.iters)
		}
		return side(r.guest) + "/" + side(r.goroce)
	}
	return fmt.Sprintf("-/%d", r.iters)
}

func num(ok bool, f float64) string {
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(f, 'f', 2, 64)
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "    (nothing)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
