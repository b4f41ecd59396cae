// Package tcpopt makes Linux's SMC peers see a goroce endpoint as one.
//
// # What Linux requires
//
// Linux (net/smc) goes on to the SMC CLC handshake only with a peer whose
// TCP handshake carried the SMC option: TCP experimental option kind 254,
// length 6, ExID 0xE2D4C3D9 ("SMCR" in EBCDIC). Its client puts it in the
// SYN; its server echoes it in the SYN-ACK only if the SYN had it. Linux
// writes it last among the options, behind two NOPs (Option). Without
// the option on both sides Linux falls back to plain TCP.
//
// # Why BPF
//
// A Go program cannot add options to the kernel's handshake: there is no
// socket option for that. A cgroup sock_ops BPF program can (Linux 5.10+:
// bpf_reserve_hdr_opt, bpf_store_hdr_opt, bpf_load_hdr_opt). Open loads
// such a program, built in Go with cilium/ebpf's asm package (no C, no
// generated object), and a second, tiny one for the socket release hook.
//
// # Which cgroup, what is attached, how it is undone
//
// sock_ops programs attach to a cgroup v2 and see the TCP sockets of every
// process in it and below. Open attaches to the process's own cgroup, the
// "0::" line of /proc/self/cgroup under the cgroup2 mount found in
// /proc/self/mountinfo (hybrid hosts mount it at /sys/fs/cgroup/unified),
// without moving the process. Under `ip netns exec`, whose mount
// namespace has a fresh /sys that hides the host's cgroup v2 mount, Open
// mounts cgroup v2 itself in that private namespace (at a directory of
// its own, detached again once the cgroup is open), as a user of ip netns
// exec expects it to just work; the hierarchy, and so the cgroup, are the
// host's. In a mount namespace that may be the host's it mounts nothing,
// and says to mount one. Because the cgroup may be shared, even the
// root, the programs act only on sockets opted in through
// Signaller.Control, recognised by socket cookie, and on the handshakes of
// listeners opted in that way. The attachments are bpf_links: several
// Signallers, of this process or of others in the cgroup, coexist, and
// each link goes away with its file descriptor, on Close or when the
// process exits, so a crash leaves nothing attached. Loading and
// attaching needs CAP_BPF and CAP_NET_ADMIN, or CAP_SYS_ADMIN
// (ErrNotPermitted).
//
// A dialer's SYN then carries the 6 option bytes followed by two NOPs of
// the kernel's padding (FE 06 E2 D4 C3 D9 01 01), rather than Linux's
// 01 01 FE 06 E2 D4 C3 D9: a BPF program can only write whole options,
// and the kernel pads after them. Option parsers, Linux's among them, do
// not care where the NOPs are. A listener's SYN-ACK carries the same bytes
// when, and only when, the client's SYN had the option.
//
// Per-socket state lives in a bounded BPF hash map keyed by socket cookie;
// an entry leaves it on Forget or, at the latest, when the socket's file
// is closed (the release program) or, for an accepted connection that
// never got a file, when the kernel closes it. So failed dials, listeners
// closed with a full accept queue and forgotten Forgets cannot fill it.
// The program clears the option callback flag once a handshake is over:
// established connections cost nothing per segment (accepted ones keep
// the state-change callback, a few calls in a connection's life).
//
// # Unprivileged mode
//
// Without BPF a listener can still see whether a client's SYN had the
// option: SaveSYN sets TCP_SAVE_SYN, and SYNHasOption parses the SYN the
// kernel saved. Nothing is echoed, so this serves only where both sides
// are configured to speak SMC.
//
// # MPTCP
//
// Since Go 1.24 net.ListenConfig listens with MPTCP by default. The kernel
// runs sock_ops callbacks and saves SYNs on MPTCP's TCP subflows, not on
// the socket Go returns, so callers must call SetMultipathTCP(false) on
// every net.Dialer and net.ListenConfig they use with this package.
// Control and SaveSYN return ErrMPTCP for an MPTCP socket; Go (1.26)
// happens to retry a failed MPTCP dial or listen with plain TCP, which then
// works, but that costs a socket and is not a documented promise.
package tcpopt
