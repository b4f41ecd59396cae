// Command cq-bench is goroce's CQ-pool experiment: it runs
// request/response SEND traffic between two processes on loopback
// (127.0.0.1 and 127.0.0.2, UDP backend) over N connections (one RC QP pair
// each) with the legacy completion design (one device-wide CQ pair, one
// tasklet-like poller goroutine, wr_id search, every post sent at once) and
// with the pooled one (per-link CQs from the pool, Entry handlers, run to
// completion on the device's receive goroutine with one send per run,
// DIM), next to a TCP loopback baseline with the same shape measured in the
// same run, and prints a table shaped like the seed's (clients, TCP, legacy
// ±% vs TCP, pooled ±% vs TCP). Two more modes say where the difference
// comes from: legacy-rtc (the legacy design run to completion like the
// pooled one) and nodim (the pooled design without DIM).
//
//	cq-bench                         # the full table (make bench-cq)
//	cq-bench -duration 1s -clients 1,64 -shapes small -csv out.csv
//
// The command starts its own server process (itself with -server) and
// stops it when done.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// shape is a request/response size pair.
type shape struct {
	name      string
	req, resp int
}

var shapes = []shape{
	{"small", 64, 64},    // a small key-value request and reply
	{"uperf", 200, 1000}, // the seed's uperf profile
}

func shapeByName(name string) shape {
	for _, s := range shapes {
		if s.name == name {
			return s
		}
	}
	return shape{name: name}
}

func describe(name string) string {
	s := shapeByName(name)
	return fmt.Sprintf("%s (%d B request, %d B response)", s.name, s.req, s.resp)
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cq-bench:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("cq-bench", flag.ContinueOnError)
	duration := fs.Duration("duration", 5*time.Second, "traffic time of each measurement (each mode at each point)")
	clientsFlag := fs.String("clients", "1,2,16,32,64,128,256,512", "connection counts")
	shapesFlag := fs.String("shapes", "small,uperf", "request/response shapes: small (64/64 B), uperf (200/1000 B)")
	csvFile := fs.String("csv", "", "also write the table as CSV to this file")
	noDIM := fs.Bool("nodim", true, "also measure the pooled design with DIM off")
	legacyRTC := fs.Bool("legacy-rtc", true, "also measure the legacy design run to completion (its poller on the receive goroutine, the sends of one run in one system call), as the pooled design runs")
	server := fs.Bool("server", false, "internal: run as the server process")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *server {
		return runServer()
	}
	clients, err := parseInts(*clientsFlag)
	if err != nil {
		return err
	}
	var sel []shape
	for _, name := range strings.Split(*shapesFlag, ",") {
		s := shapeByName(strings.TrimSpace(name))
		if s.req == 0 {
			return fmt.Errorf("unknown shape %q", name)
		}
		sel = append(sel, s)
	}
	modes := []string{"tcp", "legacy"}
	if *legacyRTC {
		modes = append(modes, "legacy-rtc")
	}
	modes = append(modes, "pooled")
	if *noDIM {
		modes = append(modes, "nodim")
	}
	c, stop, err := startServer()
	if err != nil {
		return err
	}
	defer stop()
	start := time.Now()
	rows, err := runAll(c, sel, clients, modes, *duration, func(s string) { fmt.Fprintln(os.Stderr, s) })
	if err != nil {
		return err
	}
	c.send(msg{Kind: "quit"})
	printTable(os.Stdout, rows, duration.String())
	fmt.Printf("total run time %s\n", time.Since(start).Round(100*time.Millisecond))
	if *csvFile != "" {
		f, err := os.Create(*csvFile)
		if err != nil {
			return err
		}
		if err := writeCSV(f, rows); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad connection count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// startServer runs this program as the server process, which prints its
// control address on its first output line, and connects to it. stop ends
// the process (and waits for it).
func startServer() (*ctl, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(exe, "-server")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	kill := func() { cmd.Process.Kill(); cmd.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		kill()
		return nil, nil, fmt.Errorf("server process: %w", err)
	}
	conn, err := net.Dial("tcp", strings.TrimSpace(line))
	if err != nil {
		kill()
		return nil, nil, err
	}
	stop := func() {
		conn.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	return newCtl(conn), stop, nil
}

// runServer listens for the one control connection of its parent.
func runServer() error {
	ln, err := net.Listen("tcp", net.JoinHostPort(serverAddr.String(), "0"))
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	// The parent connects at once; a parent that died never does.
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
	conn, err := ln.Accept()
	ln.Close()
	if err != nil {
		return err
	}
	defer conn.Close()
	err = serve(newCtl(conn))
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
