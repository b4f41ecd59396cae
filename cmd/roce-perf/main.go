// Command roce-perf measures goroce between two processes the way perftest
// (ib_write_bw, ib_send_bw, ib_read_bw, ib_send_lat) measures an RDMA
// device, and in the same run measures a raw-UDP baseline between the same
// two processes and addresses, so that what the RDMA layer costs shows as
// a ratio.
//
//	server: roce-perf -d 127.0.0.1
//	client: roce-perf -d 127.0.0.2 [-t write|send|read | -lat | -all | -demo] [-s SIZE] [-n ITERS | -D SECONDS] 127.0.0.1
//
// Each process opens a goroce device on its address (UDP port 4791); the
// two talk over a TCP control connection (port 18515, -p). The client
// chooses the tests and the server follows, then exits. Each test is
// bounded: -n iterations or -D seconds (3 by default), and -timeout on top
// for every control message.
//
// Bandwidth tests keep -q work requests of -s bytes (default 65536)
// outstanding, every -Q'th signaled, and report perftest's table (MB is
// 2^20 bytes) and Gbit/s. The latency test is a SEND ping-pong of 64 bytes;
// it reports one-way times (half the round trip) in microseconds: minimum,
// maximum, median (t_typical), mean, deviation, 99th and 99.9th
// percentiles.
//
// The raw UDP baseline runs after each test on another pair of sockets
// between the same addresses, with goroce's batching (sendmmsg/recvmmsg of
// 64, GSO and GRO when goroce's backend uses them): datagrams of the path
// MTU under a window of 128 packets acknowledged every 64 for bandwidth,
// and a 64-byte ping-pong for latency. The tables of both are followed by
// the ratio goroce/raw, and the output ends with one summary line per test:
//
//	write 65536B: goroce 8.10 Gbit/s, raw UDP 9.50 Gbit/s, ratio 0.85
//
// -demo runs every RC operation (SEND, SEND_WITH_IMM, SEND_WITH_INV,
// RDMA_WRITE, RDMA_WRITE_WITH_IMM, RDMA_READ, ATOMIC_CMP_AND_SWP,
// ATOMIC_FETCH_AND_ADD) a few times with data verification on both sides.
// -capture FILE records every packet the device sends and receives as
// pcapng (through pcap.Tap); read it with rocedump or Wireshark. -json
// prints the results as one JSON object.
//
// The exit status is 0 on success, 1 when a test fails (an error
// completion, a verification, a timeout), 2 for bad flags, and 128 plus
// the signal's number after SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/goroce/goroce/internal/rundir"
)

func main() {
	// SIGINT or SIGTERM ends the run (the device closes, removing its
	// counter socket, and the capture is completed); a second one exits at
	// once.
	ctx, status := rundir.NotifyContext(context.Background())
	os.Exit(status(run(ctx, os.Args[1:], os.Stdout, os.Stderr)))
}

// run is roce-perf with its arguments and output streams, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "roce-perf:", err)
		return 2
	}
	if err := runConfig(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "roce-perf:", err)
		return 1
	}
	return 0
}

// runConfig opens the device and runs the server or the client.
func runConfig(ctx context.Context, cfg *config, stdout, stderr io.Writer) error {
	if cfg.cpuprof != "" {
		f, err := os.Create(cfg.cpuprof)
		if err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	n, err := openNode(cfg.backend, cfg.local, cfg.rocePort, cfg.capture)
	if err != nil {
		return err
	}
	if cfg.isServer() {
		err = runServer(ctx, cfg, n, stdout, stderr)
	} else {
		err = runClient(ctx, cfg, n, stdout)
	}
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("stopped by a signal: %w", err)
	}
	if cerr := n.close(); err == nil {
		err = cerr
	}
	return err
}
