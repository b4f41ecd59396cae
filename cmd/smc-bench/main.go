// Command smc-bench is goroce's CQ-pooling experiment on SMC-R, run the way
// its users ran it: a real redis client (go-redis) against a RESP server
// (redcon), and uperf's request/response profile, between two processes on
// 127.0.0.1 (load generator) and 127.0.0.2 (server), over TCP loopback, over
// SMC-R with the original single-CQ design, and over SMC-R with the CQ
// pool, interleaved per clients value and repeated.
//
//	smc-bench                                # the full table (make bench-smc)
//	smc-bench -quick                         # about a minute
//	smc-bench -clients 1,64 -modes smc-pool -profile out/prof
//	smc-bench -scale 4096                    # connections, memory, leaks
//
// Every SMC-R connection's mode is checked on both sides (smcr.Info): a
// fallback to TCP fails the point. Link groups take at most 32 connections,
// as net.smc.smcr_max_conns_per_lgr did in the original run.
//
// The command starts its server process itself (this program with
// -server) and stops it by its PID when done.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/internal/ctlmsg"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "smc-bench:", err)
		os.Exit(1)
	}
}

// errFailed: the run finished, but some point failed (printed above).
var errFailed = errors.New("some measurements failed (see FAILED above)")

func run(args []string) error {
	fs := flag.NewFlagSet("smc-bench", flag.ContinueOnError)
	clientsFlag := fs.String("clients", "1,2,4,8,16,32,64,128,256,512", "clients values (connections)")
	modesFlag := fs.String("modes", strings.Join(allModes, ","), "modes: tcp, smc-original (single CQ), smc-pool (CQ pool), over UDP; smc-original-shm and smc-pool-shm over the shared-memory link, smc-pool-shm-busy with busy-polled Reads (-busy-poll)")
	wlFlag := fs.String("t", strings.Join(allWorkloads, ","), "workloads: redis-set, redis-get, uperf")
	n := fs.Int64("n", 1000000, "requests per measurement at most (redis-benchmark -n)")
	duration := fs.Duration("duration", 3*time.Second, "time per measurement at most")
	reps := fs.Int("reps", 3, "repetitions; the table shows medians")
	pipe := fs.Int("P", 1, "pipeline depth of the redis workloads (redis-benchmark -P)")
	quick := fs.Bool("quick", false, "a run of about a minute: clients 1,16,64,512, one repetition, 1 s per measurement")
	csvFile := fs.String("csv", "", "write the medians as CSV to this file")
	svgFile := fs.String("svg", "", "write a chart (requests/s against clients, one line per mode) to this SVG file")
	profDir := fs.String("profile", "", "write CPU profiles of both processes for every measurement into this directory")
	deadlines := fs.Bool("deadlines", false, "let go-redis set read and write deadlines per command (its defaults; redis-benchmark sets none)")
	fromCSV := fs.String("from-csv", "", "instead of a run: print the table of this -csv file and draw its -svg chart")
	scale := fs.Int("scale", 0, "instead of the table: hold this many SMC-R connections, report memory per idle connection, close them and check that nothing leaks")
	var set smcSettings
	// Not RoCEv2's 4791: other goroce programs on 127.0.0.1 and 127.0.0.2
	// default to it, and a device that cannot open makes a fallback.
	devPort := fs.Uint("devport", 14791, "UDP port of the smc-pool devices (smc-original, smc-original-shm, smc-pool-shm and smc-pool-shm-busy use the next four)")
	fs.StringVar(&set.Signalling, "signalling", "configured", "how SMC capability is signalled: configured (unprivileged: both sides are told the peer speaks SMC), option (the SMC TCP option; needs CAP_BPF and CAP_NET_ADMIN), auto")
	fs.DurationVar(&set.Linger, "linger", 0, "link group linger (0: smcr's default; -scale uses 1s)")
	fs.DurationVar(&set.BusyPoll, "busy-poll", 50*time.Microsecond, "in smc-pool-shm-busy, how long an SMC-R Read that finds nothing polls the shared-memory link from its own goroutine before it sleeps (smcr.Config.BusyPoll, Linux's busy_read)")
	fs.DurationVar(&set.ShmSpin, "shm-spin", 0, "how long a shared-memory link's receiver looks again before it sleeps, while packets come that close together (shm.Config.Spin; 0: never)")
	server := fs.Bool("server", false, "internal: run as the server process")
	serverProf := fs.String("profile-dir", "", "internal: the server's profile directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *devPort == 0 || *devPort > 65531 {
		return fmt.Errorf("-devport %d out of range", *devPort)
	}
	set.DevPort = uint16(*devPort)
	modes, err := pickList(*modesFlag, allModes, "mode")
	if err != nil {
		return err
	}
	if *server {
		return serverMain(set, modes, *serverProf)
	}
	if *fromCSV != "" {
		return replot(*fromCSV, *svgFile)
	}
	set0 := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set0[f.Name] = true })
	if *scale > 0 {
		if *scale > maxClients {
			return fmt.Errorf("-scale %d: at most %d", *scale, maxClients)
		}
		if !set0["modes"] {
			modes = []string{modeSMCCQP}
		}
		return runScale(set, modes, *scale)
	}
	workloads, err := pickList(*wlFlag, allWorkloads, "workload")
	if err != nil {
		return err
	}
	if *quick {
		if !set0["clients"] {
			*clientsFlag = "1,16,64,512"
		}
		if !set0["reps"] {
			*reps = 1
		}
		if !set0["duration"] {
			*duration = time.Second
		}
	}
	clients, err := parseInts(*clientsFlag)
	if err != nil {
		return err
	}
	if *reps < 1 || *n < 1 || *duration <= 0 || *pipe < 1 || *pipe > 1000 {
		return errors.New("-reps, -n, -duration and -P must be positive (-P at most 1000)")
	}
	if *profDir != "" {
		if err := os.MkdirAll(*profDir, 0o755); err != nil {
			return err
		}
	}
	srv, err := startServer(set, modes, *profDir)
	if err != nil {
		return err
	}
	defer srv.stop()
	b := &bench{set: set, srv: srv, n: *n, duration: *duration, pipe: *pipe, deadlines: *deadlines, profile: *profDir}
	start := time.Now()
	load0 := loadAvg()
	results, runErr := b.runAll(workloads, clients, modes, *reps, func(done, total int, r *result) {
		el := time.Since(start)
		eta := time.Duration(float64(el) / float64(done) * float64(total-done)).Round(time.Second)
		line := fmt.Sprintf("[%3d/%d] rep %d c=%d %-12s %-9s %8.0f rps  p50 %4.0f us  p99 %5.0f us  %5.1f CPU us/req  %4.1f comps/wakeup  ETA %v",
			done, total, r.Rep+1, r.Clients, r.Mode, r.Workload, r.RPS, r.P50, r.P99, r.CPUPerReq(), r.CompsPerWakeup(), eta)
		if r.Err != "" {
			line += "  FAILED: " + r.Err
		}
		fmt.Fprintln(os.Stderr, line)
	})
	ps := summarize(results)
	header := fmt.Sprintf("smc-bench: %d rep(s), at most %v and %d requests per measurement, -P %d; %s; load average before %s, after %s; run took %v",
		*reps, *duration, *n, *pipe, machine(), load0, loadAvg(), time.Since(start).Round(time.Second))
	printTables(os.Stdout, ps, header)
	if *csvFile != "" {
		if err := writeFile(*csvFile, func(f *os.File) error { return writeCSV(f, ps) }); err != nil {
			return err
		}
	}
	if *svgFile != "" {
		title := fmt.Sprintf("goroce SMC-R CQ pooling: requests/s vs clients (%s)", machine())
		if err := writeFile(*svgFile, func(f *os.File) error { return writeSVG(f, ps, title) }); err != nil {
			return err
		}
	}
	if runErr != nil {
		return runErr
	}
	for _, p := range ps {
		if len(p.Errs) > 0 {
			return errFailed
		}
	}
	return nil
}

// serverMain runs the server process; a failure to start is reported on
// the hello line, where the parent waits for it.
func serverMain(set smcSettings, modes []string, profDir string) error {
	err := runServer(set, modes, profDir)
	if err != nil && errors.Is(err, errNoHello) {
		_ = ctlmsg.New(os.Stdout).Write(hello{Err: err.Error()})
	}
	return err
}

func writeFile(name string, f func(*os.File) error) error {
	fh, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := f(fh); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxClients {
			return nil, fmt.Errorf("bad clients value %q (1..%d)", f, maxClients)
		}
		out = append(out, n)
	}
	return out, nil
}

// maxClients bounds a clients value (and -scale).
const maxClients = 8192

func pickList(s string, valid []string, what string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		ok := false
		for _, v := range valid {
			ok = ok || v == f
		}
		if !ok {
			return nil, fmt.Errorf("unknown %s %q (one of %s)", what, f, strings.Join(valid, ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// machine describes the machine the figures come from.
func machine() string {
	model := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if i := strings.IndexByte(l, ':'); i >= 0 {
					model = strings.TrimSpace(l[i+1:])
				}
				break
			}
		}
	}
	kernel := "?"
	if out, err := exec.Command("uname", "-r").Output(); err == nil {
		kernel = strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("%d CPUs (%s), Linux %s, %s", runtime.NumCPU(), model, kernel, runtime.Version())
}

// replot prints the requests/s table of a CSV written by -csv and draws its
// chart.
func replot(csvName, svgName string) error {
	f, err := os.Open(csvName)
	if err != nil {
		return err
	}
	ps, err := readCSV(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", csvName, err)
	}
	printTables(os.Stdout, ps, "from "+csvName)
	if svgName == "" {
		return nil
	}
	title := fmt.Sprintf("goroce SMC-R CQ pooling: requests/s vs clients (%s)", machine())
	return writeFile(svgName, func(f *os.File) error { return writeSVG(f, ps, title) })
}
