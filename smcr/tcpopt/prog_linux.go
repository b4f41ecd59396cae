package tcpopt

// The two BPF programs, written with cilium/ebpf's asm package.
//
// Rules the verifier of this kernel generation enforces, and how the code
// keeps them: stack stores must be aligned to their size (every stack
// slot below is; the option bytes go to the stack as one u64); a program
// may not read uninitialised stack (the buffers handed to bpf_load_hdr_opt
// and bpf_store_hdr_opt are written first); some context fields only allow
// loads of their full width (skb_tcp_flags, read as a u32; pointer-sized
// fields would need u64 loads, and the programs read none); the context
// is read-only (the programs change socket state only through helpers);
// and sock_ops and cgroup sock programs must return 1.

import (
	"encoding/binary"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// Offsets into struct bpf_sock_ops, the context of a sock_ops program.
// The struct is uapi (include/uapi/linux/bpf.h), so these never move;
// TestSockOpsOffsets checks them against the running kernel's BTF anyway.
const (
	offOp          = 0   // __u32 op
	offArgs        = 4   // __u32 args[4] (STATE_CB: old, new state)
	offLocalPort   = 68  // __u32 local_port, host byte order
	offCbFlags     = 84  // __u32 bpf_sock_ops_cb_flags
	offSkbTCPFlags = 212 // __u32 skb_tcp_flags
	sockOpsSize    = 224 // sizeof(struct bpf_sock_ops)
)

// The sock_ops callbacks (enum in uapi bpf.h) the program handles.
const (
	opTCPConnect         = 3  // active socket, before its SYN is built
	opActiveEstablished  = 4  // active socket, SYN-ACK processed; skb is the SYN-ACK
	opPassiveEstablished = 5  // accepted child, final ACK processed
	opState              = 10 // state change: args[0] old, args[1] new state
	opTCPListen          = 11 // listen() done
	opHdrOptLen          = 14 // reserve option space in an outgoing segment
	opWriteHdrOpt        = 15 // write the option into the reserved space
)

const (
	// cbWriteHdrOpt is BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG: while it is set
	// on a socket the kernel calls opHdrOptLen and opWriteHdrOpt for every
	// segment it sends, so it is cleared once the handshake is over.
	cbWriteHdrOpt = 1 << 6
	// cbState is BPF_SOCK_OPS_STATE_CB_FLAG: the kernel calls opState on
	// every state change of the socket (a handful per connection).
	cbState = 1 << 2
	// tcpClose is TCP_CLOSE, the state every TCP socket ends in.
	tcpClose = 7
	// bpfNoExist is BPF_NOEXIST for bpf_map_update_elem.
	bpfNoExist = 1
	// loadHdrOptSYN is BPF_LOAD_HDR_OPT_TCP_SYN: bpf_load_hdr_opt searches
	// the peer's SYN instead of the current skb.
	loadHdrOptSYN = 1
	tcpFlagSYN    = 0x02
	tcpFlagACK    = 0x10
	solTCP        = 6  // SOL_TCP
	tcpSaveSYN    = 27 // TCP_SAVE_SYN
)

// Bits of sockState.State, the value of the socks map.
const (
	stOptedIn  = 1 << 0 // put there by Control
	stListener = 1 << 1 // TCP_LISTEN_CB ran; Port is counted in the ports map
	stDone     = 1 << 2 // the handshake is over and stPeer is final
	stPeer     = 1 << 3 // the peer's SYN-ACK (or SYN) carried the option
	stPassive  = 1 << 4 // accepted connection: entered by the program
)

// sockState is the value of the socks map, keyed by socket cookie.
type sockState struct {
	State uint32
	Port  uint32 // listeners: the local port counted in the ports map
}

const (
	// maxSockets bounds the socks map: one entry per opted-in socket
	// that is still open. A full map refuses new entries; those sockets
	// then do not signal (see Control).
	maxSockets = 1 << 16
	// numPorts is the size of the ports map, one counter per TCP port.
	numPorts = 1 << 16
)

// Stack slots of the programs, each aligned to its size (the verifier
// rejects misaligned stack stores).
const (
	fpOpt    = -8  // 8 bytes: the option, or the search key of bpf_load_hdr_opt
	fpCookie = -16 // u64 socket cookie, key of socks
	fpPort   = -20 // u32 port, key of ports
	fpVal    = -24 // u64: a sockState for socks, or the u32 setsockopt value
)

// optionWord is the 6 option bytes FE 06 E2 D4 C3 D9 followed by two zero
// bytes, as one u64 in host byte order: the programs write it to the
// stack with a single aligned 8-byte store, so that bpf_load_hdr_opt and
// bpf_store_hdr_opt always read initialised stack.
var optionWord = int64(binary.NativeEndian.Uint64([]byte{optKind, optLen, 0xE2, 0xD4, 0xC3, 0xD9, 0, 0}))

const lblOut = "out"

// ownSocket emits: look the socket's cookie up in socks; jump to out when
// it is not there, else leave the value pointer in R7.
func ownSocket(socks *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.FnGetSocketCookie.Call(),
		asm.StoreMem(asm.RFP, fpCookie, asm.R0, asm.DWord),
		asm.LoadMapPtr(asm.R1, socks.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, fpCookie),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, lblOut),
		asm.Mov.Reg(asm.R7, asm.R0),
	}
}

// ownPort emits: jump to out unless one of this Signaller's listeners is
// on the context's local port. It identifies the listener behind a
// request socket (SYN-ACK) or an accepted child: for those the cookie is
// not the listener's, and the context gives no way to reach the listener.
// Only sockets whose listener has the WRITE_HDR_OPT flag get here, so the
// port is ambiguous only when two Signallers (or another BPF tool setting
// that flag) have listeners on the same port at different addresses. Both
// programs then act: the option is still written once (bpf_store_hdr_opt
// refuses a second copy with -EEXIST) but both reserve room, and the
// SYN-ACK carries six more NOPs; without the port check that would
// happen on every SYN-ACK of every other Signaller (measured).
func ownPort(ports *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R1, asm.R6, offLocalPort, asm.Word),
		asm.And.Imm(asm.R1, 0xffff),
		asm.StoreMem(asm.RFP, fpPort, asm.R1, asm.Word),
		asm.LoadMapPtr(asm.R1, ports.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, fpPort),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, lblOut),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.Word),
		asm.JEq.Imm(asm.R1, 0, lblOut),
	}
}

// loadOpt emits: search the option (flags 0: in the current skb;
// loadHdrOptSYN: in the peer's SYN); R0 is its length (6) when found,
// a negative errno (-ENOMSG when absent) when not.
func loadOpt(flags int32) asm.Instructions {
	return asm.Instructions{
		asm.LoadImm(asm.R1, optionWord, asm.DWord),
		asm.StoreMem(asm.RFP, fpOpt, asm.R1, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, fpOpt),
		asm.Mov.Imm(asm.R3, 8),
		asm.Mov.Imm(asm.R4, flags),
		asm.FnLoadHdrOpt.Call(),
	}
}

// setCbFlags emits: bpf_sock_ops_cb_flags_set(ctx, (flags & and) | or).
func setCbFlags(and, or int32) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R6, offCbFlags, asm.Word),
		asm.And.Imm(asm.R2, and),
		asm.Or.Imm(asm.R2, or),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.FnSockOpsCbFlagsSet.Call(),
	}
}

func concat(parts ...asm.Instructions) asm.Instructions {
	var out asm.Instructions
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// sockOpsProgram is the cgroup sock_ops program. What it does per callback:
//
//   - TCP_CONNECT_CB, opted-in socket: set the WRITE_HDR_OPT flag, so that
//     the kernel asks the program for options while it builds the SYN.
//   - TCP_LISTEN_CB, opted-in socket: count its port in ports, set
//     TCP_SAVE_SYN with bpf_setsockopt and the WRITE_HDR_OPT flag (request
//     sockets and accepted children inherit the listener's flags).
//   - HDR_OPT_LEN_CB / WRITE_HDR_OPT_CB, SYN of an opted-in socket:
//     reserve 6 bytes, then write FE 06 E2 D4 C3 D9 (the kernel fills the
//     rest of the 4-byte aligned reservation with NOPs). SYN-ACK of a
//     listener of ours: the same, but only when the client's SYN had the
//     option, as Linux only echoes it. Other segments: nothing.
//   - ACTIVE_ESTABLISHED_CB, opted-in socket: the skb is the SYN-ACK;
//     record whether it carried the option, and clear WRITE_HDR_OPT so
//     that no further segment calls the program.
//   - PASSIVE_ESTABLISHED_CB, child of a listener of ours: enter the child
//     into socks with whether the client's SYN had the option; swap the
//     inherited WRITE_HDR_OPT flag for STATE.
//   - STATE_CB to TCP_CLOSE (only our accepted children have the flag):
//     drop the child's entry. That is what empties socks of children that
//     never get a file, being still in the accept queue when their
//     listener closes; the others also go at close by the release program.
//
// Measured on Linux 6.18 (and the reason for the above):
//
//   - In the SYN-ACK callbacks the context is the request socket: not a
//     full socket (is_fullsock 0), and its cookie is its
//     own, not the listener's. So a listener of ours is recognised by its
//     local port (ownPort); bpf_load_hdr_opt with BPF_LOAD_HDR_OPT_TCP_SYN
//     finds the client's SYN there (the request socket holds it).
//   - An accepted child's cookie is the request socket's, and it inherits
//     the listener's callback flags (0x40 here).
//   - In PASSIVE_ESTABLISHED_CB the skb is the final ACK; the SYN is found
//     with BPF_LOAD_HDR_OPT_TCP_SYN only if the listener had TCP_SAVE_SYN
//     (else -ENOENT), hence the bpf_setsockopt in TCP_LISTEN_CB, which
//     returns 0 there. The saved SYN also serves SYN-ACK retransmits,
//     which have no SYN skb at hand, and SYNHasOption.
//   - In ACTIVE_ESTABLISHED_CB bpf_load_hdr_opt (flags 0) on the SYN-ACK
//     returns 6 when the option is there and -ENOMSG when it is not.
//
// The kernel runs the callbacks of a socket under that socket's lock,
// which is what makes PeerSignalled race-free (see there). The program
// returns 1 everywhere: sock_ops programs must, and the return value of
// these callbacks means nothing else.
func sockOpsProgram(socks, ports *ebpf.Map) asm.Instructions {
	return concat(
		asm.Instructions{
			asm.Mov.Reg(asm.R6, asm.R1),
			asm.LoadMem(asm.R9, asm.R6, offOp, asm.Word),
			asm.JEq.Imm(asm.R9, opTCPConnect, "connect"),
			asm.JEq.Imm(asm.R9, opActiveEstablished, "active"),
			asm.JEq.Imm(asm.R9, opPassiveEstablished, "passive"),
			asm.JEq.Imm(asm.R9, opState, "state"),
			asm.JEq.Imm(asm.R9, opTCPListen, "listen"),
			asm.JEq.Imm(asm.R9, opHdrOptLen, "hdr"),
			asm.JEq.Imm(asm.R9, opWriteHdrOpt, "hdr"),
			asm.Mov.Imm(asm.R0, 1).WithSymbol(lblOut),
			asm.Return(),
		},

		// TCP_CONNECT_CB
		symbol("connect", ownSocket(socks)),
		setCbFlags(-1, cbWriteHdrOpt),
		asm.Instructions{asm.Ja.Label(lblOut)},

		// ACTIVE_ESTABLISHED_CB
		symbol("active", ownSocket(socks)),
		loadOpt(0),
		asm.Instructions{
			asm.LoadMem(asm.R1, asm.R7, 0, asm.Word),
			asm.Or.Imm(asm.R1, stDone),
			asm.JSLT.Imm(asm.R0, optLen, "active_store"),
			asm.Or.Imm(asm.R1, stPeer),
			asm.StoreMem(asm.R7, 0, asm.R1, asm.Word).WithSymbol("active_store"),
		},
		setCbFlags(^cbWriteHdrOpt, 0),
		asm.Instructions{asm.Ja.Label(lblOut)},

		// PASSIVE_ESTABLISHED_CB
		asm.Instructions{
			asm.LoadMem(asm.R1, asm.R6, offCbFlags, asm.Word).WithSymbol("passive"),
			asm.And.Imm(asm.R1, cbWriteHdrOpt),
			asm.JEq.Imm(asm.R1, 0, lblOut),
		},
		ownPort(ports),
		loadOpt(loadHdrOptSYN),
		asm.Instructions{
			asm.Mov.Imm(asm.R1, stDone|stPassive),
			asm.JSLT.Imm(asm.R0, optLen, "passive_store"),
			asm.Or.Imm(asm.R1, stPeer),
			asm.StoreMem(asm.RFP, fpVal, asm.R1, asm.DWord).WithSymbol("passive_store"), // Port 0
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.FnGetSocketCookie.Call(),
			asm.StoreMem(asm.RFP, fpCookie, asm.R0, asm.DWord),
			asm.LoadMapPtr(asm.R1, socks.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, fpCookie),
			asm.Mov.Reg(asm.R3, asm.RFP),
			asm.Add.Imm(asm.R3, fpVal),
			asm.Mov.Imm(asm.R4, bpfNoExist),
			asm.FnMapUpdateElem.Call(), // full map: no entry, PeerSignalled says so
		},
		setCbFlags(^cbWriteHdrOpt, cbState),
		asm.Instructions{asm.Ja.Label(lblOut)},

		// STATE_CB
		asm.Instructions{
			asm.LoadMem(asm.R1, asm.R6, offArgs+4, asm.Word).WithSymbol("state"),
			asm.JNE.Imm(asm.R1, tcpClose, lblOut),
		},
		ownSocket(socks),
		asm.Instructions{
			asm.LoadMem(asm.R1, asm.R7, 0, asm.Word),
			asm.JSet.Imm(asm.R1, stListener, lblOut), // listeners go with their file
			asm.LoadMapPtr(asm.R1, socks.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, fpCookie),
			asm.FnMapDeleteElem.Call(),
			asm.Ja.Label(lblOut),
		},

		// TCP_LISTEN_CB
		symbol("listen", ownSocket(socks)),
		asm.Instructions{
			asm.LoadMem(asm.R8, asm.R7, 0, asm.Word),
			asm.JSet.Imm(asm.R8, stListener, lblOut), // listen() again after shutdown: counted already
			asm.LoadMem(asm.R1, asm.R6, offLocalPort, asm.Word),
			asm.And.Imm(asm.R1, 0xffff),
			asm.StoreMem(asm.R7, 4, asm.R1, asm.Word),
			asm.StoreMem(asm.RFP, fpPort, asm.R1, asm.Word),
			asm.Or.Imm(asm.R8, stListener),
			asm.StoreMem(asm.R7, 0, asm.R8, asm.Word),
			asm.LoadMapPtr(asm.R1, ports.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, fpPort),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "listen_save"),
			asm.Mov.Imm(asm.R1, 1),
			asm.StoreXAdd(asm.R0, asm.R1, asm.Word),
			asm.StoreImm(asm.RFP, fpVal, 1, asm.Word).WithSymbol("listen_save"),
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Imm(asm.R2, solTCP),
			asm.Mov.Imm(asm.R3, tcpSaveSYN),
			asm.Mov.Reg(asm.R4, asm.RFP),
			asm.Add.Imm(asm.R4, fpVal),
			asm.Mov.Imm(asm.R5, 4),
			asm.FnSetsockopt.Call(),
		},
		setCbFlags(-1, cbWriteHdrOpt),
		asm.Instructions{asm.Ja.Label(lblOut)},

		// HDR_OPT_LEN_CB and WRITE_HDR_OPT_CB (op in R9). skb_tcp_flags is
		// loaded as a u32: the verifier refuses narrower loads of it.
		asm.Instructions{
			asm.LoadMem(asm.R8, asm.R6, offSkbTCPFlags, asm.Word).WithSymbol("hdr"),
			asm.Mov.Reg(asm.R1, asm.R8),
			asm.And.Imm(asm.R1, tcpFlagSYN),
			asm.JEq.Imm(asm.R1, 0, lblOut),
			asm.Mov.Reg(asm.R1, asm.R8),
			asm.And.Imm(asm.R1, tcpFlagACK),
			asm.JNE.Imm(asm.R1, 0, "hdr_synack"),
		},
		ownSocket(socks),
		asm.Instructions{asm.Ja.Label("hdr_act")},
		symbol("hdr_synack", ownPort(ports)),
		loadOpt(loadHdrOptSYN),
		asm.Instructions{
			asm.JSLT.Imm(asm.R0, optLen, lblOut),
			asm.JEq.Imm(asm.R9, opHdrOptLen, "hdr_reserve").WithSymbol("hdr_act"),
			asm.LoadImm(asm.R1, optionWord, asm.DWord),
			asm.StoreMem(asm.RFP, fpOpt, asm.R1, asm.DWord),
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, fpOpt),
			asm.Mov.Imm(asm.R3, optLen),
			asm.Mov.Imm(asm.R4, 0),
			asm.FnStoreHdrOpt.Call(),
			asm.Ja.Label(lblOut),
			asm.Mov.Reg(asm.R1, asm.R6).WithSymbol("hdr_reserve"),
			asm.Mov.Imm(asm.R2, optLen),
			asm.Mov.Imm(asm.R3, 0),
			asm.FnReserveHdrOpt.Call(),
			asm.Ja.Label(lblOut),
		},
	)
}

// releaseProgram is the cgroup sock_release program: when an opted-in
// socket's file is closed, it drops the socket's socks entry (and its
// listener count). That covers what Forget cannot reach: dials that failed
// and so returned no net.Conn, listeners, and callers that never call
// Forget. It returns 1 (allow), as cgroup sock programs must.
func releaseProgram(socks, ports *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnGetSocketCookie.Call(),
		asm.StoreMem(asm.RFP, fpCookie, asm.R0, asm.DWord),
		asm.LoadMapPtr(asm.R1, socks.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, fpCookie),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, lblOut),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.Word),
		asm.JSet.Imm(asm.R1, stListener, "release_port"),
		asm.Ja.Label("release_delete"),
		asm.LoadMem(asm.R1, asm.R0, 4, asm.Word).WithSymbol("release_port"),
		asm.StoreMem(asm.RFP, fpPort, asm.R1, asm.Word),
		asm.LoadMapPtr(asm.R1, ports.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, fpPort),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "release_delete"),
		asm.Mov.Imm(asm.R1, -1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.Word),
		asm.LoadMapPtr(asm.R1, socks.FD()).WithSymbol("release_delete"),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, fpCookie),
		asm.FnMapDeleteElem.Call(),
		asm.Mov.Imm(asm.R0, 1).WithSymbol(lblOut),
		asm.Return(),
	}
}

// symbol labels the first instruction of ins.
func symbol(name string, ins asm.Instructions) asm.Instructions {
	out := append(asm.Instructions(nil), ins...)
	out[0] = out[0].WithSymbol(name)
	return out
}
