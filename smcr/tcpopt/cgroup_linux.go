package tcpopt

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ownCgroup returns the directory of the calling process's own cgroup v2.
// Neither where cgroup v2 is mounted nor the process's place in it can be
// assumed: on hybrid systems /sys/fs/cgroup is a tmpfs of v1 controllers
// and v2 lives at /sys/fs/cgroup/unified; under systemd a process sits in
// its service's cgroup. So the mount comes from /proc/self/mountinfo
// (fstype cgroup2) and the path from the "0::" line of /proc/self/cgroup.
func ownCgroup() (string, error) {
	mi, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	defer mi.Close()
	mnt, root, err := cgroup2Mount(mi)
	if err != nil {
		return "", err
	}
	rel, err := ownCgroupPath()
	if err != nil {
		return "", err
	}
	return joinCgroup(mnt, root, rel)
}

// ownCgroupPath is the process's cgroup v2 path, from /proc/self/cgroup.
func ownCgroupPath() (string, error) {
	cg, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	defer cg.Close()
	return cgroup2Path(cg)
}

// errNoCgroup2 is a mount table without cgroup v2 (ErrUnsupported).
var errNoCgroup2 = fmt.Errorf("%w", ErrUnsupported)

// openOwnCgroup opens the process's own cgroup v2 directory; name is its
// path, for messages. Where the process's mount table shows no cgroup v2
// but is a private one (its mount namespace is not init's), as in the
// namespace `ip netns exec` makes, whose fresh /sys hides the host's
// /sys/fs/cgroup, it mounts cgroup v2 itself: at a directory of its own,
// in its own mount namespace only (ip netns exec's mounts do not
// propagate to the host), and detaches the mount again once the
// directory is open (the open directory is all an attachment needs).
// The cgroup hierarchy is the host's either way: the programs attach
// where they would have outside.
func openOwnCgroup() (dir *os.File, name string, err error) {
	name, err = ownCgroup()
	if err == nil {
		dir, err = os.Open(name)
		if err != nil {
			return nil, name, fmt.Errorf("%w: open cgroup %s: %v", ErrUnsupported, name, err)
		}
		return dir, name, nil
	}
	if !errors.Is(err, errNoCgroup2) || !privateMountNamespace() {
		return nil, "", err
	}
	return mountOwnCgroup(err)
}

// mountOwnCgroup mounts cgroup v2 at a fresh directory, opens the
// process's cgroup under it, and detaches the mount and removes the
// directory. why is the error to report if it cannot.
func mountOwnCgroup(why error) (*os.File, string, error) {
	hint := "; under ip netns exec, enter only the network namespace instead (nsenter --net=/run/netns/NAME)"
	rel, err := ownCgroupPath()
	if err != nil {
		return nil, "", err
	}
	tmp, err := os.MkdirTemp("", "goroce-cgroup2-")
	if err != nil {
		return nil, "", fmt.Errorf("%v, and mounting one privately failed: %v%s", why, err, hint)
	}
	defer os.Remove(tmp)
	if err := unix.Mount("none", tmp, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, "", fmt.Errorf("%v, and mounting one privately at %s failed: %v%s", why, tmp, err, hint)
	}
	defer unix.Unmount(tmp, unix.MNT_DETACH)
	name, err := joinCgroup(tmp, "/", rel)
	if err != nil {
		return nil, "", err
	}
	dir, err := os.Open(name)
	if err != nil {
		return nil, name, fmt.Errorf("%w: open cgroup %s (mounted privately): %v", ErrUnsupported, name, err)
	}
	return dir, rel + " (cgroup v2 mounted privately: this mount namespace hid the host's)", nil
}

// privateMountNamespace reports whether the process's mount namespace is
// one of its own, so that mounting in it changes nothing outside: the one
// `ip netns exec NAME` makes (it unshares the mount namespace and mounts
// a sysfs named NAME on /sys, for the network namespace /run/netns/NAME,
// the process's), or, where init's can be read, any other than init's.
func privateMountNamespace() bool {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err == nil {
		if name, ok := sysfsSource(mi); ok && !strings.Contains(name, "/") {
			ours, err1 := os.Stat("/proc/self/ns/net")
			named, err2 := os.Stat("/run/netns/" + name)
			if err1 == nil && err2 == nil && os.SameFile(ours, named) {
				return true
			}
		}
	}
	mine, err1 := os.Readlink("/proc/self/ns/mnt")
	inits, err2 := os.Readlink("/proc/1/ns/mnt")
	return err1 == nil && err2 == nil && mine != inits
}

// sysfsSource returns the source of the sysfs mounted on /sys in a
// mountinfo file (ip netns exec names it after the network namespace).
func sysfsSource(mountinfo []byte) (string, bool) {
	name, found := "", false
	for _, line := range strings.Split(string(mountinfo), "\n") {
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 5 || sep+2 >= len(f) || unescapeMount(f[4]) != "/sys" || f[sep+1] != "sysfs" {
			continue
		}
		name, found = f[sep+2], true // the last mount on /sys is the visible one
	}
	return name, found
}

// cgroup2Mount returns the mount point and mount root of the first
// cgroup2 file system in a mountinfo file (proc(5)): fields are
// "id parent major:minor root mountpoint options [optional...] - fstype
// source superoptions", with blanks in paths written as octal escapes.
func cgroup2Mount(r io.Reader) (mountpoint, root string, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := -1
		for i, s := range f {
			if s == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+1 >= len(f) || f[sep+1] != "cgroup2" {
			continue
		}
		return unescapeMount(f[4]), unescapeMount(f[3]), nil
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("%w: reading mountinfo: %v", ErrUnsupported, err)
	}
	return "", "", fmt.Errorf("%w: no cgroup v2 file system is mounted (no cgroup2 line in /proc/self/mountinfo): mount one (mount -t cgroup2 none /sys/fs/cgroup/unified) or run on a host that has one", errNoCgroup2)
}

// cgroup2Path returns the path of the unified (v2) hierarchy in a
// /proc/PID/cgroup file: the line "0::/path".
func cgroup2Path(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			if !strings.HasPrefix(p, "/") {
				return "", fmt.Errorf("%w: cgroup v2 path %q is not absolute", ErrUnsupported, p)
			}
			return p, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("%w: reading /proc/self/cgroup: %v", ErrUnsupported, err)
	}
	return "", fmt.Errorf("%w: the process is in no cgroup v2 (no 0:: line in /proc/self/cgroup)", ErrUnsupported)
}

// joinCgroup maps the process's cgroup path onto the mount: a mount may
// show only a subtree (its root field), and the process must be inside it.
func joinCgroup(mountpoint, root, rel string) (string, error) {
	if strings.HasSuffix(rel, " (deleted)") {
		return "", fmt.Errorf("%w: the process's cgroup %s was removed", ErrUnsupported, rel)
	}
	root, rel = path.Clean(root), path.Clean(rel)
	sub := rel
	if root != "/" {
		var ok bool
		if sub, ok = strings.CutPrefix(rel, root); !ok || (sub != "" && sub[0] != '/') {
			return "", fmt.Errorf("%w: cgroup %s is outside the cgroup2 mount at %s (root %s)", ErrUnsupported, rel, mountpoint, root)
		}
	}
	return path.Join(mountpoint, sub), nil
}

// unescapeMount undoes the octal escapes (\040 for a blank, \011, \012,
// \134) the kernel writes in mountinfo paths.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
