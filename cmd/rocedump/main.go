// Command rocedump prints the RoCEv2 packets of a pcap or pcapng capture,
// one line per packet in the manner of tcpdump, or one JSON object per line.
//
//	rocedump -r FILE [-json] [-stats [-q]] [-tt] [-qp N] [-op NAME|NUM,...] [-host ADDR] [-c COUNT]
//
// Text lines start with the capture time in seconds.microseconds since the
// first frame of the file (-tt: since the Unix epoch), then the IP source
// and destination as addr.port, the opcode, destination QP, PSN, the BTH
// flags that are set (and the P_Key unless it is 0xffff), each extended
// header, the payload length and whether the ICRC verifies ("icrc ok",
// "icrc BAD", or "icrc unverifiable" when the headers it covers were not
// all captured), then the SMC summary if the payload is an SMC message, or
// the MAD's if it is a management datagram to QP 1 ("CM REQ comm 0x...
// sid ... rdma_cm 198.18.0.12:43344 > 198.18.0.11").
//
// With -json each RoCE packet is an object with the keys frame (1-based,
// counting every frame of the file), opcode, opname, se, migreq, padcnt,
// tver, pkey, fecn, becn, dqpn, ackreq, psn, then those of the extended
// headers the opcode carries: reth {va, rkey, len}, aeth {syndrome, msn,
// kind, code}, atomiceth {va, rkey, swap, cmp}, atomicacketh {orig}, immdt,
// ieth, deth {qkey, sqpn}, feth {placement, selectivity}; then payload_len,
// icrc (the trailer as received, read little-endian), icrc_ok (left out
// when unverifiable), what the sender chose outside the RoCE headers: src,
// dst, sport (the UDP source port), ttl (IPv6: the hop limit), ipid and df
// (IPv4) or flowlabel (IPv6),
// smc (SMC messages, if any) and mad (a MAD: its header's fields, type,
// the CM message under cm, the rdma_cm header under rdma_cm). A TCP frame that
// carries SMC CLC messages is an object with the keys frame and smc.
//
// -stats ends the output with a table per destination host and QP: packets,
// bytes (UDP payload, BTH through ICRC), retransmissions (a repeated source,
// opcode, QP and PSN) and NAKs; -q leaves the packet lines out.
//
// Frames that are not RoCEv2 are skipped; a RoCEv2 frame that is truncated
// or malformed is reported on a line of its own ("frame N: malformed RoCE:
// reason", on stderr with -json so that stdout stays JSON) and the dump goes
// on. The exit status is 2 for bad flags, 1 for I/O errors and 0 otherwise.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/goroce/goroce/pcap"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is rocedump with its arguments and output streams, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "rocedump:", err)
		return 2
	}
	in := io.Reader(os.Stdin)
	if cfg.file != "-" {
		f, err := os.Open(cfg.file)
		if err != nil {
			fmt.Fprintln(stderr, "rocedump:", err)
			return 1
		}
		defer f.Close()
		in = f
	}
	r, err := pcap.NewReader(in)
	if err != nil {
		fmt.Fprintf(stderr, "rocedump: %s: %v\n", cfg.file, err)
		return 1
	}
	out := bufio.NewWriter(stdout)
	d := newDumper(cfg, out, stderr)
	err = d.dump(r)
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintf(stderr, "rocedump: %s: %v\n", cfg.file, err)
		return 1
	}
	return 0
}
