//go:build linux

package main

// A guest's boot and setup (its address, rxe0 on eth0, its own rc_pingpong
// check) and each case's environment (NIC MTU, netem loss).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// boot boots the guest (retrying once on a boot time-out) and sets it up.
func (h *harness) boot(ctx context.Context) error {
	bt := h.opts.bootTimeout
	if bt == 0 {
		bt = 90 * time.Second
		if !h.kvm {
			bt = 300 * time.Second
		}
	}
	accel := "TCG"
	if h.kvm {
		accel = "KVM"
	}
	cfg := vmConfig{name: "guest", kernel: h.img.kernel, initrd: h.initrd, dir: h.out, sockDir: h.sockDir,
		tap: "tap0", mac: guestMAC, kvm: h.kvm, memMB: h.opts.memMB, cpus: h.opts.cpus, bootTimeout: bt}
	if err := h.ns.setMTU(ctx, 1500); err != nil {
		return err
	}
	h.curMTU, h.curLoss, h.curLossIn, h.curMADLoss = 1500, 0, 0, false
	if h.curIPv6 { // the guest boots without; so must br0 be
		if err := h.ns.sysctl(ctx, "net/ipv6/conf/br0/disable_ipv6", "1"); err != nil {
			return err
		}
		h.curIPv6 = false
	}
	var err error
	for try := 1; try <= 2; try++ {
		h.boots++
		cfg.boot = h.boots
		logf("booting the guest (%s, kernel %s, try %d, console %s)", accel, h.img.kernelRelease, try,
			filepath.Join(h.out, fmt.Sprintf("guest-console.%d.log", h.boots)))
		h.vm, err = bootVM(ctx, h.ns, h.ps, cfg)
		if err == nil {
			logf("guest up in %.1fs", h.vm.bootDur.Seconds())
			break
		}
		h.lastConsole = tail(readFileString(filepath.Join(h.out, fmt.Sprintf("guest-console.%d.log", h.boots))), 40)
		if !errors.Is(err, errBootTimeout) || try == 2 {
			return fmt.Errorf("booting the guest: %w", err)
		}
		if h.kvm && h.opts.accel == "auto" {
			h.kvm, cfg.kvm, cfg.bootTimeout = false, false, 300*time.Second
			accel = "TCG"
			logf("%v: retrying under TCG", err)
			continue
		}
		logf("%v: retrying", err)
	}
	if err := h.guestSetup(ctx); err != nil {
		h.lastConsole = h.vm.consoleTail(40)
		return fmt.Errorf("setting the guest up: %w", err)
	}
	if h.opts.guestPrep != "" {
		out, err := h.vm.mustRun(ctx, time.Minute, h.opts.guestPrep)
		if err != nil {
			return fmt.Errorf("-guest-prep: %w", err)
		}
		logf("-guest-prep: %s", strings.TrimSpace(out))
	}
	return nil
}

// guestSetup gives the guest its address and its rxe device and checks
// the device is what the cases expect.
func (h *harness) guestSetup(ctx context.Context) error {
	v := h.vm
	steps := []string{
		fmt.Sprintf("ip link set eth0 mtu 1500 && ip addr add %s/%d dev eth0 && ip link set eth0 up", guestIP, prefixLen),
		"rdma link add rxe0 type rxe netdev eth0 && rdma link show",
		"ibv_devices",
		"ibv_devinfo -d rxe0",
		fmt.Sprintf(`n=0; while [ "$(cat /sys/class/infiniband/rxe0/ports/1/gids/1)" != "%s" ] && [ $n -lt 50 ]; do usleep 100000; n=$((n+1)); done; cat /sys/class/infiniband/rxe0/ports/1/gids/1; [ "$(cat /sys/class/infiniband/rxe0/ports/1/gids/1)" = "%s" ]`, guestGID1, guestGID1),
		fmt.Sprintf("ping -c 1 -W 5 %s", hostIP),
	}
	var info strings.Builder
	for _, s := range steps {
		out, err := v.mustRun(ctx, 30*time.Second, s)
		if err != nil {
			return err
		}
		fmt.Fprintf(&info, "# %s\n%s\n", s, out)
	}
	uname, _ := v.mustRun(ctx, 10*time.Second, "uname -a; ibv_rc_pingpong --help 2>&1 | head -1; cat /sys/class/infiniband/rxe0/ports/1/gids/1")
	fmt.Fprintf(&info, "# uname -a\n%s\n", uname)
	h.guestInfo = info.String()
	name := "guest-setup.txt"
	if h.guest != nil {
		name = fmt.Sprintf("guest-setup.%s.txt", h.guest.kind)
	}
	os.WriteFile(filepath.Join(h.out, name), []byte(h.guestInfo), 0o644)
	return nil
}

// guestLoopback runs ibv_rc_pingpong against itself in the guest over rxe:
// the guest works before goroce is involved.
func (h *harness) guestLoopback(ctx context.Context) *result {
	r := &result{name: "rc_pingpong s=4096 m=1024 n=1000", dir: "rxe srv ← rxe cli (guest loopback)", start: time.Now(), iters: 1000}
	cmd := "bgstart lb timeout 60 ibv_rc_pingpong -d rxe0 -g 1 -s 4096 -n 1000 -p 18000 >/dev/null; " +
		"waitlisten 18000 100 && timeout 60 ibv_rc_pingpong -d rxe0 -g 1 -s 4096 -n 1000 -p 18000 " + guestIP + "; echo \"CLIENT-EXIT $?\"; " +
		"bgreap lb 100"
	before, _ := h.rxeCounters(ctx)
	out, _, err := h.vm.run(ctx, 90*time.Second, cmd)
	r.dur = time.Since(r.start)
	if after, cerr := h.rxeCounters(ctx); cerr == nil && before != nil {
		r.counters = counterDelta(before, after)
	}
	client, server, _ := strings.Cut(out, "CLIENT-EXIT ")
	r.goroceOut, r.guestOut = client, server
	r.goroce, r.guest = parsePingpong(client), parsePingpong(server)
	r.goroceRC = exitStatus(out, "CLIENT-EXIT ")
	r.guestRC = exitStatus(out, "GOROCE-EXIT ")
	switch {
	case err != nil:
		r.fail("%v", err)
	case r.goroceRC != 0 || r.guestRC != 0:
		r.fail("exit status client %d, server %d", r.goroceRC, r.guestRC)
	case !r.guest.ok || !r.goroce.ok || r.guest.iters != r.iters || r.goroce.iters != r.iters:
		r.fail("no complete result lines")
	}
	r.pass = len(r.reasons) == 0
	os.WriteFile(filepath.Join(h.out, "guest-loopback.txt"), []byte(out), 0o644)
	return r
}

// setEnv sets the NIC MTU, IPv6 and the guest's loss for a case.
func (h *harness) setEnv(ctx context.Context, c *testCase) error {
	if c.ipv6 != h.curIPv6 {
		if err := h.setIPv6(ctx, c.ipv6); err != nil {
			return err
		}
	}
	if mtu := c.nicMTU(); mtu != h.curMTU {
		guest := fmt.Sprintf("ip link set eth0 mtu %d", mtu)
		if mtu > h.curMTU {
			if err := h.ns.setMTU(ctx, mtu); err != nil {
				return err
			}
			if _, err := h.vm.mustRun(ctx, 10*time.Second, guest); err != nil {
				return err
			}
		} else {
			if _, err := h.vm.mustRun(ctx, 10*time.Second, guest); err != nil {
				return err
			}
			if err := h.ns.setMTU(ctx, mtu); err != nil {
				return err
			}
		}
		h.curMTU = mtu
		out, err := h.vm.mustRun(ctx, 10*time.Second, "ibv_devinfo -d rxe0 | grep -E 'max_mtu|active_mtu'")
		if err != nil {
			return err
		}
		if !strings.Contains(out, fmt.Sprintf("active_mtu:\t\t%d (", c.mtu)) {
			return fmt.Errorf("guest NIC MTU %d gives rxe0 %s, not active MTU %d", mtu, strings.Join(strings.Fields(out), " "), c.mtu)
		}
	}
	if c.loss != h.curLoss {
		cmd := "tc qdisc del dev eth0 root"
		if c.loss > 0 {
			cmd = fmt.Sprintf("tc qdisc replace dev eth0 root netem loss %g%%", c.loss)
		}
		if _, err := h.vm.mustRun(ctx, 10*time.Second, cmd); err != nil {
			return err
		}
		h.curLoss = c.loss
	}
	if c.lossIn != h.curLossIn {
		var cmd string
		switch {
		case c.lossIn == 0:
			cmd = "tc qdisc del dev eth0 ingress && tc qdisc del dev ifb0 root"
		case h.curLossIn == 0:
			// Loading ifb made ifb0 already (numifbs=2).
			cmd = "{ [ -e /sys/class/net/ifb0 ] || ip link add ifb0 type ifb; } && ip link set ifb0 mtu 9000 up && tc qdisc add dev eth0 handle ffff: ingress && " +
				"tc filter add dev eth0 parent ffff: matchall action mirred egress redirect dev ifb0 && " +
				fmt.Sprintf("tc qdisc add dev ifb0 root netem loss %g%%", c.lossIn)
		default:
			cmd = fmt.Sprintf("tc qdisc replace dev ifb0 root netem loss %g%%", c.lossIn)
		}
		if _, err := h.vm.mustRun(ctx, 10*time.Second, cmd); err != nil {
			return err
		}
		h.curLossIn = c.lossIn
	}
	if c.madLoss || h.curMADLoss {
		// After the loss above: a case with loss replaced the root qdisc
		// already, one without has none left.
		cmd := madLossQdisc
		if !c.madLoss {
			cmd = "true"
			if c.loss == 0 {
				cmd = "tc qdisc del dev eth0 root"
			}
		}
		if _, err := h.vm.mustRun(ctx, 10*time.Second, cmd); err != nil {
			return err
		}
		h.curMADLoss = c.madLoss
	}
	return nil
}
