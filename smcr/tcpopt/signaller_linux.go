package tcpopt

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Signaller puts the SMC option into the handshakes of the TCP sockets
// opted in with its Control method, and tells whether the peer's
// handshake carried it. It holds two BPF maps and two programs attached
// with bpf_links to the process's own cgroup v2. Its methods are safe for
// concurrent use.
type Signaller struct {
	cgroup string // the cgroup directory the programs are attached to

	mu      sync.RWMutex // Close takes it to write; the others to read
	closed  bool
	socks   *ebpf.Map // cookie -> sockState of opted-in sockets
	ports   *ebpf.Map // local port -> number of our listeners on it
	progs   []*ebpf.Program
	links   []link.Link
	refused atomic.Uint64 // opt-ins refused because socks was full
}

// Open loads the programs and attaches them to the calling process's
// cgroup v2 (the one /proc/self/cgroup names; the process is not moved).
// It uses bpf_link attachments, which are multi-attach by nature, so
// several Signallers, in this process or others of the cgroup, coexist;
// and a link lives only as long as its file descriptor, so the programs
// are detached on Close and also when the process exits, however it
// exits. Open wraps ErrNotPermitted or ErrUnsupported when it cannot.
func Open() (*Signaller, error) {
	dir, cg, err := openOwnCgroup()
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	s := &Signaller{cgroup: cg}
	done := false
	defer func() {
		if !done {
			_ = s.release()
		}
	}()

	s.socks, err = ebpf.NewMap(&ebpf.MapSpec{
		Name:       "tcpopt_socks",
		Type:       ebpf.Hash,
		KeySize:    8,
		ValueSize:  8,
		MaxEntries: maxSockets,
		Flags:      unix.BPF_F_NO_PREALLOC, // memory follows the entries in use
	})
	if err != nil {
		return nil, classify("create the socket map", err)
	}
	s.ports, err = ebpf.NewMap(&ebpf.MapSpec{
		Name:       "tcpopt_ports",
		Type:       ebpf.Array,
		KeySize:    4,
		ValueSize:  4,
		MaxEntries: numPorts,
	})
	if err != nil {
		return nil, classify("create the port map", err)
	}

	// The release program first: once an opted-in socket can exist, its
	// entry must be dropped when it closes.
	for _, p := range []struct {
		name   string
		typ    ebpf.ProgramType
		attach ebpf.AttachType
		insns  asm.Instructions
	}{
		{"tcpopt_release", ebpf.CGroupSock, ebpf.AttachCgroupInetSockRelease, releaseProgram(s.socks, s.ports)},
		{"tcpopt_sockops", ebpf.SockOps, ebpf.AttachCGroupSockOps, sockOpsProgram(s.socks, s.ports)},
	} {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Name:         p.name,
			Type:         p.typ,
			AttachType:   p.attach,
			Instructions: p.insns,
		})
		if err != nil {
			return nil, classify("load BPF program "+p.name, err)
		}
		s.progs = append(s.progs, prog)
		// AttachRawLink rather than link.AttachCgroup: AttachCgroup falls
		// back to the legacy BPF_PROG_ATTACH where bpf_link is missing,
		// and such an attachment outlives the process.
		l, err := link.AttachRawLink(link.RawLinkOptions{
			Target:  int(dir.Fd()),
			Program: prog,
			Attach:  p.attach,
		})
		if err != nil {
			return nil, classify("attach "+p.name+" to cgroup "+cg, err)
		}
		s.links = append(s.links, l)
	}
	done = true
	return s, nil
}

// classify wraps ErrNotPermitted or ErrUnsupported around err, which
// says what failed.
func classify(what string, err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("%w: %s: %v", ErrNotPermitted, what, err)
	default:
		// Unsupported helpers and program or attach types show as
		// EINVAL, ENOTSUPP or ebpf.ErrNotSupported; the verifier's
		// complaint is in err.
		return fmt.Errorf("%w: %s: %v", ErrUnsupported, what, err)
	}
}

// Close detaches the programs and frees the maps. Sockets opted in
// earlier keep their connections but get no option from then on. Close
// is idempotent; the other methods return ErrClosed after it. Close
// opted-in listeners first: a listener keeps the option callback flag the
// program gave it, and with no program left to clear it, connections it
// accepts later keep it too: nothing is written, but each segment they
// send runs the cgroup's sock_ops programs, those of other Signallers
// included, to no effect (measured).
func (s *Signaller) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.release()
}

func (s *Signaller) release() error {
	var errs []error
	for _, l := range s.links {
		errs = append(errs, l.Close())
	}
	for _, p := range s.progs {
		errs = append(errs, p.Close())
	}
	for _, m := range []*ebpf.Map{s.socks, s.ports} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	s.links, s.progs, s.socks, s.ports = nil, nil, nil, nil
	return errors.Join(errs...)
}

// Control opts a TCP socket in: the program puts the option into its SYN
// (dialer) or, when the client's SYN had it, into its SYN-ACKs
// (listener). It reads the socket's SO_COOKIE and enters it into the
// Signaller's socket map, which the program consults on every callback,
// so no other socket of the cgroup is touched. Use it as net.Dialer.Control
// or net.ListenConfig.Control, with SetMultipathTCP(false) on both.
//
// When the map is full (65536 open opted-in sockets), Control lets the
// socket go on unsignalled rather than fail the dial: the connection is
// plain TCP, and PeerSignalled reports ErrNotTracked for it.
func (s *Signaller) Control(network, address string, c syscall.RawConn) error {
	if err := tcpNetwork(network); err != nil {
		return err
	}
	var inner error
	if err := c.Control(func(fd uintptr) { inner = s.optIn(int(fd)) }); err != nil {
		return err
	}
	return inner
}

func (s *Signaller) optIn(fd int) error {
	if err := checkTCP(fd); err != nil {
		return err
	}
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		return fmt.Errorf("tcpopt: SO_COOKIE: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	err = s.socks.Update(cookie, sockState{State: stOptedIn}, ebpf.UpdateNoExist)
	switch {
	case err == nil, errors.Is(err, ebpf.ErrKeyExist): // opted in twice: fine
		return nil
	case errors.Is(err, unix.E2BIG):
		s.refused.Add(1)
		return nil
	default:
		return fmt.Errorf("tcpopt: opt socket in: %w", err)
	}
}

// PeerSignalled reports whether the peer's handshake carried the option:
// for a connection dialed with Control, whether the SYN-ACK had it; for
// one accepted on a listener opted in with Control, whether the client's
// SYN had it. It wraps ErrNotTracked when it cannot know.
//
// It is exact as soon as Dial or Accept has returned, with no waiting:
// the kernel runs the callbacks that record the answer (on the SYN-ACK
// for a dialer, on the final ACK for an accepted child) with the socket's
// lock held, and both the end of connect (Go checks it with getpeername)
// and accept take that lock after them. PeerSignalled itself calls
// getpeername, which takes the lock, before it reads, so it is ordered
// after the callback however the connection reached the caller.
func (s *Signaller) PeerSignalled(c *net.TCPConn) (bool, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return false, err
	}
	var ok bool
	var inner error
	if err := rc.Control(func(fd uintptr) { ok, inner = s.peerSignalled(int(fd)) }); err != nil {
		return false, err
	}
	return ok, inner
}

func (s *Signaller) peerSignalled(fd int) (bool, error) {
	// Ordering point: getpeername locks the socket (see PeerSignalled).
	if _, err := unix.Getpeername(fd); err != nil {
		return false, fmt.Errorf("tcpopt: connection not established: %w", err)
	}
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		return false, fmt.Errorf("tcpopt: SO_COOKIE: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return false, ErrClosed
	}
	var st sockState
	err = s.socks.Lookup(cookie, &st)
	switch {
	case err == nil && st.State&stDone != 0:
		return st.State&stPeer != 0, nil
	case err == nil:
		return false, fmt.Errorf("%w: the socket was opted in but its handshake did not pass the program attached to cgroup %s (was the process moved to another cgroup?)", ErrNotTracked, s.cgroup)
	case errors.Is(err, ebpf.ErrKeyNotExist):
		return false, s.notTracked()
	default:
		return false, fmt.Errorf("tcpopt: look the socket up: %w", err)
	}
}

func (s *Signaller) notTracked() error {
	if n := s.refused.Load(); n > 0 {
		return fmt.Errorf("%w: not opted in with Control, forgotten, or one of the %d sockets the full socket map refused (close or Forget connections)", ErrNotTracked, n)
	}
	return fmt.Errorf("%w: neither dialed with Control nor accepted on a listener opted in with Control (or forgotten, or the socket map was full)", ErrNotTracked)
}

// Forget removes the connection's entry from the socket map. The entry
// of any opted-in socket also goes when its file is closed (a program
// attached to the cgroup's socket release hook sees to that, so failed
// dials leave nothing behind either); Forget drops it earlier, for
// example before handing the connection elsewhere. After Forget,
// PeerSignalled reports ErrNotTracked for the connection.
func (s *Signaller) Forget(c *net.TCPConn) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		cookie, err := unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE)
		if err != nil {
			return
		}
		s.mu.RLock()
		defer s.mu.RUnlock()
		if !s.closed {
			_ = s.socks.Delete(cookie)
		}
	})
}
