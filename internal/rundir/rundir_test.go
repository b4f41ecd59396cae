package rundir_test

import (
	"context"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/rundir"
	"github.com/goroce/goroce/internal/rundir/rundirtest"
)

func TestPath(t *testing.T) {
	tmpDefault := filepath.Join(os.TempDir(), "goroce-"+strconv.Itoa(os.Geteuid()))
	for _, tc := range []struct {
		name, goroce, xdg, want string
	}{
		{"GOROCE_RUN_DIR wins", "/run/mine", "/run/user/1000", "/run/mine"},
		{"XDG_RUNTIME_DIR next", "", "/run/user/1000", "/run/user/1000/goroce"},
		{"a relative XDG_RUNTIME_DIR is ignored", "", "run/user", tmpDefault},
		{"neither: the temporary directory", "", "", tmpDefault},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOROCE_RUN_DIR", tc.goroce)
			t.Setenv("XDG_RUNTIME_DIR", tc.xdg)
			assert.Equal(t, tc.want, rundir.Path())
		})
	}
}

func TestEnsureCreatesPrivateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "run")
	got, err := rundir.Ensure(dir)
	require.NoError(t, err)
	assert.Equal(t, dir, got)
	fi, err := os.Lstat(dir)
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	assert.Zero(t, fi.Mode().Perm()&0o077, "mode %v", fi.Mode())
	_, err = rundir.Ensure(dir) // an existing good one is fine
	require.NoError(t, err)
}

// untrustedDirs makes the run directories that must be refused, each with
// words its error must have.
func untrustedDirs(t *testing.T) []struct {
	name string
	dir  string
	want string
} {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		d := filepath.Join(base, name)
		require.NoError(t, os.Mkdir(d, 0o700))
		require.NoError(t, os.Chmod(d, mode)) // past the umask
		return d
	}
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(mk("target", 0o700), link))
	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	return []struct {
		name string
		dir  string
		want string
	}{
		{"mode 0777", mk("world", 0o777), "has mode 0777: others may write to it"},
		{"mode 1777 (sticky, as /tmp)", mk("sticky", 0o777|os.ModeSticky), "has mode 0777"},
		{"group-writable", mk("group", 0o770), "has mode 0770"},
		{"world-writable only", mk("other", 0o702), "has mode 0702"},
		{"a symbolic link to a good directory", link, "is a symbolic link (to " + filepath.Join(base, "target") + ")"},
		{"the link, with a trailing slash", link + "/", "is a symbolic link"},
		{"a regular file", file, "is not a directory"},
	}
}

func TestCheckRefusesUntrustedDirectories(t *testing.T) {
	for _, tc := range untrustedDirs(t) {
		t.Run(tc.name, func(t *testing.T) {
			err := rundir.Check(tc.dir)
			require.ErrorIs(t, err, rundir.ErrUntrusted)
			assert.Contains(t, err.Error(), filepath.Clean(tc.dir)+" "+tc.want)
			assert.Contains(t, err.Error(), "GOROCE_RUN_DIR", "says what to do")
			_, err = rundir.Ensure(tc.dir)
			assert.ErrorIs(t, err, rundir.ErrUntrusted)
			_, err = rundir.Listen(tc.dir, "x.sock")
			assert.ErrorIs(t, err, rundir.ErrUntrusted)
		})
	}
	for _, mode := range []os.FileMode{0o700, 0o750, 0o755, 0o500} {
		d := filepath.Join(t.TempDir(), "ok")
		require.NoError(t, os.Mkdir(d, 0o700))
		require.NoError(t, os.Chmod(d, mode))
		assert.NoError(t, rundir.Check(d), "mode %04o: nobody else may write", mode)
	}
	err := rundir.Check(filepath.Join(t.TempDir(), "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// A directory of another user's is refused: for real as root (chown), and
// through the seam otherwise.
func TestCheckRefusesAnotherUsersDirectory(t *testing.T) {
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		other := filepath.Join(dir, "other")
		require.NoError(t, os.Mkdir(other, 0o700))
		require.NoError(t, os.Chown(other, rundirtest.Nobody, rundirtest.Nobody))
		err := rundir.Check(other)
		require.ErrorIs(t, err, rundir.ErrUntrusted)
		assert.Contains(t, err.Error(), "belongs to uid 65534, not to you (uid 0)")
	}
	rundir.FakeOwner(t, everything(someoneElse))
	err := rundir.Check(dir)
	require.ErrorIs(t, err, rundir.ErrUntrusted)
	assert.Contains(t, err.Error(), "belongs to uid "+strconv.Itoa(someoneElse)+", not to you (uid "+strconv.Itoa(os.Geteuid())+")")
	assert.Contains(t, err.Error(), "remove it (its owner or root can) or set GOROCE_RUN_DIR")
}

// staleSocket binds a socket at path and closes it, leaving the file as a
// killed process would.
func staleSocket(t *testing.T, path string) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	require.FileExists(t, path)
}

func dial(t *testing.T, path string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return rundir.Dial(ctx, path)
}

// A stale socket is removed by a reader that meets it and replaced by a
// publisher that starts on its name.
func TestStaleSockets(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.sock")
	staleSocket(t, path)
	_, err := dial(t, path)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.Contains(t, err.Error(), "stale socket")
	assert.NoFileExists(t, path, "the reader removes it")

	staleSocket(t, path)
	l, err := rundir.Listen(dir, "x.sock")
	require.NoError(t, err, "the publisher replaces it")
	c, err := dial(t, path)
	require.NoError(t, err)
	c.Close()

	_, err = rundir.Listen(dir, "x.sock")
	require.ErrorIs(t, err, rundir.ErrInUse, "a live one is not replaced")
	require.NoError(t, l.Close())
	assert.NoFileExists(t, path)
	_, err = dial(t, path)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// A publisher never takes a path that is not its user's socket; it
// removes only the socket file it bound.
func TestListenTakesOnlyItsOwnSockets(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file.sock")
	require.NoError(t, os.WriteFile(file, []byte("mine"), 0o600))
	_, err := rundir.Listen(dir, "file.sock")
	require.ErrorIs(t, err, rundir.ErrUntrusted)
	assert.Contains(t, err.Error(), "is not a socket")
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "mine", string(b), "left alone")

	theirs := filepath.Join(dir, "theirs.sock")
	staleSocket(t, theirs)
	rundir.FakeOwner(t, sockets(someoneElse))
	_, err = rundir.Listen(dir, "theirs.sock")
	require.ErrorIs(t, err, rundir.ErrUntrusted)
	assert.Contains(t, err.Error(), "socket "+theirs+" belongs to uid "+strconv.Itoa(someoneElse))
	assert.FileExists(t, theirs, "not the publisher's to remove, stale or not")
}

func TestCloseRemovesOnlyWhatItBound(t *testing.T) {
	dir := t.TempDir()
	l, err := rundir.Listen(dir, "x.sock")
	require.NoError(t, err)
	// Someone (the user, by hand) replaces the socket; Close must not
	// remove the new one.
	require.NoError(t, os.Remove(l.Path()))
	staleSocket(t, l.Path())
	require.NoError(t, l.Close())
	assert.FileExists(t, l.Path())
}

// A socket that another user serves is refused, even in a good directory
// and with a socket file of the user's: for real as root (a process of
// uid nobody), and through the seam otherwise.
func TestDialRefusesAnotherUsersSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.sock")
	t.Run("another uid serves it", func(t *testing.T) {
		rundirtest.ForeignSocket(t, path, "fake\n")
		_, err := dial(t, path)
		require.ErrorIs(t, err, rundir.ErrUntrusted)
		assert.Contains(t, err.Error(), "is served by uid 65534, not by you (uid 0)")
		assert.FileExists(t, path, "not the reader's to remove")
		require.NoError(t, os.Remove(path))
	})
	t.Run("seam", func(t *testing.T) {
		l, err := rundir.Listen(dir, "y.sock")
		require.NoError(t, err)
		defer l.Close()
		rundir.FakePeers(t, func() int { return 4242 })
		_, err = dial(t, l.Path())
		require.ErrorIs(t, err, rundir.ErrUntrusted)
		assert.Contains(t, err.Error(), "is served by uid 4242")
	})
	t.Run("a socket file of another user's", func(t *testing.T) {
		l, err := rundir.Listen(dir, "z.sock")
		require.NoError(t, err)
		defer l.Close()
		rundir.FakeOwner(t, sockets(someoneElse))
		_, err = dial(t, l.Path())
		require.ErrorIs(t, err, rundir.ErrUntrusted)
		assert.Contains(t, err.Error(), "belongs to uid "+strconv.Itoa(someoneElse))
		assert.Zero(t, l.Refused(), "refused before connecting")
	})
}

// A publisher answers its user and root; others are closed and counted.
func TestAcceptAnswersOnlyItsUserAndRoot(t *testing.T) {
	l, err := rundir.Listen(t.TempDir(), "x.sock")
	require.NoError(t, err)
	defer l.Close()
	peers := []int{4242, 0, os.Geteuid()}
	rundir.FakePeers(t, func() int {
		p := peers[0]
		peers = peers[1:]
		return p
	})
	for range 3 {
		c, err := net.Dial("unix", l.Path()) // queued: Accept takes them in order
		require.NoError(t, err)
		defer c.Close()
	}
	for range 2 {
		c, err := l.Accept()
		require.NoError(t, err)
		c.Close()
	}
	assert.Equal(t, uint64(1), l.Refused())
	assert.Empty(t, peers)
}

// SIGINT and SIGTERM end a publishing process with 128+signal and no
// socket left; SIGKILL leaves it, and it is stale: a reader removes it.
func TestSignals(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		sig    os.Signal
		notify bool
		status int
	}{
		{"ExitOnSignal, SIGTERM", syscall.SIGTERM, false, 143},
		{"ExitOnSignal, SIGINT", syscall.SIGINT, false, 130},
		{"NotifyContext, SIGTERM", syscall.SIGTERM, true, 143},
		{"NotifyContext, SIGINT", syscall.SIGINT, true, 130},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "p.sock")
			p := rundirtest.Publisher(t, dir, "p.sock", tc.notify)
			require.FileExists(t, path)
			p.Signal(t, tc.sig)
			if tc.notify {
				p.WaitLine(t, "stopping") // the program shuts down itself
				p.CloseStdin()
			}
			assert.Equal(t, tc.status, p.Exit(t))
			assert.NoFileExists(t, path)
		})
	}
	t.Run("NotifyContext, a second signal", func(t *testing.T) {
		path := filepath.Join(dir, "p.sock")
		p := rundirtest.Publisher(t, dir, "p.sock", true)
		p.Signal(t, syscall.SIGINT)
		p.WaitLine(t, "stopping")
		p.Signal(t, syscall.SIGTERM) // still shutting down: exit at once
		assert.Equal(t, 143, p.Exit(t))
		assert.NoFileExists(t, path)
	})
	t.Run("SIGKILL", func(t *testing.T) {
		path := filepath.Join(dir, "p.sock")
		p := rundirtest.Publisher(t, dir, "p.sock", false)
		p.Signal(t, syscall.SIGKILL)
		assert.Equal(t, -1, p.Exit(t))
		require.FileExists(t, path, "nothing runs at SIGKILL")
		_, err := dial(t, path)
		require.ErrorIs(t, err, syscall.ECONNREFUSED)
		assert.NoFileExists(t, path, "the reader removes the stale socket")

		p = rundirtest.Publisher(t, dir, "p.sock", false)
		p.Signal(t, syscall.SIGKILL)
		p.Exit(t)
		q := rundirtest.Publisher(t, dir, "p.sock", false) // replaces the stale one
		c, err := dial(t, path)
		require.NoError(t, err)
		c.Close()
		q.CloseStdin()
		assert.Equal(t, 0, q.Exit(t))
		assert.NoFileExists(t, path)
	})
}

// someoneElse is a uid that is not the test's.
var someoneElse = os.Geteuid() + 1

// everything makes every file look owned by uid.
func everything(uid int) func(fs.FileInfo) int { return func(fs.FileInfo) int { return uid } }

// sockets makes sockets look owned by uid, other files by the test's user.
func sockets(uid int) func(fs.FileInfo) int {
	return func(fi fs.FileInfo) int {
		if fi.Mode().Type() == fs.ModeSocket {
			return uid
		}
		return os.Geteuid()
	}
}
