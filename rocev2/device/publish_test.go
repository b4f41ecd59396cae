package device

import (
	"context"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/backend/memlink"
)

func TestPublishCounters(t *testing.T) {
	dir := t.TempDir()
	network := memlink.NewNetwork()
	open := func() *Device {
		b, err := network.Attach(netip.MustParseAddrPort("127.0.0.1:4791"))
		require.NoError(t, err)
		d, err := New(Config{Backend: b})
		require.NoError(t, err)
		return d
	}
	d := open()
	defer d.Close()
	d.Counters.SentPkts.Add(7)
	d.Counters.RcvdPkts.Add(3)
	require.NoError(t, d.Publish(dir))
	path := PublishPath(dir, d.LocalAddr())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := ReadPublished(ctx, path)
	require.NoError(t, err)
	assert.Equal(t, d.Name(), p.Name)
	assert.Equal(t, d.LocalAddr(), p.Addr)
	assert.Equal(t, os.Getpid(), p.PID)
	assert.Equal(t, d.Counters.Snapshot(), p.Counters)

	d.Counters.SentPkts.Add(1)
	p, err = ReadPublished(ctx, path)
	require.NoError(t, err)
	v, _ := d.Counters.Get("sent_pkts")
	assert.Equal(t, uint64(8), v)
	assert.Contains(t, p.Counters, Counter{"sent_pkts", 8}, "each read is a fresh snapshot")

	require.ErrorContains(t, d.Publish(dir), "already answers", "one socket per address")

	require.NoError(t, d.Close())
	require.ErrorContains(t, d.Publish(dir), "closed", "no publishing after Close: nothing would stop it")
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist, "Close removes the socket")
	_, err = ReadPublished(ctx, path)
	assert.Error(t, err)

	// A socket file whose process died (nobody answers) is replaced.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	ln.Close()
	require.FileExists(t, path)
	d2 := open()
	defer d2.Close()
	require.NoError(t, d2.Publish(dir))
	_, err = ReadPublished(ctx, path)
	require.NoError(t, err)
}

func TestReadPublishedRejectsOtherServers(t *testing.T) {
	path := t.TempDir() + "/x.sock"
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = ReadPublished(ctx, path)
	require.ErrorContains(t, err, "does not speak")
}
