// Command udaddy is librdmacm's udaddy on a goroce device: UD endpoints
// found with the RDMA CM's service ID resolution (SIDR), -C datagrams of -S
// bytes from each client endpoint to the server's and back. Same options,
// output and exit status as the original ("return status N"), so that it
// runs against the original on a kernel RoCE device and against itself.
//
//	udaddy [-b bind_address] [-c connections] [-C message_count] [-S message_size]   server
//	udaddy -s server_address [-b bind_address] [-c ...]                             client
//
// The service is rdma_cm port 7174 of the UDP port space (the original's
// -p chooses the port space, not the port). goroce's own options are
// cmd/internal/cmtool's.
package main

import "github.com/goroce/goroce/cmd/internal/cmtool"

func main() { cmtool.Main(run) }
