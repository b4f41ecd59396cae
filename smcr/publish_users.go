package smcr

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/goroce/goroce/internal/rundir"
)

// PublishedPathsOf lists the publishing sockets in d, checked as d.UID's
// (rundir.Sockets), sorted by PID: what root reads of each user's run
// directory.
func PublishedPathsOf(d rundir.Dir) ([]string, error) {
	pidOf := func(name string) int {
		num, ok := strings.CutPrefix(name, "smc-")
		if num, ok = strings.CutSuffix(num, ".sock"); !ok {
			return 0
		}
		pid, err := strconv.Atoi(num)
		if err != nil || pid <= 0 {
			return 0
		}
		return pid
	}
	paths, err := rundir.Sockets(d, func(name string) bool { return pidOf(name) > 0 })
	if err != nil {
		return nil, err
	}
	sort.SliceStable(paths, func(i, j int) bool { return pidOf(filepath.Base(paths[i])) < pidOf(filepath.Base(paths[j])) })
	return paths, nil
}

// ReadPublishedAs is ReadPublished for a reader that trusts user uid's
// directory and sockets: root reading a user's.
func ReadPublishedAs(ctx context.Context, path string, uid int) (*Published, error) {
	c, err := rundir.DialAs(ctx, path, uid)
	if err != nil {
		return nil, fmt.Errorf("read SMC sockets: %w", err)
	}
	defer c.Close()
	if t, ok := ctx.Deadline(); ok {
		_ = c.SetReadDeadline(t)
	}
	p, err := readSnapshot(c)
	if err != nil {
		return nil, fmt.Errorf("read SMC sockets from %s: %w", path, err)
	}
	return p, nil
}
