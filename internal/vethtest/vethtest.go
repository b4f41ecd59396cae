//go:build linux

// Package vethtest gives tests two network namespaces of their own joined by
// a veth pair, with addresses from 198.18.0.0/15 (the benchmarking range)
// only: nothing a test sends there can reach another network. Tests that
// use it skip when not root or without the ip command. Deleting a
// namespace (at the test's cleanup) deletes its end of the pair and every
// address and route in it.
package vethtest

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// Pair is two namespaces, A and B, joined by a veth pair.
type Pair struct {
	NSA, NSB   string     // namespace names (ip netns)
	IfA, IfB   string     // interface names, IfA in NSA, IfB in NSB
	A, B       netip.Addr // IPv4 addresses, /24
	A6, B6     netip.Addr // IPv6 addresses (2001:db8::/64 documentation range, inside the namespaces), /64
	LinkLocalA netip.Addr // IfA's IPv6 link-local address (zoned)
	LinkLocalB netip.Addr
	MACA, MACB [6]byte
}

var seq atomic.Uint32

// New creates the pair; it skips the test when it cannot. Every pair of a
// process gets its own names and the third octet of its addresses from a
// counter, so tests may run in parallel.
func New(tb testing.TB) *Pair {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		tb.Skip("needs the ip command (iproute2)")
	}
	n := seq.Add(1)
	id := fmt.Sprintf("%d-%d", os.Getpid()%100000, n)
	p := &Pair{
		NSA: "gv-" + id + "-a", NSB: "gv-" + id + "-b",
		IfA: fmt.Sprintf("gv%da", os.Getpid()%100000*100+int(n)%100), IfB: fmt.Sprintf("gv%db", os.Getpid()%100000*100+int(n)%100),
		A: netip.AddrFrom4([4]byte{198, 18, byte(n), 1}), B: netip.AddrFrom4([4]byte{198, 18, byte(n), 2}),
		A6: netip.MustParseAddr(fmt.Sprintf("2001:db8:%x::1", n)), B6: netip.MustParseAddr(fmt.Sprintf("2001:db8:%x::2", n)),
	}
	Run(tb, "netns", "add", p.NSA)
	tb.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.NSA).Run() })
	Run(tb, "netns", "add", p.NSB)
	tb.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.NSB).Run() })
	for _, ns := range []string{p.NSA, p.NSB} {
		// No duplicate address detection: an address (the link-local one
		// the kernel adds too) is usable as soon as the link is up.
		if err := In(ns, func() error {
			return os.WriteFile("/proc/sys/net/ipv6/conf/default/accept_dad", []byte("0"), 0)
		}); err != nil {
			tb.Fatalf("turning off DAD in %s: %v", ns, err)
		}
	}
	Run(tb, "link", "add", p.IfA, "netns", p.NSA, "type", "veth", "peer", "name", p.IfB, "netns", p.NSB)
	for _, s := range []struct{ ns, ifn, a4, a6 string }{
		{p.NSA, p.IfA, p.A.String(), p.A6.String()},
		{p.NSB, p.IfB, p.B.String(), p.B6.String()},
	} {
		Run(tb, "-n", s.ns, "addr", "add", s.a4+"/24", "dev", s.ifn)
		Run(tb, "-n", s.ns, "addr", "add", s.a6+"/64", "dev", s.ifn, "nodad")
		Run(tb, "-n", s.ns, "link", "set", s.ifn, "up")
		Run(tb, "-n", s.ns, "link", "set", "lo", "up")
	}
	p.MACA, p.LinkLocalA = linkInfo(tb, p.NSA, p.IfA)
	p.MACB, p.LinkLocalB = linkInfo(tb, p.NSB, p.IfB)
	return p
}

// linkInfo returns an interface's MAC and its link-local address (derived
// from the MAC; added with nodad so it is usable at once).
func linkInfo(tb testing.TB, ns, ifn string) ([6]byte, netip.Addr) {
	tb.Helper()
	out := Output(tb, "-n", ns, "-br", "link", "show", ifn)
	f := strings.Fields(out)
	if len(f) < 3 {
		tb.Fatalf("ip link show %s: %q", ifn, out)
	}
	var mac [6]byte
	if _, err := fmt.Sscanf(f[2], "%x:%x:%x:%x:%x:%x", &mac[0], &mac[1], &mac[2], &mac[3], &mac[4], &mac[5]); err != nil {
		tb.Fatalf("MAC of %s in %q: %v", ifn, out, err)
	}
	ll := [16]byte{0xfe, 0x80, 8: mac[0] ^ 2, 9: mac[1], 10: mac[2], 11: 0xff, 12: 0xfe, 13: mac[3], 14: mac[4], 15: mac[5]}
	a := netip.AddrFrom16(ll)
	// The kernel adds it itself when the link comes up (DAD is off);
	// adding it here too makes sure it is there (an existing one is fine).
	_ = exec.Command("ip", "-n", ns, "addr", "add", a.String()+"/64", "dev", ifn, "nodad").Run()
	return mac, a.WithZone(ifn)
}

// Run runs the ip command with args and fails the test if it fails.
func Run(tb testing.TB, args ...string) {
	tb.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		tb.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// Output runs the ip command and returns its output.
func Output(tb testing.TB, args ...string) string {
	tb.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("ip %v: %v: %s", args, err, out)
	}
	return string(out)
}

// In runs f on an OS thread that has joined namespace ns and waits for it.
// Sockets f creates stay in that namespace for their lifetime, whatever
// thread uses them later. The thread is never unlocked, so the runtime
// ends it with the goroutine instead of reusing it elsewhere.
func In(ns string, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- err
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			done <- err
			return
		}
		done <- f()
	}()
	return <-done
}
