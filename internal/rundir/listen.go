package rundir

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrInUse reports a socket name that a live process answers on.
var ErrInUse = errors.New("already answers for a live process")

// staleDialTimeout bounds the probe that tells a live socket from a stale
// one.
const staleDialTimeout = time.Second

// Listener is a socket the process publishes in the run directory.
type Listener struct {
	ln      *net.UnixListener
	path    string
	bound   fs.FileInfo // the socket file as bound: Close removes only it
	refused atomic.Uint64
	once    sync.Once
}

// live is the process's listeners, for the signal handlers to remove.
var live struct {
	sync.Mutex
	ls map[*Listener]struct{}
}

// Listen publishes the socket name in dir ("": Path()), which Ensure
// creates and checks. A stale socket of the user's on that name is
// removed; a live one is ErrInUse; anything else there (another user's
// socket, a file that is not a socket) is refused.
func Listen(dir, name string) (*Listener, error) {
	dir, err := Ensure(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name)
	if err := clearStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false) // Close removes the file only if it is still ours
	bound, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return nil, err
	}
	l := &Listener{ln: ln, path: path, bound: bound}
	live.Lock()
	if live.ls == nil {
		live.ls = map[*Listener]struct{}{}
	}
	live.ls[l] = struct{}{}
	live.Unlock()
	return l, nil
}

// clearStale makes way for a socket at path: nothing there, or a socket
// of the user's that nobody answers on (removed).
func clearStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := checkSocket(path, fi, myUID()); err != nil {
		return err
	}
	c, err := net.DialTimeout("unix", path, staleDialTimeout)
	if err == nil {
		c.Close()
		return fmt.Errorf("%s %w", path, ErrInUse)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("probe the socket already at %s: %w", path, err)
	}
	removeIfSame(path, fi)
	return nil
}

// Path returns the socket's path.
func (l *Listener) Path() string { return l.path }

// Addr returns the socket's address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Accept waits for the next reader of the user's or root's; connections
// of other users are closed and counted (Refused).
func (l *Listener) Accept() (net.Conn, error) {
	me := myUID()
	for {
		c, err := l.ln.AcceptUnix()
		if err != nil {
			return nil, err
		}
		uid, err := peerUIDOf(c)
		if err == nil && (uid == me || uid == 0) {
			return c, nil
		}
		l.refused.Add(1)
		c.Close()
	}
}

// Refused returns how many connections of other users Accept closed.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// Close stops listening and removes the socket file, if it is still the
// one Listen bound.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		live.Lock()
		delete(live.ls, l)
		live.Unlock()
		err = l.ln.Close()
		removeIfSame(l.path, l.bound)
	})
	return err
}

// removeLive removes the socket files of every open listener, for a
// process that a signal ends before it closes them.
func removeLive() {
	live.Lock()
	defer live.Unlock()
	for l := range live.ls {
		removeIfSame(l.path, l.bound)
	}
}
