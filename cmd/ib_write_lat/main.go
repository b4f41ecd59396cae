// Command ib_write_lat is perftest's ib_write_lat on a goroce device: RDMA WRITE latency: a ping-pong of WRITEs, each side polling its buffer for the peer's; both sides report.
// It takes perftest's options, speaks its TCP exchange byte for byte and
// prints its tables, so that it runs against the original (perftest 6.06's
// protocol, on a kernel rxe or an RNIC) as well as against itself. See
// package cmd/internal/perftest for what differs from the original.
//
//	ib_write_lat [options]            start a server and wait for a client
//	ib_write_lat [options] SERVER     connect to the server at SERVER
package main

import (
	"os"

	"github.com/goroce/goroce/cmd/internal/perftest"
	"github.com/goroce/goroce/internal/rundir"
)

func main() {
	rundir.ExitOnSignal() // SIGINT and SIGTERM remove the counter socket
	os.Exit(perftest.Main(perftest.WriteLat, os.Args[1:], os.Stdout, os.Stderr))
}
