package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/goroce/goroce/internal/cqlegacy"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/shm"
	"github.com/goroce/goroce/smcr"
)

// The ways the experiment connects a client to the server: TCP, and SMC-R
// with each completion design over each link between the two goroce
// devices (UDP datagrams on lo, or the shared-memory link).
const (
	modeTCP       = "tcp"              // plain TCP loopback: the baseline
	modeSMCOrg    = "smc-original"     // SMC-R, the original single-CQ design (internal/cqlegacy, which smc-bench brings), over UDP
	modeSMCCQP    = "smc-pool"         // SMC-R with the CQ pool (smcr.PooledCQ), over UDP
	modeSMCOrgShm = "smc-original-shm" // the original design over the shared-memory link
	modeSMCCQPShm = "smc-pool-shm"     // the CQ pool over the shared-memory link
	// The CQ pool over the shared-memory link with busy-polled Reads
	// (smcr.Config.BusyPoll): what a processor spent looking buys.
	modeSMCCQPBusy = "smc-pool-shm-busy"
)

var allModes = []string{modeTCP, modeSMCOrg, modeSMCCQP, modeSMCOrgShm, modeSMCCQPShm, modeSMCCQPBusy}

// smcModes are the SMC-R modes, each with its own pair of devices.
var smcModes = []string{modeSMCOrg, modeSMCCQP, modeSMCOrgShm, modeSMCCQPShm, modeSMCCQPBusy}

// overShm reports whether an SMC-R mode's devices use the shared-memory
// link.
func overShm(mode string) bool {
	return mode == modeSMCOrgShm || mode == modeSMCCQPShm || mode == modeSMCCQPBusy
}

// original reports whether an SMC-R mode uses the original CQ design.
func original(mode string) bool { return mode == modeSMCOrg || mode == modeSMCOrgShm }

// The two processes' loopback addresses: distinct, so that their goroce
// devices have distinct GIDs as on two hosts.
var (
	clientAddr = netip.MustParseAddr("127.0.0.1")
	serverAddr = netip.MustParseAddr("127.0.0.2")
)

// maxConnsPerLinkGroup is the original run's net.smc.smcr_max_conns_per_lgr:
// 512 clients take 16 link groups.
const maxConnsPerLinkGroup = 32

// smcSettings are what both processes must agree on for SMC-R.
type smcSettings struct {
	DevPort    uint16        // the smc-pool device's UDP port; smc-original, smc-original-shm, smc-pool-shm and smc-pool-shm-busy use the next four
	Signalling string        // auto, option or configured
	Linger     time.Duration // link group linger (0: smcr's default)
	ShmSpin    time.Duration // the shared-memory link's shm.Config.Spin
	BusyPoll   time.Duration // smcr.Config.BusyPoll of smc-pool-shm-busy
}

// config returns the smcr.Config of an SMC-R mode.
func (s smcSettings) config(mode string) (*smcr.Config, error) {
	cfg := &smcr.Config{
		MaxConnsPerLinkGroup: maxConnsPerLinkGroup, PeerSpeaksSMC: true,
		DevicePort: s.DevPort, LinkGroupLinger: s.Linger,
	}
	switch s.Signalling {
	case "configured", "":
		cfg.Signalling = smcr.SignalConfigured
	case "option":
		cfg.Signalling = smcr.SignalOption
	case "auto":
		cfg.Signalling = smcr.SignalAuto
	default:
		return nil, fmt.Errorf("unknown signalling %q (auto, option or configured)", s.Signalling)
	}
	if mode == modeTCP {
		return nil, fmt.Errorf("mode %q is not SMC-R", mode)
	}
	cfg.CQ = smcr.PooledCQ
	if original(mode) {
		cfg.CQ = cqlegacy.SMCR{}
	}
	if overShm(mode) {
		cfg.Backend = func(ap netip.AddrPort) (backend.Backend, error) {
			return shm.Open(shm.Config{Addr: ap, Spin: s.ShmSpin})
		}
	}
	if mode == modeSMCCQPBusy {
		cfg.BusyPoll = s.BusyPoll
	}
	cfg.DevicePort = s.devPort(mode)
	return cfg, nil
}

// devPort is the device port of an SMC-R mode.
func (s smcSettings) devPort(mode string) uint16 {
	switch mode {
	case modeSMCOrg:
		return s.DevPort + 1
	case modeSMCOrgShm:
		return s.DevPort + 2
	case modeSMCCQPShm:
		return s.DevPort + 3
	case modeSMCCQPBusy:
		return s.DevPort + 4
	}
	return s.DevPort
}

// listen opens the server's listener of a mode on a free port.
func (s smcSettings) listen(mode string) (net.Listener, error) {
	addr := netip.AddrPortFrom(serverAddr, 0).String()
	if mode == modeTCP {
		return net.Listen("tcp", addr)
	}
	cfg, err := s.config(mode)
	if err != nil {
		return nil, err
	}
	return smcr.Listen("tcp", addr, cfg)
}

// dialFunc returns how the load generator connects in a mode.
func (s smcSettings) dialFunc(mode string) (func(ctx context.Context, addr string) (net.Conn, error), error) {
	if mode == modeTCP {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(clientAddr, 0)), Timeout: 10 * time.Second}
		return func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }, nil
	}
	cfg, err := s.config(mode)
	if err != nil {
		return nil, err
	}
	d := &smcr.Dialer{Config: *cfg, LocalAddr: clientAddr, Timeout: 10 * time.Second}
	return func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }, nil
}

// connMode is what a connection speaks: "tcp" for a plain TCP connection,
// else smcr.Info's mode, and its link group (0 for TCP).
func connMode(c net.Conn) (string, uint32) {
	i, ok := smcr.Info(c)
	if !ok {
		return "tcp", 0
	}
	if i.Mode == smcr.ModeFallback {
		return "fallback (" + i.Fallback.String() + ", by " + i.FallbackBy + ")", 0
	}
	return i.Mode.String(), i.LinkGroup
}

// modeCounts counts connections by what they speak, and the link groups
// the SMC-R ones use.
type modeCounts struct {
	ByMode     map[string]int `json:"by_mode"`
	LinkGroups []uint32       `json:"link_groups"`
}

func (m *modeCounts) add(c net.Conn) {
	if m.ByMode == nil {
		m.ByMode = map[string]int{}
	}
	mode, lg := connMode(c)
	m.ByMode[mode]++
	if lg != 0 {
		for _, g := range m.LinkGroups {
			if g == lg {
				return
			}
		}
		m.LinkGroups = append(m.LinkGroups, lg)
	}
}

// check says what is wrong with n connections dialed in mode: each one
// must speak what the mode promises (a fallback to TCP is a failure).
func (m *modeCounts) check(mode string, n int) error {
	want := "tcp"
	if mode != modeTCP {
		want = "SMC-R"
	}
	good := 0
	for k, v := range m.ByMode {
		if k == want || (want == "SMC-R" && (k == smcr.ModeSMCRv1.String() || k == smcr.ModeSMCRv2.String())) {
			good += v
		}
	}
	if good != n {
		return fmt.Errorf("%d of %d connections are %s: %v", good, n, want, m.ByMode)
	}
	return nil
}
