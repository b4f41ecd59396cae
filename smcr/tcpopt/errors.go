package tcpopt

import "errors"

var (
	// ErrNotPermitted is wrapped by Open's error when the process may not
	// load or attach BPF programs: it needs CAP_BPF and CAP_NET_ADMIN
	// (CAP_SYS_ADMIN stands in for either). Callers can fall back to the
	// unprivileged mode.
	ErrNotPermitted = errors.New("tcpopt: not permitted to load and attach a sock_ops BPF program (needs CAP_BPF and CAP_NET_ADMIN, or CAP_SYS_ADMIN): run as root, or use the unprivileged mode (SaveSYN and SYNHasOption, no option sent) where both sides are configured to speak SMC")

	// ErrUnsupported is wrapped by Open's error when the system lacks what
	// a Signaller needs: a mounted cgroup v2 that holds the process,
	// sock_ops programs with the TCP header option helpers (Linux 5.10 or
	// later), or bpf_link attachment to cgroups (Linux 5.7 or later).
	ErrUnsupported = errors.New("tcpopt: this system cannot put the SMC option into TCP handshakes (needs Linux 5.10+ with cgroup v2 and BPF sock_ops); use the unprivileged mode where both sides are configured to speak SMC")

	// ErrClosed is returned by a Signaller's methods after Close.
	ErrClosed = errors.New("tcpopt: Signaller is closed")

	// ErrNotTracked is wrapped by PeerSignalled's error when it has no
	// answer for the connection: the socket was not opted in with Control
	// (or its listener was not), the opt-in table was full, Forget was
	// called, or an accepted connection has no saved SYN.
	ErrNotTracked = errors.New("tcpopt: connection not tracked")

	// ErrMPTCP is wrapped by the errors of Control and SaveSYN when the
	// socket is an MPTCP socket. The kernel runs sock_ops programs and
	// saves SYNs on MPTCP's TCP subflows, not on the socket Go returns, so
	// nothing here can work on it. Go 1.24 and later listen with MPTCP by
	// default: call SetMultipathTCP(false) on the net.ListenConfig and the
	// net.Dialer.
	ErrMPTCP = errors.New("tcpopt: MPTCP socket: call SetMultipathTCP(false) on the net.Dialer and net.ListenConfig (Go listens with MPTCP by default since 1.24)")

	// ErrNoSavedSYN is wrapped by SYNHasOption's error when the accepted
	// connection has no saved SYN: its listener did not have TCP_SAVE_SYN
	// (use SaveSYN), the SYN was already read (the kernel hands it out
	// once), or the connection came in on a SYN cookie.
	ErrNoSavedSYN = errors.New("tcpopt: no saved SYN")
)
