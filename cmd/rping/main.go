// Command rping is librdmacm's rping on a goroce device: the same RDMA ping
// over a connection made with the RDMA CM, with the same options, output
// and exit status, so that it runs against the original on a kernel RoCE
// device (rxe, an RNIC) as well as against itself.
//
//	rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]
//	rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]
//
// The client sends the address and rkey of a buffer of -S bytes holding
// "rdma-ping-N: " and letters; the server RDMA READs it, tells the client
// to go on, gets the address of the client's sink buffer and RDMA WRITEs
// the data back there; -V checks it, -v prints it. goroce's device needs
// an address of its own: the server's is -a, the client's -I or the one
// the route to -a leaves from. goroce's own options (--backend, --iface,
// --udp-port, --roce-port, --timeout, --stats) are cmd/internal/cmtool's.
package main

import "github.com/goroce/goroce/cmd/internal/cmtool"

func main() { cmtool.Main(run) }
