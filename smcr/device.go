package smcr

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/udp"
	"github.com/goroce/goroce/rocev2/device"
	"github.com/goroce/goroce/smcr/smcwire"
)

// An smcDevice is one goroce device of the process's SMC-R stacks (Linux's
// smc_ib_device): the device, its completion design, and the links on it.
// Stacks that name the same address share it; the last one to let go
// closes it. A stack with several devices offers the others as alternate
// paths: a link group's second link lives on another device, and when the
// first one's path is gone its connections move there.
type smcDevice struct {
	key    netip.AddrPort
	dev    *device.Device
	be     backend.Backend // as opened, before Config.WrapBackend
	cqs    cq.Allocator
	design CQDesign
	gid    device.GID // index 1: the RoCEv2 GID of the device's address
	mac    smcwire.MAC
	refs   int // under devices' lock

	mu    sync.Mutex
	links map[uint32]*link // by QP number: completions that name no handler, and a device that goes down
	// gone: a send failed because the device's address is gone (as a
	// port error on Linux); no link is added on it until a look at the
	// interfaces finds the address again (recheck), the first after
	// downHold, at downUntil (mono), and every downHold after it. A
	// device up again on a timer alone would take a link that cannot
	// send, or answer an ADD_LINK with it where its other device made an
	// asymmetric link.
	gone      atomic.Bool
	downUntil atomic.Int64
	downHold  time.Duration // deviceDownHold, or a test's
	assigned  func(netip.Addr) bool
	lastCheck atomic.Int64 // mono of the last look at the interfaces
}

var devices = struct {
	sync.Mutex
	m map[netip.AddrPort]*smcDevice
}{m: map[netip.AddrPort]*smcDevice{}}

// deviceDownHold is how long a device whose sends failed for want of its
// address counts as down before a look at the interfaces, and how often
// it looks again until the address is back.
const deviceDownHold = 5 * time.Second

// acquireDevice returns the device at key, opening it on first use, with
// one more reference. devices' lock is held.
func acquireDeviceLocked(key netip.AddrPort, cfg *Config) (*smcDevice, error) {
	if d := devices.m[key]; d != nil {
		if d.design.String() != cfg.CQ.String() {
			return nil, errDesign(key, d.design)
		}
		d.refs++
		return d, nil
	}
	d, err := openDevice(key, cfg)
	if err != nil {
		return nil, err
	}
	d.refs = 1
	devices.m[key] = d
	return d, nil
}

// errDesign says that a device already runs another completion design.
func errDesign(key netip.AddrPort, design CQDesign) error {
	return fmt.Errorf("smcr: device %v already runs the %v CQ design; a process uses one design per device", key, design)
}

// releaseLocked drops a reference; the last one closes the device.
// devices' lock is held.
func (d *smcDevice) releaseLocked() {
	if d.refs--; d.refs > 0 {
		return
	}
	delete(devices.m, d.key)
	d.cqs.Close()
	d.dev.Close()
}

func openDevice(key netip.AddrPort, cfg *Config) (*smcDevice, error) {
	open := cfg.Backend
	if open == nil {
		open = openUDP
	}
	be, err := open(key)
	if err != nil {
		return nil, fmt.Errorf("smcr: open the goroce device on %v (is another process using that address and port?): %w", key, err)
	}
	d := &smcDevice{key: key, be: be, design: cfg.CQ, links: map[uint32]*link{}, downHold: deviceDownHold}
	if cfg.hooks.deviceDownHold > 0 {
		d.downHold = cfg.hooks.deviceDownHold
	}
	d.assigned = addrAssigned
	if cfg.hooks.addrAssigned != nil {
		d.assigned = cfg.hooks.addrAssigned
	}
	b := be
	if cfg.WrapBackend != nil {
		b = cfg.WrapBackend(b)
	}
	b = watchBackend(b, d)
	// DeferACKs: a connection's reader answers from its own goroutine, so
	// the ACK of what it received waits for that answer (or HoldLimit) and
	// leaves in its system call (measured with smc-bench, redis GET at 64
	// clients: 30 instead of 37 CPU µs per request).
	dev, err := device.New(device.Config{Name: "goroce-smc", Backend: b, DeferACKs: true})
	if err != nil {
		be.Close()
		return nil, err
	}
	d.dev = dev
	d.cqs = cfg.CQ.NewAllocator(dev, d.onOrphan)
	d.gid, _ = dev.GID(1)
	d.mac = dev.MAC()
	d.publish()
	return d, nil
}

// pathTo says how the device reaches the device at dst: the backend's own
// word where it has one (the shared-memory link's LinkTo), else "udp" for
// a UDP socket.
func (d *smcDevice) pathTo(dst netip.AddrPort) string {
	if l, ok := d.be.(interface{ LinkTo(netip.AddrPort) string }); ok {
		p := l.LinkTo(dst)
		if f, ok := d.be.(interface{ Fallback() backend.Backend }); ok && p == "fallback" {
			if _, ok := f.Fallback().(*udp.Backend); ok {
				return "udp"
			}
		}
		return p
	}
	if _, ok := d.be.(*udp.Backend); ok {
		return "udp"
	}
	return ""
}

// openUDP is the default backend: a UDP socket on the device's address.
func openUDP(addr netip.AddrPort) (backend.Backend, error) { return udp.Open(udp.Config{Addr: addr}) }

// addLink and removeLink keep the device's table of its links.
func (d *smcDevice) addLink(l *link) {
	d.mu.Lock()
	d.links[l.qp.QPN()] = l
	d.mu.Unlock()
}

func (d *smcDevice) removeLink(l *link) {
	d.mu.Lock()
	if d.links[l.qp.QPN()] == l {
		delete(d.links, l.qp.QPN())
	}
	d.mu.Unlock()
}

// linkGroups is how many link groups have a link on the device.
func (d *smcDevice) linkGroups() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[*linkGroup]bool{}
	for _, l := range d.links {
		seen[l.lgr] = true
	}
	return len(seen)
}

// onOrphan takes a completion that names no handler (a failed unsignaled
// RDMA WRITE's, in a design that tags none): its link is of no further
// use, as with any failed work request.
func (d *smcDevice) onOrphan(wc *cq.WC) {
	if wc.Status.OK() {
		return
	}
	d.mu.Lock()
	l := d.links[wc.QPNum]
	d.mu.Unlock()
	if l != nil {
		l.fail(fmt.Errorf("smcr: a work request on the link completed with %v", wc.Status))
	}
}

// up reports whether the device is not taken to be down.
func (d *smcDevice) up() bool { return !d.gone.Load() }

// recheck looks whether a device that went down has its address again,
// once downHold has passed since the last look; then it is up. Without
// any lock held: the look at the interfaces is a system call. The
// groups' workers call it on their ticks (at most one of them looks).
func (d *smcDevice) recheck() {
	if !d.gone.Load() {
		return
	}
	now, until := mono(), d.downUntil.Load()
	if now < until || !d.downUntil.CompareAndSwap(until, now+int64(d.downHold)) {
		return
	}
	if d.assigned(d.key.Addr()) {
		d.gone.Store(false)
	}
}

// wentDown takes every link on the device down: its address is gone, so
// nothing it sends arrives, and its connections are better off on
// another link at once than after TEST_LINK finds out.
func (d *smcDevice) wentDown(err error) {
	d.downUntil.Store(mono() + int64(d.downHold))
	d.gone.Store(true)
	d.mu.Lock()
	ls := make([]*link, 0, len(d.links))
	for _, l := range d.links {
		ls = append(ls, l)
	}
	d.mu.Unlock()
	for _, l := range ls {
		l.fail(fmt.Errorf("smcr: the device on %v cannot send (%v): its address is gone", d.key, err))
	}
}

// sendFailed looks at a failed send of the device's backend: a closed
// backend, or an address that is on no interface any more (for a socket
// bound to an address deleted the kernel says EINVAL, EADDRNOTAVAIL, or,
// as Linux 6.18 does, ENETUNREACH: no device has that source), takes the
// device down. Any other error is the loss RC recovers from.
func (d *smcDevice) sendFailed(err error) {
	if errors.Is(err, backend.ErrBackendClosed) {
		d.wentDown(err)
		return
	}
	if !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.EADDRNOTAVAIL) &&
		!errors.Is(err, syscall.ENODEV) && !errors.Is(err, syscall.ENETDOWN) && !errors.Is(err, syscall.ENETUNREACH) {
		return
	}
	// The interfaces are read at most every 50 ms: a dead address fails
	// every send of the links on it until they are down.
	now, last := mono(), d.lastCheck.Load()
	if now-last < int64(50*time.Millisecond) || !d.lastCheck.CompareAndSwap(last, now) {
		return
	}
	if !d.assigned(d.key.Addr()) {
		d.wentDown(err)
	}
}

// addrAssigned reports whether a is an address of one of the host's
// interfaces (a loopback one always is: lo has 127.0.0.0/8 and ::1).
func addrAssigned(a netip.Addr) bool {
	if a.IsLoopback() {
		return true
	}
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		return true // cannot tell: not down
	}
	for _, ia := range ifs {
		if n, ok := ia.(*net.IPNet); ok {
			if p, ok := netip.AddrFromSlice(n.IP); ok && p.Unmap() == a.Unmap() {
				return true
			}
		}
	}
	return false
}

// watchedBackend tells its device of failed sends (sendFailed).
type watchedBackend struct {
	backend.Backend
	d *smcDevice
}

// watchBackend decorates b so that d learns when b cannot send; polling
// stays as b has it.
func watchBackend(b backend.Backend, d *smcDevice) backend.Backend {
	w := &watchedBackend{Backend: b, d: d}
	return backend.KeepPolling(w, b, func([]backend.Incoming) {})
}

func (w *watchedBackend) Send(pkts []backend.Outgoing) error {
	err := w.Backend.Send(pkts)
	if err != nil {
		w.d.sendFailed(err)
	}
	return err
}

// Unwrap returns the backend it decorates (backend.HardwareAddrOf).
func (w *watchedBackend) Unwrap() backend.Backend { return w.Backend }

// epoch is the origin of mono.
var epoch = time.Now()

// mono is a monotonic clock in nanoseconds.
func mono() int64 { return int64(time.Since(epoch)) }
