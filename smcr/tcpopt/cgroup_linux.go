package tcpopt

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
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
	cg, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	defer cg.Close()
	rel, err := cgroup2Path(cg)
	if err != nil {
		return "", err
	}
	return joinCgroup(mnt, root, rel)
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
	return "", "", fmt.Errorf("%w: no cgroup v2 file system is mounted (no cgroup2 line in /proc/self/mountinfo): mount one (mount -t cgroup2 none /sys/fs/cgroup/unified) or run on a host that has one; under ip netns exec, which mounts a fresh /sys that hides it, enter only the network namespace instead (nsenter --net=/run/netns/NAME)", ErrUnsupported)
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
