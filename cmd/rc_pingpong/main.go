// Command rc_pingpong is rdma-core's ibv_rc_pingpong on a goroce device:
// the same ping-pong with the same options, out-of-band exchange and
// output, so that it interoperates with the original on a kernel RoCE
// device (rxe or an RNIC) as well as with itself. See package
// cmd/internal/pingpong for what differs from the original.
//
//	rc_pingpong [options]            start a server and wait for a client
//	rc_pingpong [options] SERVER     connect to the server at SERVER
package main

import (
	"os"
	"path/filepath"

	"github.com/goroce/goroce/cmd/internal/pingpong"
	"github.com/goroce/goroce/internal/rundir"
)

func main() {
	rundir.ExitOnSignal() // SIGINT and SIGTERM remove the counter socket
	os.Exit(pingpong.Main(pingpong.RC, filepath.Base(os.Args[0]), os.Args[1:], os.Stdout, os.Stderr))
}
