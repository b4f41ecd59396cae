package perftest

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rdmacm"
	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/goroce/goroce/rocev2/device"
)

// cmPair is a channel of each side over the RDMA CM on an in-memory
// network, as -z makes it.
func cmPair(t *testing.T) (client, server *comm) {
	t.Helper()
	network := memlink.NewNetworkConfig(memlink.Config{})
	cms := make([]*rdmacm.CM, 2)
	for i, a := range []string{"127.0.0.1:4791", "127.0.0.2:4791"} {
		be, err := network.Attach(netip.MustParseAddrPort(a))
		require.NoError(t, err)
		dev, err := device.New(device.Config{Backend: be})
		require.NoError(t, err)
		cm, err := rdmacm.New(dev, rdmacm.Config{})
		require.NoError(t, err)
		t.Cleanup(func() { cm.Close(); dev.Close() })
		cms[i] = cm
	}
	p, err := SendBW.parse([]string{"-p", "18515", "-z", "--udp-port", "4791"}, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := cms[0].Listen(rdmacm.ListenConfig{Addr: netip.MustParseAddrPort("127.0.0.1:18515"), Backlog: 1})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		var err error
		server, err = acceptCM(ctx, ln, cms[0].Device(), &p)
		done <- err
	}()
	client, err = dialCM(ctx, cms[1], &p, netip.MustParseAddr("127.0.0.1"))
	require.NoError(t, err)
	require.NoError(t, <-done)
	t.Cleanup(func() { client.close(); server.close() })
	return client, server
}

// The exchanges over the CM channel: each side gets the other's bytes,
// the records as the binary struct.
func TestCMChannel(t *testing.T) {
	client, server := cmPair(t)
	my := dest{qpn: 0x11, psn: 0x123456, rkey: 0x99, vaddr: 0x1000, outReads: 1}
	theirs := dest{qpn: 0x22, psn: 0x654321, rkey: 0x77, vaddr: 0x2000, outReads: 1}
	got := make(chan dest, 1)
	go func() {
		d, err := server.handshake(&theirs)
		assert.NoError(t, err)
		got <- d
	}()
	d, err := client.handshake(&my)
	require.NoError(t, err)
	assert.Equal(t, theirs, d)
	assert.Equal(t, my, <-got)

	srvDone := make(chan error, 1)
	go func() {
		_, err := server.versions("4.5")
		srvDone <- err
	}()
	v, err := client.versions(Version)
	require.NoError(t, err)
	assert.Equal(t, "4.5", v)
	require.NoError(t, <-srvDone)
	require.NoError(t, client.done(), "nothing goes after the last barrier over the CM")
}

// A peer that goes away ends a wait for its message at once, not at the
// timeout (none here: perftest's default).
func TestCMChannelPeerGone(t *testing.T) {
	client, server := cmPair(t)
	errc := make(chan error, 1)
	go func() {
		_, err := server.xchg(make([]byte, 4)) // the server reads first
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond) // the server waits
	require.NoError(t, client.close())
	select {
	case err := <-errc:
		assert.ErrorContains(t, err, "Unable to read to socket/rdma_cm", "the receive flushed")
	case <-time.After(10 * time.Second):
		t.Fatal("the server still waits for a peer that disconnected")
	}
}
