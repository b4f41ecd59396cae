package smcr_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/device"
	"github.com/goroce/goroce/smcr"
)

// A process that publishes its SMC sockets publishes its SMC-R devices
// too: a link's queue pair shows in the device's resources (roce-devinfo
// res show qp), connected to the peer's, as a kernel's SMC-R QP shows in
// rdma res show qp.
func TestPublishDevices(t *testing.T) {
	dir := t.TempDir()
	p := newPair(t, nil)
	c, s := p.dial(t)
	pub, err := smcr.Publish(dir)
	require.NoError(t, err)
	defer pub.Close()
	ci, si := c.(*smcr.Conn).Info(), s.(*smcr.Conn).Info()
	require.Len(t, ci.Links, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	read := func(addr net.Addr) *device.Published {
		t.Helper()
		ap := netip.AddrPortFrom(addrPortOf(addr).Addr(), 4791)
		d, err := device.ReadPublished(ctx, device.PublishPath(dir, ap))
		require.NoError(t, err, "the device on %v publishes", ap)
		return d
	}
	cd, sd := read(c.LocalAddr()), read(s.LocalAddr())
	qpOf := func(d *device.Published, qpn uint32) device.QPResource {
		for _, q := range d.Resources.QPs {
			if q.LQPN == qpn {
				return q
			}
		}
		t.Fatalf("no QP %#x among %+v", qpn, d.Resources.QPs)
		return device.QPResource{}
	}
	cq, sq := qpOf(cd, ci.Links[0].LocalQPN), qpOf(sd, si.Links[0].LocalQPN)
	assert.Equal(t, "RTS", cq.State)
	assert.Equal(t, "RC", cq.Type)
	assert.Equal(t, si.Links[0].LocalQPN, cq.RQPN)
	assert.Equal(t, ci.Links[0].LocalQPN, sq.RQPN)
	assert.Equal(t, "goroce-smc", cd.Name)
}
