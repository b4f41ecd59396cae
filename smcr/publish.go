package smcr

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/goroce/goroce/internal/rundir"
	"github.com/goroce/goroce/rocev2/device"
)

// A Linux process's AF_SMC sockets are listed by any other process
// (smc_diag, smcss); goroce's SMC sockets live inside one process. Publish
// closes the gap as device.Publish does for counters: the process answers
// on a Unix socket in the run directory, and smcss reads it there.
//
// The protocol is one snapshot per connection, JSON lines after a magic
// line, then the publisher closes the connection:
//
//	goroce-smc 2
//	{"pid":4242,"uid":1000,"program":"smcat","sockets":2,"linkgroups":1,"stats":true}
//	{"state":"LISTEN","mode":"fallback","signalling":"configured","local":"127.0.0.1:5000",...}
//	{"state":"ACTIVE","role":"server","mode":"smcr-v2",...}
//	{"id":256,"role":"server","type":"SINGLE","version":2,"conns":1,"links":[...]}
//	{"clnt_v1_succ":0,"srv_v2_succ":1,...,"tx_bytes":1000,...}
//
// (the sockets, then the link groups, then the statistics: see
// publish_extra.go)
// The publisher never reads what a client sends. A reader trusts nothing
// it reads: lines, sockets, links per socket and the whole snapshot are
// bounded (a hostile publisher costs a reader a few MiB at most).

const publishMagic = "goroce-smc 2"

const (
	// publishWriteTimeout bounds how long a slow reader can hold the
	// publisher (and so Close) up.
	publishWriteTimeout = time.Second
	// MaxPublishedSockets is the most sockets one snapshot lists; the
	// header says how many more there were.
	MaxPublishedSockets = 10000
	// What a reader accepts at most: the whole snapshot, one line, the
	// links of one socket (Linux's link groups have at most 3).
	maxSnapshotBytes = 8 << 20
	maxLineBytes     = 16 << 10
	maxLinksPerSock  = 8
)

// Published is one process's snapshot of its SMC sockets.
type Published struct {
	PID     int    `json:"pid"`
	UID     int    `json:"uid"`
	Program string `json:"program"`
	// Count is the number of socket lines that follow the header; More
	// the sockets left out beyond MaxPublishedSockets.
	Count   int      `json:"sockets"`
	More    int      `json:"more,omitempty"`
	Sockets []Socket `json:"-"`
	// The link groups and statistics that follow the sockets
	// (publish_extra.go).
	extras
}

// PublishPath is the socket process pid publishes on in dir.
func PublishPath(dir string, pid int) string {
	return filepath.Join(dir, "smc-"+strconv.Itoa(pid)+".sock")
}

// PublishedPaths lists the publishing sockets in dir (those of processes
// that died included: ReadPublished fails on them, and removes them),
// sorted by PID. A missing dir has none; one that another user owns or
// may write to is refused (rundir.Check).
func PublishedPaths(dir string) ([]string, error) {
	return PublishedPathsOf(rundir.Dir{Path: dir, UID: os.Geteuid()})
}

// Publisher answers on a process's publishing socket.
type Publisher struct {
	ln   *rundir.Listener
	done sync.WaitGroup
	once sync.Once
}

// Publish makes the process's SMC sockets readable by other processes of
// the same user on the Unix socket PublishPath(dir, os.Getpid()); dir ""
// means device.RunDir(), which is created (mode 0700) if missing. A
// directory another user owns or may write to is refused, as is a socket
// there that is not the user's. A socket file left by a dead process with
// the same PID is replaced. Close stops publishing and removes the socket.
// One goroutine serves the socket, answering one connection at a time.
// Until then the process's SMC-R devices publish their counters and
// objects in dir too (publishDevices).
func Publish(dir string) (*Publisher, error) {
	if dir == "" {
		dir = device.RunDir()
	}
	path := PublishPath(dir, os.Getpid())
	ln, err := rundir.Listen(dir, filepath.Base(path))
	if errors.Is(err, rundir.ErrInUse) {
		return nil, fmt.Errorf("smcr: publish SMC sockets: %s already answers (this process publishes already)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("smcr: publish SMC sockets: %w", err)
	}
	p := &Publisher{ln: ln}
	p.done.Add(1)
	go p.serve()
	publishDevices(p, dir)
	return p, nil
}

// Path returns the publishing socket's path.
func (p *Publisher) Path() string { return p.ln.Path() }

// Close stops publishing: it closes and removes the socket and waits for
// the publisher's goroutine.
func (p *Publisher) Close() error {
	var err error
	p.once.Do(func() {
		unpublishDevices(p)
		err = p.ln.Close() // removes the socket file too
		p.done.Wait()
	})
	return err
}

func (p *Publisher) serve() {
	defer p.done.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // EMFILE and the like: the next reader may fare better
		}
		_ = c.SetWriteDeadline(time.Now().Add(publishWriteTimeout))
		_ = writeSnapshot(c)
		c.Close()
	}
}

// writeSnapshot writes the process's sockets to w.
func writeSnapshot(w io.Writer) error {
	socks, more := Sockets(MaxPublishedSockets)
	bw := bufio.NewWriter(w)
	h := Published{PID: os.Getpid(), UID: os.Getuid(), Program: filepath.Base(os.Args[0]), Count: len(socks), More: more}
	h.extras = currentExtras()
	fmt.Fprintln(bw, publishMagic)
	enc := json.NewEncoder(bw) // one value per line
	if err := enc.Encode(&h); err != nil {
		return err
	}
	for i := range socks {
		if err := enc.Encode(&socks[i]); err != nil {
			return err
		}
	}
	if err := h.extras.write(enc); err != nil {
		return err
	}
	return bw.Flush()
}

// ReadPublished reads the snapshot a process publishes at path, if the
// run directory and the socket are the user's (rundir.Dial). A stale
// socket is removed; its error wraps syscall.ECONNREFUSED.
func ReadPublished(ctx context.Context, path string) (*Published, error) {
	return ReadPublishedAs(ctx, path, os.Geteuid())
}

// readSnapshot parses a snapshot, every length and count bounded.
func readSnapshot(r io.Reader) (*Published, error) {
	// One byte past the bound tells a snapshot that is too large (and
	// whose last line the limit may have cut) from one that fits.
	lr := &io.LimitedReader{R: r, N: maxSnapshotBytes + 1}
	s := bufio.NewScanner(lr)
	s.Buffer(make([]byte, 0, 4096), maxLineBytes)
	next := func(what string) ([]byte, error) {
		ok := s.Scan()
		switch err := s.Err(); {
		case lr.N == 0:
			return nil, fmt.Errorf("%s: the snapshot is larger than %d bytes", what, maxSnapshotBytes)
		case ok:
			return s.Bytes(), nil
		case errors.Is(err, bufio.ErrTooLong):
			return nil, fmt.Errorf("%s: a line longer than %d bytes", what, maxLineBytes)
		case err != nil:
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return nil, fmt.Errorf("%s: %w", what, io.ErrUnexpectedEOF)
	}
	line, err := next("magic line")
	if err != nil {
		return nil, err
	}
	if string(line) != publishMagic {
		return nil, fmt.Errorf("not a goroce SMC publisher (first line %q, want %q)", truncate(line, 40), publishMagic)
	}
	if line, err = next("header"); err != nil {
		return nil, err
	}
	var p Published
	if err := json.Unmarshal(line, &p); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if p.Count < 0 || p.Count > MaxPublishedSockets || p.More < 0 {
		return nil, fmt.Errorf("header: %d sockets (%d more): out of range 0..%d", p.Count, p.More, MaxPublishedSockets)
	}
	p.Sockets = make([]Socket, 0, min(p.Count, 64))
	for i := range p.Count {
		what := fmt.Sprintf("socket %d of %d", i+1, p.Count)
		if line, err = next(what); err != nil {
			return nil, err
		}
		var sk Socket
		if err := json.Unmarshal(line, &sk); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if len(sk.Links) > maxLinksPerSock {
			return nil, fmt.Errorf("%s: %d links (at most %d)", what, len(sk.Links), maxLinksPerSock)
		}
		p.Sockets = append(p.Sockets, sk)
	}
	if err := p.extras.read(next); err != nil {
		return nil, err
	}
	if s.Scan() || lr.N == 0 {
		return nil, fmt.Errorf("more than the %d sockets the header announced", p.Count)
	}
	return &p, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
