// Package smcr is SMC-R (RFC 7609, as Linux's net/smc speaks it) over a
// goroce device: Listen and a Dialer whose connections are net.Conns that
// carry their bytes as RDMA WRITEs into the peer's buffer (RMB) when both
// ends speak SMC-R, and over their TCP connection otherwise, transparently.
//
// A connection starts as TCP. Its handshake (CLC: Proposal, Accept,
// Confirm, or a Decline) runs over that TCP connection; on success the
// connection joins a link group with its peer (one RC queue pair, the
// link, confirmed with LLC messages), registers its RMB there and moves
// its data with WRITEs announced by CDC messages; on any failure before
// data flows it falls back to the TCP connection, untouched, and Info says
// why with Linux's decline codes. Close follows Linux's state machine, so
// a Linux AF_SMC peer sees what another Linux would do.
//
// Names, flows and limits are Linux's (smc_clc.c, smc_llc.c, smc_cdc.c,
// smc_close.c); docs/ARCHITECTURE.md describes the goroutines, locks and
// who frees what. The wire formats are in smcr/smcwire, the SMC TCP option
// (a sock_ops BPF program, root only) in smcr/tcpopt.
package smcr
