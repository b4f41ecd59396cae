// Package pingpong is rdma-core's four ping-pong programs on a goroce
// device: ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong and
// ibv_srq_pingpong, with their options, out-of-band exchange and output,
// so that each interoperates with the original on a kernel RoCE device (rxe
// or an RNIC) as well as with itself. cmd/rc_pingpong, cmd/uc_pingpong,
// cmd/ud_pingpong and cmd/srq_pingpong are its mains.
//
// Differences from the originals, all because a goroce device is a UDP
// socket in this process rather than a kernel device:
//
//   - -d takes the IP address to bind the device to (default: the source
//     address of the route to SERVER; 127.0.0.1 for a server), or goroce0,
//     the name the device goes by, for the default; a server listens for
//     its client on that address only (port -p; on every address for an
//     IPv6 link-local device, whose client comes by another), so servers
//     on two addresses of one host do not collide;
//   - -udp-port sets the RoCEv2 UDP port of this device and of the peer
//     (default 4791); -stats prints the device's counters at exit;
//     -timeout bounds every wait for the peer (default: none);
//   - -t and -j (rc_pingpong) fail, as the original does on a device
//     without completion timestamps or device memory; -o, -O and -P are
//     accepted and change nothing (Go memory needs no pinning; -P wants -o
//     or -O, as the original does), and -N posts the same work requests;
//   - a completion in error is told in ibv_wc_status_str's words, as the
//     original does ("Failed status transport retry counter exceeded (12)");
//   - -c checks every byte between two goroce peers (and the original's
//     page markers against any peer), on both sides, and a bad buffer makes
//     the exit status 1; ud_pingpong -c also checks the GRH area of every
//     message received: the IPv4 (or IPv6) header of the packet, from the
//     peer's address to ours.
//
// As with the originals, RoCE needs -g on both sides: -g 1 selects the
// RoCEv2 GID of the device's address (GID index 0 is the link-local one).
package pingpong

import "github.com/goroce/goroce/qp"

// Kind is what one program is: its transport, whether it shares a receive
// queue among many QPs, and the options and defaults of its original.
type Kind struct {
	name    string
	typ     qp.Type
	srq     bool
	defSize int
	opts    []optSpec
}

// The four programs.
var (
	// RC is ibv_rc_pingpong: one RC QP.
	RC = &Kind{name: "rc_pingpong", typ: qp.RC, defSize: 4096, opts: withCommon(
		optPort, optDev, optIBPort, sizeOpt(4096), optMTU, optRxDepth, optIters, optSL,
		optEvents, optGID, optODP, optIODP, optPrefetch, optTS, optChk, optDM, optNewSend)}
	// UC is ibv_uc_pingpong: one UC QP.
	UC = &Kind{name: "uc_pingpong", typ: qp.UC, defSize: 4096, opts: withCommon(
		optPort, optDev, optIBPort, sizeOpt(4096), optMTU, optRxDepth, optIters, optSL,
		optEvents, optGID, optChk)}
	// UD is ibv_ud_pingpong: one UD QP, messages of at most the port's MTU
	// behind the 40-byte GRH area.
	UD = &Kind{name: "ud_pingpong", typ: qp.UD, defSize: 2048, opts: withCommon(
		optPort, optDev, optIBPort, sizeOpt(2048), optRxDepth, optIters, optSL,
		optEvents, optGID, optChk)}
	// SRQ is ibv_srq_pingpong: -q RC QPs sharing one receive queue.
	SRQ = &Kind{name: "srq_pingpong", typ: qp.RC, srq: true, defSize: 4096, opts: withCommon(
		optPort, optDev, optIBPort, sizeOpt(4096), optMTU, optNumQP, optRxDepth, srqIters, optSL,
		optEvents, optGID, optODP, optChk)}
)

// srqIters is srq_pingpong's -n, whose help (with its missing space) says
// per QP: the count is of all QPs' exchanges together, as in the original.
var srqIters = optSpec{'n', "iters", true, false, "-n, --iters=<iters>    number of exchanges per QP(default 1000)"}

// withCommon appends -h and goroce's own options to an original's table.
func withCommon(specs ...optSpec) []optSpec {
	return append(append(specs, optHelp), goroceOpts...)
}

// Name is the program's name, without the original's "ibv_".
func (k *Kind) Name() string { return k.name }

// grhLen is how far the payload sits into the buffer: the GRH area of UD.
func (k *Kind) grhLen() int {
	if k.typ == qp.UD {
		return 40
	}
	return 0
}

// maxQP is srq_pingpong's MAX_QP: it always exchanges that many addresses,
// the ones past -q zero.
const maxQP = 256
