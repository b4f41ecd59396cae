package shm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"time"

	"github.com/goroce/goroce/internal/rundir"
	"golang.org/x/sys/unix"
)

// The rendezvous: a backend listens on SocketPath(dir, its address); a
// sender dials SocketPath(dir, destination). The dialer sends its hello
// with its ring and doorbell (SCM_RIGHTS), the listener answers with its
// own, and the connection stays open for the pairing's life: its end (EOF,
// the peer killed) is the pairing's end. Only processes of this user (or
// of Config.AllowUIDs) are trusted, checked with SO_PEERCRED on both ends:
// a socket someone else bound is never used.
//
// Both sides may dial each other at once. One pairing results: a listener
// whose own dial to the same peer is under way answers "busy" when its
// address is the lower one (its dial wins), and takes the other's dial
// otherwise; a dialer told "busy" waits for the peer's dial to arrive. The
// instance number in the hello tells a live peer's second dial (busy) from
// a restarted peer's (its old pairing is dead: replaced).

// checkDir makes sure the run directory exists and can be trusted: a
// directory (not a symbolic link) of this user that nobody else can write
// into (internal/rundir), as every goroce program checks it.
func checkDir(dir string) error {
	if _, err := rundir.Ensure(dir); err != nil {
		return fmt.Errorf("shm: run directory: %w", err)
	}
	return nil
}

// listen binds the rendezvous socket. A socket left by a process that died
// is replaced; one that answers belongs to a live backend.
func (b *Backend) listen() error {
	if err := checkDir(b.cfg.Dir); err != nil {
		return err
	}
	path := SocketPath(b.cfg.Dir, b.local)
	if _, err := os.Lstat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return fmt.Errorf("shm: open %v: %s already answers for a live backend (another process on this address?)", b.local, path)
		}
		_ = os.Remove(path) // stale: its process is gone
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("shm: open %v: %w", b.local, err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("shm: open %v: listen: %w", b.local, err)
	}
	if len(b.cfg.AllowUIDs) > 0 {
		// Connecting needs write permission on the socket: let every user
		// connect, and admit by SO_PEERCRED (checkPeer), which is the
		// check that counts. Before this, the socket had the umask's mode:
		// more restrictive, never less.
		if err := os.Chmod(path, 0o777); err != nil {
			ln.Close()
			return fmt.Errorf("shm: open %v: let the users of Config.AllowUIDs connect to %s: %w", b.local, path, err)
		}
	}
	b.ln = ln
	if !b.spawn(b.acceptLoop) {
		ln.Close()
		return errClosed
	}
	return nil
}

func (b *Backend) acceptLoop() {
	for {
		c, err := b.ln.AcceptUnix()
		if err != nil {
			if b.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			continue // EMFILE and the like: the next Accept may work
		}
		if !b.track(c, true) {
			b.stats.refused.Add(1)
			c.Close()
			continue
		}
		if !b.spawn(func() { b.answer(c) }) {
			b.untrack(c, true)
			c.Close()
		}
	}
}

// track records a rendezvous connection so that Close can end it; an
// incoming one counts against maxHandshakes until its handshake ends.
func (b *Backend) track(c *net.UnixConn, incoming bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() || incoming && b.handshakes >= maxHandshakes {
		return false
	}
	if incoming {
		b.handshakes++
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *Backend) untrack(c *net.UnixConn, handshaking bool) {
	b.mu.Lock()
	delete(b.conns, c)
	if handshaking {
		b.handshakes--
	}
	b.mu.Unlock()
}

func (b *Backend) handshakeDone() {
	b.mu.Lock()
	b.handshakes--
	b.mu.Unlock()
}

// answer runs the listener's side of a rendezvous and, if a pairing
// results, watches it.
func (b *Backend) answer(c *net.UnixConn) {
	pr, err := b.answerHello(c)
	b.handshakeDone()
	if err != nil {
		b.stats.refused.Add(1)
		b.untrack(c, false)
		c.Close()
		return
	}
	b.watch(pr)
}

func (b *Backend) answerHello(c *net.UnixConn) (*pairing, error) {
	c.SetDeadline(time.Now().Add(rendezvousTimeout))
	sameUser, err := b.checkPeer(c)
	if err != nil {
		return nil, err
	}
	h, fds, err := readHello(c)
	if err != nil {
		if errors.Is(err, errHelloVersion) {
			writeHello(c, &hello{status: statusVersion, instance: b.instance, from: b.local, to: b.local}, nil)
		}
		return nil, err
	}
	refuse := func(status uint16, err error) (*pairing, error) {
		closeFD(fds[0]) // -1 once handed over
		closeFD(fds[1])
		writeHello(c, &hello{status: status, instance: b.instance, from: b.local, to: h.from}, nil)
		return nil, err
	}
	if err := b.checkHello(&h); err != nil {
		return refuse(statusRefused, err)
	}
	p, status := b.admit(&h)
	if status != statusOK {
		return refuse(status, errors.New("shm: busy or full"))
	}
	defer b.admitted(p)
	mine, err := newHalf(b.cfg.RingSize)
	if err != nil {
		return refuse(statusRefused, err)
	}
	pr, err := b.pairWith(p, c, h, mine, fds, sameUser)
	fds = [2]int{-1, -1} // pairWith took them
	if err != nil {
		mine.close()
		return refuse(statusRefused, err)
	}
	reply := hello{instance: b.instance, from: b.local, to: h.from, ringSize: uint64(b.cfg.RingSize), maxPacket: maxPacket}
	if err := b.install(pr); err != nil {
		b.release(pr) // mine's mapping and doorbell with it
		mine.sent()
		return refuse(statusRefused, err)
	}
	if err := writeHello(c, &reply, []int{mine.ringFD, mine.bell}); err != nil {
		pr.kill() // the watcher tears it down at once
	}
	mine.sent()
	c.SetDeadline(time.Time{})
	return pr, nil
}

// checkHello checks what a peer's hello asks for.
func (b *Backend) checkHello(h *hello) error {
	switch {
	case h.to != b.local:
		return fmt.Errorf("shm: hello for %v reached %v", h.to, b.local)
	case h.from == b.local:
		return errors.New("shm: hello from our own address")
	case h.from.Addr().Is4() != b.local.Addr().Is4():
		return errors.New("shm: hello from the other address family")
	case !validRingSize(h.ringSize):
		return fmt.Errorf("shm: hello asks for a ring of %d bytes", h.ringSize)
	}
	return nil
}

// admit decides whether a dial from h.from may pair now, and marks the
// peer as being answered.
func (b *Backend) admit(h *hello) (*peer, uint16) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.peers[h.from]
	if p == nil {
		if len(b.peers) >= b.cfg.MaxPeers+maxFailed && !b.evictLocked() {
			return nil, statusRefused
		}
		p = newPeer(b, h.from)
		p.state.Store(stateNone)
		b.peers[h.from] = p
	}
	p.txMu.Lock()
	defer p.txMu.Unlock()
	switch {
	case p.answering:
		return nil, statusBusy
	case p.pair != nil && p.pair.instance == h.instance:
		return nil, statusBusy // its dial crossed ours, which it answered
	case p.dialing && b.local.Compare(h.from) < 0:
		return nil, statusBusy // our dial wins
	}
	p.answering = true
	return p, statusOK
}

// admitted ends the answer to a peer's dial. Packets queued meanwhile
// (startDial) left with the pairing, if one resulted; otherwise, unless a
// dial of ours is under way, they go to the fallback as after a failed dial.
func (b *Backend) admitted(p *peer) {
	p.txMu.Lock()
	defer p.txMu.Unlock()
	p.answering = false
	if p.pair == nil && !p.dialing && p.state.Load() == stateConnecting {
		b.noPairing(p)
		b.drainToFallback(p)
	}
}

// pairWith checks and maps the peer's ring and doorbell (fds, which it
// takes over) and makes the pairing; sameUser is checkPeer's verdict.
func (b *Backend) pairWith(p *peer, c *net.UnixConn, h hello, mine half, fds [2]int, sameUser bool) (*pairing, error) {
	inMem, ino, err := mapPeerRing(fds[0], h.ringSize)
	if err != nil {
		closeFD(fds[1])
		return nil, err
	}
	if err := checkBell(fds[1]); err != nil {
		unmap(inMem)
		closeFD(fds[1])
		return nil, err
	}
	in, _ := newRing(inMem)
	if err := in.checkFormat(); err != nil {
		unmap(inMem)
		closeFD(fds[1])
		return nil, err
	}
	pr := newPairing(b, p, c, h, mine, inMem, fds[1])
	pr.bell.raw = sameUser
	pr.out.race, pr.in.race = raceToken(mine.ino), raceToken(ino)
	return pr, nil
}

// release frees a pairing that was never installed.
func (b *Backend) release(pr *pairing) {
	pr.bell.close()
	unmap(pr.outMem)
	unmap(pr.inMem)
	closeFD(pr.mine)
}

// dial runs the dialer's side of a rendezvous for p, which is connecting;
// on failure p goes without a pairing (its queue to the fallback).
func (b *Backend) dial(p *peer) {
	pr, err := b.dialHello(p)
	if err != nil {
		b.dialFailed(p)
		return
	}
	if pr == nil { // the peer's own dial paired us
		b.dialDone(p)
		return
	}
	if err := b.install(pr); err != nil {
		b.release(pr)
		b.untrack(pr.conn, false)
		pr.conn.Close()
		b.stats.refused.Add(1)
		b.dialFailed(p)
		return
	}
	b.dialDone(p)
	b.watch(pr)
}

func (b *Backend) dialHello(p *peer) (*pairing, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rendezvousTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", SocketPath(b.cfg.Dir, p.addr))
	if err != nil {
		return nil, err // no socket, nobody listening: the usual "no shm here"
	}
	c := nc.(*net.UnixConn)
	if !b.track(c, false) {
		c.Close()
		return nil, errClosed
	}
	pr, err := b.dialOn(ctx, p, c)
	if err != nil || pr == nil {
		b.untrack(c, false)
		c.Close()
	}
	return pr, err
}

func (b *Backend) dialOn(ctx context.Context, p *peer, c *net.UnixConn) (*pairing, error) {
	deadline, _ := ctx.Deadline()
	c.SetDeadline(deadline)
	sameUser, err := b.checkPeer(c)
	if err != nil {
		b.stats.refused.Add(1)
		return nil, err
	}
	mine, err := newHalf(b.cfg.RingSize)
	if err != nil {
		return nil, err
	}
	h := hello{instance: b.instance, from: b.local, to: p.addr, ringSize: uint64(b.cfg.RingSize), maxPacket: maxPacket}
	if err := writeHello(c, &h, []int{mine.ringFD, mine.bell}); err != nil {
		mine.close()
		return nil, err
	}
	mine.sent()
	reply, fds, err := readHello(c)
	if err == nil && reply.status == statusOK {
		if reply.from != p.addr || reply.to != b.local || !validRingSize(reply.ringSize) {
			closeFD(fds[0])
			closeFD(fds[1])
			err = errors.New("shm: the peer's answer names other addresses or a bad ring")
		}
	}
	if err != nil {
		b.stats.refused.Add(1)
		mine.close()
		return nil, err
	}
	switch reply.status {
	case statusOK:
	case statusBusy:
		mine.close()
		return nil, b.awaitPeerDial(ctx, p)
	default:
		mine.close()
		return nil, fmt.Errorf("shm: the peer refused to pair (status %d)", reply.status)
	}
	pr, err := b.pairWith(p, c, reply, mine, fds, sameUser)
	if err != nil {
		b.stats.refused.Add(1)
		mine.close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return pr, nil
}

// awaitPeerDial waits, when the peer answered "busy", for its own dial to
// pair us; nil means it did.
func (b *Backend) awaitPeerDial(ctx context.Context, p *peer) error {
	p.txMu.Lock()
	settled := p.settled
	paired := p.pair != nil
	p.txMu.Unlock()
	if paired {
		return nil
	}
	select {
	case <-settled:
		return nil
	case <-ctx.Done():
		return errors.New("shm: the peer said busy but never dialed")
	}
}

// dialDone ends a dial that paired.
func (b *Backend) dialDone(p *peer) {
	p.txMu.Lock()
	p.dialing = false
	p.txMu.Unlock()
}

// dialFailed ends a dial that did not pair: unless a dial of the peer's
// paired us meanwhile, p goes without a pairing, and what waited for it
// goes to the fallback (or is dropped), in order, before any later packet.
func (b *Backend) dialFailed(p *peer) {
	b.stats.failed.Add(1)
	p.txMu.Lock()
	defer p.txMu.Unlock()
	p.dialing = false
	if p.pair != nil {
		return
	}
	b.noPairing(p)
	b.drainToFallback(p)
}

// watch reads the pairing's connection until it ends, then tears the
// pairing down. The peer sends nothing after its hello: bytes are a
// protocol violation and end the pairing too.
func (b *Backend) watch(pr *pairing) {
	var buf [64]byte
	pr.conn.Read(buf[:])
	b.untrack(pr.conn, false)
	b.teardown(pr)
}

// checkPeer checks who is at the other end of c: the user that connected
// to our socket, or that bound the socket we connected to. It reports
// whether that is this process's own user (not one of Config.AllowUIDs).
func (b *Backend) checkPeer(c *net.UnixConn) (sameUser bool, err error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return false, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return false, err
	}
	if cerr != nil {
		return false, fmt.Errorf("shm: SO_PEERCRED: %w", cerr)
	}
	if cred.Uid != b.uid && !slices.Contains(b.cfg.AllowUIDs, cred.Uid) {
		return false, fmt.Errorf("shm: peer process %d belongs to uid %d, not to this user (%d); Config.AllowUIDs admits other users", cred.Pid, cred.Uid, b.uid)
	}
	return cred.Uid == b.uid, nil
}

// writeHello sends h with fds.
func writeHello(c *net.UnixConn, h *hello, fds []int) error {
	var buf [helloLen]byte
	h.encode(&buf)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	n, oobn, err := c.WriteMsgUnix(buf[:], oob, nil)
	if err == nil && (n != len(buf) || oobn != len(oob)) {
		err = errors.New("shm: hello sent short")
	}
	return err
}

// readHello reads a hello and the two descriptors that come with it;
// whatever else comes (more descriptors, a cut-short control message) is
// closed and refused. A hello without descriptors (an answer that refuses)
// gives -1s.
func readHello(c *net.UnixConn) (hello, [2]int, error) {
	fds := [2]int{-1, -1}
	var buf [helloLen]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(buf[:], oob)
	if err != nil {
		return hello{}, fds, err
	}
	var got []int
	if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for i := range msgs {
			if r, rerr := unix.ParseUnixRights(&msgs[i]); rerr == nil {
				got = append(got, r...)
			}
		}
	}
	closeAll := func() {
		for _, fd := range got {
			unix.Close(fd)
		}
	}
	if flags&unix.MSG_CTRUNC != 0 || (len(got) != 0 && len(got) != 2) {
		closeAll()
		return hello{}, fds, errors.New("shm: hello came with other descriptors than a ring and a doorbell")
	}
	h, err := decodeHello(buf[:n])
	if err != nil {
		closeAll()
		return hello{}, fds, err
	}
	if len(got) == 2 {
		fds = [2]int{got[0], got[1]}
	} else if h.status == statusOK {
		return hello{}, fds, errors.New("shm: hello without its ring and doorbell")
	}
	return h, fds, nil
}
