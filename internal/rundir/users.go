package rundir

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Dir is a run directory and the user it must belong to.
type Dir struct {
	Path string
	UID  int
}

// runtimeRoot holds the users' XDG runtime directories (/run/user/UID),
// as pam_systemd makes them.
var runtimeRoot = "/run/user"

// Dirs returns the run directories a reader lists: the user's own
// (Path()) and, for root, every other user's where Path puts it for a
// user who sets no GOROCE_RUN_DIR: /run/user/UID/goroce and goroce-UID in
// the temporary directory. Each is checked against its own user, never
// against root: root lists every user's sockets, as smc-tools' smcss does,
// but believes a user's directory and sockets only if that user owns and
// serves them. A user's GOROCE_RUN_DIR elsewhere is not found.
func Dirs() []Dir {
	me := myUID()
	dirs := []Dir{{Path: filepath.Clean(Path()), UID: me}}
	if me != 0 {
		return dirs
	}
	seen := map[string]bool{dirs[0].Path: true}
	add := func(path string, uid int) {
		path = filepath.Clean(path)
		if uid != me && !seen[path] {
			seen[path] = true
			dirs = append(dirs, Dir{Path: path, UID: uid})
		}
	}
	if ents, err := os.ReadDir(runtimeRoot); err == nil {
		for _, e := range ents {
			if uid, err := strconv.Atoi(e.Name()); err == nil && uid > 0 {
				add(filepath.Join(runtimeRoot, e.Name(), "goroce"), uid)
			}
		}
	}
	if ents, err := os.ReadDir(os.TempDir()); err == nil {
		for _, e := range ents {
			num, ok := strings.CutPrefix(e.Name(), "goroce-")
			if uid, err := strconv.Atoi(num); ok && err == nil && uid > 0 {
				add(filepath.Join(os.TempDir(), e.Name()), uid)
			}
		}
	}
	sort.SliceStable(dirs[1:], func(i, j int) bool { return dirs[1+i].UID < dirs[1+j].UID })
	return dirs
}

// Sockets lists the socket files in d whose names match (all, if match
// is nil), sorted, once d.Path is checked as d.UID's. A directory that
// does not exist has none.
func Sockets(d Dir, match func(name string) bool) ([]string, error) {
	if err := check(d.Path, d.UID); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	ents, err := os.ReadDir(d.Path)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range ents {
		if e.Type()&fs.ModeSocket != 0 && (match == nil || match(e.Name())) {
			paths = append(paths, filepath.Join(d.Path, e.Name()))
		}
	}
	return paths, nil
}

// DialAs is Dial for a reader that trusts user uid's directory and
// sockets: root reading a user's (see Dirs).
func DialAs(ctx context.Context, path string, uid int) (net.Conn, error) {
	return dialAs(ctx, path, uid)
}
