// Command ucmatose is librdmacm's ucmatose (cmatose.c) on a goroce device:
// -c RC connections made with the RDMA CM, -C SENDs of -S bytes each way
// on each, then the server disconnects them all. Same options, output and
// exit status as the original ("return status N"), so that it runs
// against the original on a kernel RoCE device and against itself.
//
//	ucmatose [-b bind_address] [-c connections] [-C message_count] [-S message_size] [-p port]   server
//	ucmatose -s server_address [-b bind_address] [-c ...]                                        client
//
// goroce's device needs an address: the server's is -b (or --iface's), the
// client's -b or the one the route to -s leaves from. goroce's own options
// are cmd/internal/cmtool's.
package main

import "github.com/goroce/goroce/cmd/internal/cmtool"

func main() { cmtool.Main(run) }
