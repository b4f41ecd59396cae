package rdmacm

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/goroce/goroce/rocev2/device"
)

// testConfig shortens every wait of the CM: a REQ's timeout is 2×4 ms +
// 64 ms, timewait 8 ms (the values go on the wire, so both ends agree).
var testConfig = Config{PacketLifeTime: 10, CMResponseTimeout: 14, MaxCMRetries: 15}

// node is a device with a CM.
type node struct {
	dev *device.Device
	cm  *CM
}

func newNode(t *testing.T, be backend.Backend, cfg Config) *node {
	t.Helper()
	dev, err := device.New(device.Config{Backend: be})
	require.NoError(t, err)
	cm, err := New(dev, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, cm.Close())
		require.NoError(t, dev.Close())
	})
	return &node{dev: dev, cm: cm}
}

// memPair returns two nodes on an in-memory network.
func memPair(t *testing.T, cfg memlink.Config) (*node, *node) {
	t.Helper()
	network := memlink.NewNetworkConfig(cfg)
	attach := func(a string) backend.Backend {
		be, err := network.Attach(netip.MustParseAddrPort(a))
		require.NoError(t, err)
		return be
	}
	return newNode(t, attach("127.0.0.1:4791"), testConfig), newNode(t, attach("127.0.0.2:4791"), testConfig)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// buffers is a registered region split into slots for SENDs and RECVs.
type buffers struct {
	mr  *device.MR
	buf []byte
}

func newBuffers(t *testing.T, pd *device.PD, n int) *buffers {
	t.Helper()
	buf := make([]byte, n)
	mr, err := pd.RegisterMR(buf, device.AccessLocalWrite|device.AccessRemoteRead|device.AccessRemoteWrite)
	require.NoError(t, err)
	return &buffers{mr: mr, buf: buf}
}

// postRecv posts one receive of n bytes at off.
func (b *buffers) postRecv(t *testing.T, q *qp.QP, off, n int) {
	t.Helper()
	_, err := q.PostRecv([]qp.RecvWR{{WRID: uint64(off), SGL: []qp.SGE{{Addr: b.mr.VA() + uint64(off), Length: uint32(n), LKey: b.mr.LKey()}}}})
	require.NoError(t, err)
}

// send posts a signaled SEND of n bytes at off.
func (b *buffers) send(t *testing.T, q *qp.QP, off, n int) {
	t.Helper()
	_, err := q.PostSend([]qp.SendWR{{WRID: uint64(off), Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: b.mr.VA() + uint64(off), Length: uint32(n), LKey: b.mr.LKey()}}}})
	require.NoError(t, err)
}

// waitWC waits for the next completion on c.
func waitWC(t *testing.T, ctx context.Context, c *cq.CQ) cq.WC {
	t.Helper()
	wcs := make([]cq.WC, 1)
	for c.Poll(wcs) == 0 {
		if c.Arm(false) {
			continue
		}
		require.NoError(t, c.Wait(ctx))
	}
	return wcs[0]
}

// waitDone waits for a connection to end.
func waitDone(t *testing.T, ctx context.Context, c *Conn) {
	t.Helper()
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the connection did not end")
	}
}

// waitFor waits until cond holds (checked as often as the scheduler lets).
func waitFor(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not reached")
		case <-time.After(time.Millisecond):
		}
	}
}
