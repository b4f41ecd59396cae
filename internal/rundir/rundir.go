// Package rundir is the goroce run directory: where a process publishes
// what other processes of its user read (a device's counters for
// roce-devinfo, the SMC sockets for smcss), as Unix sockets.
//
// The directory is $GOROCE_RUN_DIR, else $XDG_RUNTIME_DIR/goroce, else
// goroce-UID in the system's temporary directory. Like ssh's and tmux's
// own, it is trusted only if it is a directory (not a symbolic link) owned
// by the process's user and writable by nobody else: whoever can write to
// it can hide a process from smcss, serve a fake listing, or take a
// device's counter socket. A publisher creates it (mode 0700) if missing;
// a directory that fails the check is refused, with an error that says
// what is wrong and what to do.
//
// A socket in it is trusted only if it is owned by the user and the
// process serving it runs as the user too (the peer's credentials, SO_PEERCRED
// on Linux); a publisher answers only its own user and root. A socket
// nobody listens on (its process died, even by SIGKILL) is stale: a
// publisher starting on its name removes it, and so does a reader that
// meets it. A publisher removes only the socket file it bound, and
// ExitOnSignal or NotifyContext remove the process's sockets when SIGINT
// or SIGTERM ends it.
//
// Root is no exception: it uses its own run directory and trusts the
// sockets root serves. Listing every user's sockets, as smc-tools' smcss
// does for root, would walk the users' run directories, each checked
// against its owner's uid (check and dialAs take the owner as a
// parameter); the publishers already answer root.
//
// Where the operating system cannot say who owns a file or serves a
// socket (see creds_other.go), every directory is refused: sharing is off.
package rundir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrUntrusted marks a run directory or socket that another user could
// have made or may control.
var ErrUntrusted = errors.New("not trusted")

// The operating system's answers, replaceable by tests that cannot be
// another user: who owns a file, who the process is.
var (
	fileOwnerOf = fileOwner
	myUID       = os.Geteuid
)

// Path returns the run directory, unchecked: $GOROCE_RUN_DIR, else
// $XDG_RUNTIME_DIR/goroce, else goroce-UID in the temporary directory.
func Path() string {
	if d := os.Getenv("GOROCE_RUN_DIR"); d != "" {
		return d
	}
	// The XDG base directory spec says to ignore a relative path.
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "goroce")
	}
	return filepath.Join(os.TempDir(), "goroce-"+strconv.Itoa(os.Geteuid()))
}

// Ensure returns dir ("": Path()), created with mode 0700 if missing,
// after checking that it can be trusted.
func Ensure(dir string) (string, error) {
	if dir == "" {
		dir = Path()
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		// If someone makes dir between the Lstat and here, MkdirAll fails
		// with EEXIST and check judges what they made.
		if err := os.MkdirAll(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("create the run directory: %w (set GOROCE_RUN_DIR to a directory you can create)", err)
		}
	}
	return dir, Check(dir)
}

// Check says whether the existing directory dir can be trusted; a missing
// one is an error that wraps fs.ErrNotExist.
func Check(dir string) error { return check(dir, myUID()) }

// check says whether dir can be trusted by user uid.
func check(dir string, uid int) error {
	dir = filepath.Clean(dir) // "link/" would have Lstat follow the link
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("run directory: %w", err)
	}
	const other = "or set GOROCE_RUN_DIR to a directory of your own"
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(dir)
		return untrusted("run directory", dir, fmt.Sprintf("is a symbolic link (to %s), which another user may have planted", target), "remove it "+other)
	case !fi.IsDir():
		return untrusted("run directory", dir, "is not a directory", "remove it "+other)
	}
	owner, err := fileOwnerOf(fi)
	if err != nil {
		return fmt.Errorf("run directory %s: %w", dir, err)
	}
	if owner != uid {
		return untrusted("run directory", dir, fmt.Sprintf("belongs to uid %d, not to you (uid %d)", owner, uid), "remove it (its owner or root can) "+other)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return untrusted("run directory", dir, fmt.Sprintf("has mode %04o: others may write to it, and so replace its sockets", perm), "chmod go-w it, "+other)
	}
	return nil
}

// untrusted is the error for what, at path, that fails the check.
func untrusted(what, path, problem, remedy string) error {
	return fmt.Errorf("%s %s %s: %w; %s", what, path, problem, ErrUntrusted, remedy)
}

// checkSocket says whether the file fi at path can be a socket of user
// uid's.
func checkSocket(path string, fi fs.FileInfo, uid int) error {
	if fi.Mode().Type() != fs.ModeSocket {
		return untrusted("run directory entry", path, "is not a socket", "remove it")
	}
	owner, err := fileOwnerOf(fi)
	if err != nil {
		return fmt.Errorf("socket %s: %w", path, err)
	}
	if owner != uid {
		return untrusted("socket", path, fmt.Sprintf("belongs to uid %d, not to you (uid %d)", owner, uid), "remove it (its owner or root can)")
	}
	return nil
}

// removeIfSame removes the file at path if it is still the one fi
// describes: a socket that a new publisher has bound since is left alone.
func removeIfSame(path string, fi fs.FileInfo) {
	if now, err := os.Lstat(path); err == nil && os.SameFile(now, fi) {
		_ = os.Remove(path)
	}
}

// Printable replaces the control characters of s, text that may quote
// what another process sent (its error, its name), before it reaches a
// terminal.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
}
