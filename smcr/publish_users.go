package smcr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

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

// ReadRunning reads every process that publishes its SMC sockets, sorted
// by PID: in dir alone, or with dir "" in the run directories a reader
// lists (the user's own; for root every user's, each believed only as its
// owner's: see rundir.Dirs). A socket whose process is gone is removed and
// skipped; any other failure goes to report and the process is skipped.
// The reader's own run directory failing its check is an error (wrapping
// rundir.ErrUntrusted when it cannot be trusted).
func ReadRunning(dir string, timeout time.Duration, report func(error)) ([]*Published, error) {
	dirs := rundir.Dirs()
	if dir != "" {
		dirs = []rundir.Dir{{Path: dir, UID: os.Geteuid()}}
	}
	var procs []*Published
	for i, d := range dirs {
		paths, err := PublishedPathsOf(d)
		if err != nil {
			if i == 0 {
				return nil, fmt.Errorf("read the run directory: %w", err)
			}
			report(err)
			continue
		}
		for _, path := range paths {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			p, err := ReadPublishedAs(ctx, path, d.UID)
			cancel()
			switch {
			case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, fs.ErrNotExist):
				continue // its process is gone
			case err != nil:
				report(err)
				continue
			}
			procs = append(procs, p)
		}
	}
	sort.SliceStable(procs, func(i, j int) bool { return procs[i].PID < procs[j].PID })
	return procs, nil
}
