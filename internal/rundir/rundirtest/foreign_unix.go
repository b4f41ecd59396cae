//go:build unix

package rundirtest

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Nobody is the uid (and gid) ForeignSocket's server runs as.
const Nobody = 65534

// ForeignSocket puts at path a socket that answers reply and that a
// process of uid Nobody serves, while the socket file belongs to the
// test's user: only the peer's credentials tell it from the user's own.
// It needs root (to run a process as another user and to chown the
// socket); without root the test is skipped.
func ForeignSocket(t testing.TB, path, reply string) *Process {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	// The child, running as nobody, must be able to run a copy of this
	// binary and to bind in a directory of its own.
	tmp := t.TempDir()
	for _, d := range []string{tmp, filepath.Dir(tmp)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(tmp, "child")
	copyExecutable(t, bin)
	own := filepath.Join(tmp, "nobody")
	if err := os.Mkdir(own, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(own, Nobody, Nobody); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(own, "s.sock")
	p := start(t, bin, orders{Mode: "serve", Path: sock, Reply: reply},
		&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: Nobody, Gid: Nobody}})
	// Root moves the socket into place and gives it to the test's user;
	// the bound socket stays the child's.
	if err := os.Rename(sock, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(path, os.Geteuid(), os.Getegid()); err != nil {
		t.Fatal(err)
	}
	return p
}

// ForeignPublisher runs a publisher (rundir.Listen) of name, answering
// reply, as user Nobody whose temporary directory ($TMPDIR) is tmp and
// who sets no GOROCE_RUN_DIR or XDG_RUNTIME_DIR: its run directory is
// tmp/goroce-65534, which it creates. It needs root; without root the
// test is skipped.
func ForeignPublisher(t testing.TB, tmp, name, reply string) *Process {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	for _, d := range []string{tmp, filepath.Dir(tmp)} {
		if err := os.Chmod(d, 0o1777); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(tmp, "child")
	copyExecutable(t, bin)
	return start(t, bin, orders{Mode: "publish", Name: name, Reply: reply},
		&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: Nobody, Gid: Nobody}},
		"TMPDIR="+tmp, "GOROCE_RUN_DIR=", "XDG_RUNTIME_DIR=")
}

// copyExecutable copies this test binary to dst, executable by all.
func copyExecutable(t testing.TB, dst string) {
	t.Helper()
	src, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
