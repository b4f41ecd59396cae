//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The cases of goroce's other packet backend and address family: the RC
// cases with goroce on its AF_PACKET backend (whole Ethernet frames on
// br0, its own UDP source ports and IPv4 IDs), and RoCEv2 over IPv6 on
// both backends. Their captures get the checks of wirecheck.go on top of
// every case's.

// afpacket is the -backend of goroce's AF_PACKET backend.
const afpacket = "afpacket"

// The IPv6 cases use link-local addresses, the only ones rxe has without
// configuration: GID index 0 of every RoCE port is the link-local GID of
// its interface's MAC. br0 gets a fixed MAC so that its link-local address
// (goroce's) is known before the namespace exists, as the guest's is.
const (
	hostMAC        = "52:54:00:12:00:01"
	hostLinkLocal  = "fe80::5054:ff:fe12:1"
	guestLinkLocal = "fe80::5054:ff:fe12:b"
	// guestGID0 is GID index 0 of the guest's rxe0, in sysfs's spelling.
	guestGID0 = "fe80:0000:0000:0000:5054:00ff:fe12:000b"
)

// backendCases are the AF_PACKET and IPv6 cases: a representative subset
// of the RC cases on AF_PACKET over IPv4 (one packet a message, one MTU,
// several with -e, 64 KiB at path MTU 4096; loss both ways at each path
// MTU), and over IPv6 on both backends (loss both ways on each); both
// directions each. Fewer iterations than cases()'s: under TCG they add
// about two minutes. Grouped by MTU and family, so that after cases()
// (which ends at MTU 4096) the NIC MTU changes three times and IPv6 is
// turned on once.
func backendCases() []testCase {
	rc := func(c testCase) []testCase {
		c.tool = rcPingpong
		return both(c)
	}
	var cs []testCase
	for _, c := range []testCase{
		{backend: afpacket, size: 65536, iters: 100, mtu: 4096},
		{backend: afpacket, size: 65536, iters: 50, mtu: 4096, loss: 5, lossIn: 5, events: true},
		{backend: afpacket, size: 1, iters: 1000, mtu: 1024},
		{backend: afpacket, size: 1024, iters: 1000, mtu: 1024},
		{backend: afpacket, size: 4096, iters: 500, mtu: 1024, events: true},
		{backend: afpacket, size: 4096, iters: 200, mtu: 1024, loss: 5, lossIn: 5},
		{ipv6: true, size: 4096, iters: 200, mtu: 1024},
		{ipv6: true, size: 4096, iters: 200, mtu: 1024, loss: 5, lossIn: 5},
		{backend: afpacket, ipv6: true, size: 1, iters: 1000, mtu: 1024},
		{backend: afpacket, ipv6: true, size: 4096, iters: 200, mtu: 1024, events: true},
		{backend: afpacket, ipv6: true, size: 4096, iters: 200, mtu: 1024, loss: 5, lossIn: 5},
		{ipv6: true, size: 65536, iters: 100, mtu: 4096},
		{backend: afpacket, ipv6: true, size: 65536, iters: 100, mtu: 4096},
	} {
		cs = append(cs, rc(c)...)
	}
	return cs
}

// variant is what the case's name says of its backend and family
// (nothing for the UDP backend over IPv4).
func (c *testCase) variant() string {
	s := ""
	if c.backend != "" {
		s += " " + c.backend
	}
	if c.ipv6 {
		s += " ipv6"
	}
	return s
}

// ends returns the endpoints as the case uses them: over IPv6 the guest's
// GID index 0 (link-local) and goroce's device on its IPv6 address; the
// out-of-band exchange stays on IPv4 (its address is not the GID's).
func (c *testCase) ends(e endpoints) endpoints {
	if c.ipv6 {
		e.peerGID = 0
		e.goroceDev = e.goroceAddr6
		if e.goroceDev == "" {
			e.goroceDev = "GOROCE_IPV6_ADDR" // -list -peer: the user's to fill in
		}
	}
	return e
}

// deviceAddr is the address goroce's -d names.
func (e endpoints) deviceAddr() string {
	if e.goroceDev != "" {
		return e.goroceDev
	}
	return e.goroceAddr
}

// backendArgs are goroce's options for the case's backend (backendflag's,
// which every goroce tool takes).
func (c *testCase) backendArgs(e endpoints) []string {
	if c.backend == "" {
		return nil
	}
	iface := e.goroceIface
	if iface == "" {
		iface = "IFACE"
	}
	return []string{"-backend", c.backend, "-i", iface}
}

// wireAliases maps the case's wire addresses to the roles the capture
// checks count by (guestIP: rxe, hostIP: goroce); nil over IPv4.
func (c *testCase) wireAliases() map[string]string {
	if !c.ipv6 {
		return nil
	}
	return map[string]string{guestLinkLocal: guestIP, hostLinkLocal: hostIP}
}

// setIPv6 turns IPv6 on or off on both ends of the link: br0 in the
// namespace and eth0 in the guest. Off is the harness's default (quiet
// captures). DAD and router solicitations are off, so that the link-local
// addresses are usable at once and the link stays quiet. On, it checks
// that rxe0's GID 0 is the guest's link-local address and that each side
// reaches the other, and keeps the guest's GID table in
// guest-gids-ipv6.txt.
func (h *harness) setIPv6(ctx context.Context, on bool) error {
	if !on {
		if _, err := h.vm.mustRun(ctx, 10*time.Second, "echo 1 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6"); err != nil {
			return err
		}
		if err := h.ns.sysctl(ctx, "net/ipv6/conf/br0/disable_ipv6", "1"); err != nil {
			return err
		}
		h.curIPv6 = false
		return nil
	}
	for _, k := range []string{"accept_dad", "router_solicitations", "disable_ipv6"} {
		if err := h.ns.sysctl(ctx, "net/ipv6/conf/br0/"+k, "0"); err != nil {
			return err
		}
	}
	if err := h.waitHostAddr6(ctx, hostLinkLocal, 5*time.Second); err != nil {
		return err
	}
	steps := []string{
		"cd /proc/sys/net/ipv6/conf/eth0 && echo 0 > accept_dad && echo 0 > router_solicitations && echo 0 > disable_ipv6",
		fmt.Sprintf(`n=0; until ip -6 addr show dev eth0 | grep -q '%s/64' || [ $n -ge 50 ]; do usleep 100000; n=$((n+1)); done; ip -6 addr show dev eth0; ip -6 addr show dev eth0 | grep -q '%s/64'`, guestLinkLocal, guestLinkLocal),
		fmt.Sprintf(`cat /sys/class/infiniband/rxe0/ports/1/gids/0; [ "$(cat /sys/class/infiniband/rxe0/ports/1/gids/0)" = "%s" ]`, guestGID0),
		fmt.Sprintf("ping6 -c 1 -W 5 %s%%eth0 || ping -6 -c 1 -W 5 %s%%eth0", hostLinkLocal, hostLinkLocal),
		"for i in 0 1 2 3; do g=/sys/class/infiniband/rxe0/ports/1; echo \"gid $i $(cat $g/gids/$i) $(cat $g/gid_attrs/types/$i 2>/dev/null) $(cat $g/gid_attrs/ndevs/$i 2>/dev/null)\"; done; ibv_devinfo -v -d rxe0 | grep -i gid",
	}
	var info strings.Builder
	for _, s := range steps {
		out, err := h.vm.mustRun(ctx, 30*time.Second, s)
		fmt.Fprintf(&info, "# %s\n%s\n", s, out)
		if err != nil {
			os.WriteFile(filepath.Join(h.out, "guest-gids-ipv6.txt"), []byte(info.String()), 0o644)
			return fmt.Errorf("turning IPv6 on in the guest: %w", err)
		}
	}
	os.WriteFile(filepath.Join(h.out, "guest-gids-ipv6.txt"), []byte(info.String()), 0o644)
	logf("IPv6 on: br0 %s, guest eth0 %s (rxe0 GID 0); GID table in guest-gids-ipv6.txt", hostLinkLocal, guestLinkLocal)
	h.curIPv6 = true
	return nil
}

// waitHostAddr6 waits until br0 has addr (it appears when IPv6 is turned
// on; without DAD it is usable at once).
func (h *harness) waitHostAddr6(ctx context.Context, addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		out, err := runOut(ctx, "ip", "-n", h.ns.name, "-6", "addr", "show", "dev", "br0")
		if err == nil && strings.Contains(out, addr+"/64") && !strings.Contains(out, "tentative") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("br0 has no usable %s after turning IPv6 on (is its MAC %s?): %s", addr, hostMAC, strings.TrimSpace(out))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
