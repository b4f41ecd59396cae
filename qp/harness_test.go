package qp

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/goroce/goroce/rocev2/backend/udp"
	"github.com/goroce/goroce/rocev2/device"
)

// node is one side of a test connection: a device with a PD, a CQ shared by
// send and receive, one QP and a registered buffer.
type node struct {
	dev *device.Device
	pd  *device.PD
	cq  *cq.CQ
	// poll busy-polls cq, receiving on the caller's goroutine (as a
	// perftest-style application does) where a test spins.
	poll *device.Poller
	qp   *QP
	buf  []byte
	mr   *device.MR
	psn  rocev2.PSN
	net  *memlink.Network // nil over UDP
}

type pairConfig struct {
	mtu       rocev2.MTU
	bufSize   int
	depth     int
	timeout   uint8 // local ACK timeout code
	retry     uint8 // 0 means 7
	rnrRetry  uint8
	rnrTimer  uint8
	access    device.Access
	wrap      func(backend.Backend) backend.Backend // e.g. a fault injector
	sigAll    bool
	maxRd     uint8
	noConnect bool
	udp       bool          // real UDP sockets on 127.0.0.1 and 127.0.0.2 instead of memlink
	portable  bool          // with udp: the portable UDP backend (one datagram per call)
	device    device.Config // DeferACKs, HoldLimit (the backend is the harness's)
}

func (c *pairConfig) defaults() {
	if c.mtu == 0 {
		c.mtu = rocev2.MTU1024
	}
	if c.bufSize == 0 {
		c.bufSize = 1 << 16
	}
	if c.depth == 0 {
		c.depth = 256
	}
	if c.timeout == 0 {
		c.timeout = 12 // 16.8 ms
	}
	if c.access == 0 {
		c.access = device.AccessLocalWrite | device.AccessRemoteWrite | device.AccessRemoteRead | device.AccessRemoteAtomic
	}
	if c.maxRd == 0 {
		c.maxRd = 16
	}
	if c.retry == 0 {
		c.retry = 7 // as applications set it; tests of exhaustion choose less
	}
}

// newPair builds two connected RC QPs on an in-memory network.
func newPair(t testing.TB, cfg pairConfig) (a, b *node) {
	t.Helper()
	cfg.defaults()
	network := memlink.NewNetwork()
	mk := func(addr string) *node {
		var backend backend.Backend
		if cfg.udp {
			ap := netip.MustParseAddrPort(addr)
			c := udp.Config{Addr: netip.AddrPortFrom(ap.Addr(), 0)}
			var err error
			if cfg.portable {
				backend, err = udp.OpenPortable(c)
			} else {
				backend, err = udp.Open(c)
			}
			require.NoError(t, err)
		} else {
			be, err := network.Attach(netip.MustParseAddrPort(addr))
			require.NoError(t, err)
			backend = be
		}
		if cfg.wrap != nil {
			backend = cfg.wrap(backend)
		}
		dcfg := cfg.device
		dcfg.Backend = backend
		dev, err := device.New(dcfg)
		require.NoError(t, err)
		t.Cleanup(func() { dev.Close() })
		n := &node{dev: dev, pd: dev.AllocPD(), buf: make([]byte, cfg.bufSize), psn: RandomPSN()}
		if !cfg.udp {
			n.net = network
		}
		n.cq, err = cq.New(4*cfg.depth+16, cq.Config{})
		require.NoError(t, err)
		n.poll = dev.NewPoller(n.cq)
		n.mr, err = n.pd.RegisterMR(n.buf, cfg.access)
		require.NoError(t, err)
		n.qp, err = Create(n.pd, InitAttr{
			Type: RC, SendCQ: n.cq, RecvCQ: n.cq, SigAll: cfg.sigAll,
			Cap: Cap{MaxSendWR: cfg.depth, MaxRecvWR: cfg.depth, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 256},
		})
		require.NoError(t, err)
		return n
	}
	a, b = mk("127.0.0.1:4791"), mk("127.0.0.2:4791")
	if !cfg.noConnect {
		connect(t, a, b, cfg)
		connect(t, b, a, cfg)
	}
	return a, b
}

// connect moves n's QP to RTS towards peer, as rc_pingpong does.
func connect(t testing.TB, n, peer *node, cfg pairConfig) {
	t.Helper()
	cfg.defaults()
	gid, err := peer.dev.GID(1)
	require.NoError(t, err)
	require.NoError(t, n.qp.Modify(&Attr{State: Init, Port: 1, AccessFlags: cfg.access},
		MaskState|MaskPKeyIndex|MaskPort|MaskAccessFlags))
	require.NoError(t, n.qp.Modify(&Attr{
		State: RTR, PathMTU: cfg.mtu, DestQPN: peer.qp.QPN(), RQPSN: peer.psn,
		MaxDestRdAtomic: cfg.maxRd, MinRNRTimer: cfg.rnrTimer,
		AH: AH{DGID: gid, SGIDIndex: 1, HopLimit: 64, DestPort: peer.dev.LocalAddr().Port()},
	}, MaskState|MaskAV|MaskPathMTU|MaskDestQPN|MaskRQPSN|MaskMaxDestRdAtomic|MaskMinRNRTimer))
	require.NoError(t, n.qp.Modify(&Attr{
		State: RTS, SQPSN: n.psn, Timeout: cfg.timeout, RetryCnt: cfg.retry, RNRRetry: cfg.rnrRetry, MaxRdAtomic: cfg.maxRd,
	}, MaskState|MaskSQPSN|MaskTimeout|MaskRetryCnt|MaskRNRRetry|MaskMaxQPRdAtomic))
}

// sge returns an SGE over n.buf[off:off+length].
func (n *node) sge(off, length int) SGE {
	return SGE{Addr: n.mr.VA() + uint64(off), Length: uint32(length), LKey: n.mr.LKey()}
}

// waitWCs polls n's CQ until want completions arrived or the deadline.
func waitWCs(t testing.TB, c *cq.CQ, want int, d time.Duration) []cq.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out []cq.WC
	buf := make([]cq.WC, 64)
	for len(out) < want {
		n := c.Poll(buf)
		out = append(out, buf[:n]...)
		if n > 0 {
			continue
		}
		if c.Arm(false) {
			continue // completions slipped in between Poll and Arm
		}
		if err := c.Wait(ctx); err != nil {
			require.FailNow(t, fmt.Sprintf("waiting for %d completions, got %d: %v", want, len(out), err), "%+v", out)
		}
	}
	return out
}

func requireNoWC(t testing.TB, c *cq.CQ) {
	t.Helper()
	buf := make([]cq.WC, 8)
	n := c.Poll(buf)
	require.Zero(t, n, "unexpected completions: %+v", buf[:n])
}
