package device

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goroce/goroce/internal/rundir"
)

// A kernel RDMA device shows its counters and its live objects to every
// process (sysfs hw_counters, rdma statistic, rdma res show); a goroce
// device lives inside one process. Publish closes the gap: the device
// answers on a Unix socket named after its address, and any process of
// the same user (and root) reads a snapshot there (roce-devinfo
// -counters, res show and statistic do).
//
// The protocol is one text snapshot per connection:
//
//	goroce-device 2
//	name goroce0
//	addr 127.0.0.1:4791
//	pid 4242
//	comm rc_pingpong
//	counter sent_pkts 1000
//	...
//	qp lqpn 1193046 type RC state RTS port 1 sq-psn 77 path-mtu 1024 pdn 1 rqpn 4660 rq-psn 99 path-mig-state MIGRATED
//	cq cqn 3 cqe 1017 users 1
//	mr mrn 1 rkey 0x1f2e3d4c lkey 0x5a6b7c8d iova 0xc000100000 mrlen 8192 pdn 1
//	pd pdn 1 users 2
//
// (a resource line is rdma's own words: its kind, then key and value
// pairs), then the device closes the connection. A reader skips keys it
// does not know.

const publishMagic = "goroce-device 2"

const (
	// publishWriteTimeout bounds how long a slow reader can hold the
	// publisher (and so Close) up.
	publishWriteTimeout = time.Second
	// What a reader accepts at most: the snapshot's bytes, counters (a
	// device has about a hundred), objects of each kind (the device's
	// limits) and pairs on a line, so that a publisher that lies costs
	// little.
	maxPublishedBytes    = 32 << 20
	maxPublishedCounters = 4096
	maxResourcePairs     = 32
)

// RunDir is the directory devices publish in by default: $GOROCE_RUN_DIR,
// else $XDG_RUNTIME_DIR/goroce, else goroce-UID in the system's temporary
// directory. It is trusted only as ssh trusts ~/.ssh (see package
// internal/rundir): a directory of the user's that nobody else may write.
func RunDir() string { return rundir.Path() }

// PublishPath is the socket a device bound to ap publishes on in dir.
func PublishPath(dir string, ap netip.AddrPort) string {
	return filepath.Join(dir, fmt.Sprintf("%s_%d.sock", ap.Addr().Unmap(), ap.Port()))
}

// publisher is a device's counter socket.
type publisher struct {
	ln   *rundir.Listener
	done sync.WaitGroup
}

// Publish makes the device's counters readable by other processes of the
// user on the Unix socket PublishPath(dir, d.LocalAddr()); dir "" means
// RunDir(), which is created (mode 0700) if missing. A directory another
// user owns or may write to is refused, as is a socket there that is not
// the user's. A socket left by a process that died is replaced; one that
// answers belongs to a live device, and Publish fails. Close stops
// publishing and removes the socket. One goroutine serves the socket,
// answering one connection at a time.
func (d *Device) Publish(dir string) error {
	if dir == "" {
		dir = RunDir()
	}
	path := PublishPath(dir, d.local)
	ln, err := rundir.Listen(dir, filepath.Base(path))
	if errors.Is(err, rundir.ErrInUse) {
		return fmt.Errorf("device %s: publish counters: %s already answers for a live device (another process on %v?)", d.name, path, d.local)
	}
	if err != nil {
		return fmt.Errorf("device %s: publish counters: %w", d.name, err)
	}
	p := &publisher{ln: ln}
	d.pubMu.Lock()
	defer d.pubMu.Unlock()
	if d.pubClosed {
		ln.Close()
		return fmt.Errorf("device %s: publish counters: the device is closed", d.name)
	}
	if d.pub != nil {
		ln.Close()
		return fmt.Errorf("device %s: already publishing on %s", d.name, d.pub.ln.Path())
	}
	d.pub = p
	p.done.Add(1)
	go d.servePublished(p)
	return nil
}

func (d *Device) servePublished(p *publisher) {
	defer p.done.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		_ = c.SetWriteDeadline(time.Now().Add(publishWriteTimeout))
		w := bufio.NewWriter(c)
		fmt.Fprintf(w, "%s\nname %s\naddr %v\npid %d\ncomm %s\n", publishMagic, d.name, d.local, os.Getpid(), processName())
		for _, k := range d.Counters.Snapshot() {
			fmt.Fprintf(w, "counter %s %d\n", k.Name, k.Value)
		}
		writeResources(w, d.Resources())
		_ = w.Flush()
		c.Close()
	}
}

// Unpublish stops publishing (Publish may start again): the socket is
// closed and removed once its goroutine is done.
func (d *Device) Unpublish() { d.unpublish(false) }

// stopPublishing is Unpublish for good, by Close.
func (d *Device) stopPublishing() { d.unpublish(true) }

func (d *Device) unpublish(forGood bool) {
	d.pubMu.Lock()
	p := d.pub
	d.pub = nil
	d.pubClosed = d.pubClosed || forGood // no Publish after Close: nothing would stop it
	d.pubMu.Unlock()
	if p == nil {
		return
	}
	p.ln.Close() // removes the socket file too
	p.done.Wait()
}

// Published is what a device publishes: its name, address, process,
// counters and live objects.
type Published struct {
	Name      string
	Addr      netip.AddrPort
	PID       int
	Comm      string // the process's name, as /proc/PID/comm has it
	Counters  []Counter
	Resources Resources
}

// ReadPublished reads the snapshot a device publishes at path, if the
// run directory and the socket are the user's (rundir.Dial). A stale
// socket is removed; its error wraps syscall.ECONNREFUSED.
func ReadPublished(ctx context.Context, path string) (*Published, error) {
	c, err := rundir.Dial(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("read counters: %w", err)
	}
	return readSnapshot(ctx, c, path)
}

// ReadPublishedAs is ReadPublished for a reader that trusts user uid's
// sockets in uid's run directory (root reading another user's: see
// rundir.DialAs).
func ReadPublishedAs(ctx context.Context, path string, uid int) (*Published, error) {
	c, err := rundir.DialAs(ctx, path, uid)
	if err != nil {
		return nil, fmt.Errorf("read counters: %w", err)
	}
	return readSnapshot(ctx, c, path)
}

// readSnapshot reads one snapshot from c, every count and length bounded,
// and closes c.
func readSnapshot(ctx context.Context, c net.Conn, path string) (*Published, error) {
	defer c.Close()
	if t, ok := ctx.Deadline(); ok {
		_ = c.SetReadDeadline(t)
	}
	// One byte past the bound tells a snapshot that is too large from one
	// that fits.
	lr := &io.LimitedReader{R: c, N: maxPublishedBytes + 1}
	s := bufio.NewScanner(lr)
	if !s.Scan() || s.Text() != publishMagic {
		return nil, fmt.Errorf("read counters: %s does not speak %q", path, publishMagic)
	}
	p := &Published{}
	for s.Scan() {
		kind, val, ok := strings.Cut(s.Text(), " ")
		if !ok {
			return nil, fmt.Errorf("read counters from %s: bad line %q", path, truncated(s.Text()))
		}
		var err error
		switch kind {
		case "name":
			p.Name = val
		case "comm":
			p.Comm = val
		case "addr":
			p.Addr, err = netip.ParseAddrPort(val)
		case "pid":
			p.PID, err = strconv.Atoi(val)
		case "counter":
			err = p.addCounter(val)
		default:
			err = p.Resources.add(kind, val)
		}
		if err != nil {
			return nil, fmt.Errorf("read counters from %s: %w", path, err)
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("read counters from %s: %w", path, err)
	}
	if lr.N == 0 {
		return nil, fmt.Errorf("read counters from %s: the snapshot is larger than %d bytes", path, maxPublishedBytes)
	}
	return p, nil
}

// addCounter reads a counter line's "name value".
func (p *Published) addCounter(line string) error {
	name, val, ok := strings.Cut(line, " ")
	if !ok {
		return fmt.Errorf("bad counter line %q", truncated(line))
	}
	if len(p.Counters) == maxPublishedCounters {
		return fmt.Errorf("more than %d counters", maxPublishedCounters)
	}
	v, err := strconv.ParseUint(val, 10, 64)
	if err != nil {
		return fmt.Errorf("counter %s: %w", truncated(name), err)
	}
	p.Counters = append(p.Counters, Counter{Name: name, Value: v})
	return nil
}

// truncated shortens what a publisher sent for an error message.
func truncated(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
