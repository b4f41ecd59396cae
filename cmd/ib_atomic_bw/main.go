// Command ib_atomic_bw is perftest's ib_atomic_bw on a goroce device: atomic bandwidth: the client runs FETCH_AND_ADD (or CMP_AND_SWAP) on the server's buffer and reports.
// It takes perftest's options, speaks its TCP exchange byte for byte and
// prints its tables, so that it runs against the original (perftest 6.06's
// protocol, on a kernel rxe or an RNIC) as well as against itself. See
// package cmd/internal/perftest for what differs from the original.
//
//	ib_atomic_bw [options]            start a server and wait for a client
//	ib_atomic_bw [options] SERVER     connect to the server at SERVER
package main

import (
	"os"

	"github.com/goroce/goroce/cmd/internal/perftest"
	"github.com/goroce/goroce/internal/rundir"
)

func main() {
	rundir.ExitOnSignal() // SIGINT and SIGTERM remove the counter socket
	os.Exit(perftest.Main(perftest.AtomicBW, os.Args[1:], os.Stdout, os.Stderr))
}
