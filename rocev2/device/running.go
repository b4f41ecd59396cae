package device

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/goroce/goroce/internal/rundir"
)

// PublishedAddr returns the address a publishing socket's name says its
// device is on (PublishPath's ADDR_PORT.sock), if it is one.
func PublishedAddr(name string) (netip.AddrPort, bool) {
	base, ok := strings.CutSuffix(name, ".sock")
	i := strings.LastIndexByte(base, '_')
	if !ok || i < 0 {
		return netip.AddrPort{}, false
	}
	a, err := netip.ParseAddr(base[:i])
	port, perr := strconv.ParseUint(base[i+1:], 10, 16)
	if err != nil || perr != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a, uint16(port)), true
}

// ReadRunning reads every device published in the run directories a
// reader lists (rundir.Dirs: the user's own, and for root every user's,
// each believed only as its owner's) whose address match accepts (nil:
// all), sorted by address and process. A socket whose process is gone is
// removed and skipped; any other failure goes to report and the device
// is skipped. A run directory that cannot be trusted is an error
// (wrapping rundir.ErrUntrusted) only if it is the reader's own.
func ReadRunning(ctx context.Context, match func(netip.AddrPort) bool, report func(error)) ([]*Published, error) {
	var out []*Published
	for i, d := range rundir.Dirs() {
		paths, err := rundir.Sockets(d, func(name string) bool {
			ap, ok := PublishedAddr(name)
			return ok && (match == nil || match(ap))
		})
		if err != nil {
			if i == 0 {
				return nil, err
			}
			report(err)
			continue
		}
		for _, path := range paths {
			p, err := ReadPublishedAs(ctx, path, d.UID)
			switch {
			case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, fs.ErrNotExist):
				continue // its process is gone
			case err != nil:
				report(err)
				continue
			}
			out = append(out, p)
		}
	}
	sortPublished(out)
	return out, nil
}

func sortPublished(ps []*Published) {
	slices.SortStableFunc(ps, func(a, b *Published) int {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		return cmp.Compare(a.PID, b.PID)
	})
}

// FindPublished returns the path of the socket a device on ap publishes
// on, in the first run directory (rundir.Dirs) that has one, and that
// directory's user; "" if none does.
func FindPublished(ap netip.AddrPort) (path string, uid int) {
	name := filepath.Base(PublishPath("", ap))
	for _, d := range rundir.Dirs() {
		paths, err := rundir.Sockets(d, func(n string) bool { return n == name })
		if err == nil && len(paths) > 0 {
			return paths[0], d.UID
		}
	}
	return "", 0
}
