package pingpong

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/device"
)

func TestDestMarshal(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    dest
		want string
	}{
		{
			name: "a documented example",
			d:    dest{qpn: 0x11, psn: 0xa1b2c3, gid: device.GIDFromAddr(netip.MustParseAddr("192.168.1.1"))},
			want: "0000:000011:a1b2c3:00000000000000000000ffffc0a80101\x00",
		},
		{
			name: "no GID (the original's default)",
			d:    dest{qpn: 0xffffff, psn: 0},
			want: "0000:ffffff:000000:00000000000000000000000000000000\x00",
		},
		{
			name: "IPv6 GID and a LID",
			d:    dest{lid: 0xbeef, qpn: 0x12, psn: 0xbb3b64, gid: device.GIDFromAddr(netip.MustParseAddr("fe80::1:2"))},
			want: "beef:000012:bb3b64:fe800000000000000000000000010002\x00",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.d.marshal()
			require.Len(t, b, 52, "exactly 52 bytes go each way")
			assert.Equal(t, tc.want, string(b))
			got, err := parseDest(b)
			require.NoError(t, err)
			assert.Equal(t, tc.d, got)
		})
	}
}

func TestParseDestErrors(t *testing.T) {
	for _, tc := range []struct {
		name, msg, want string
	}{
		{"too few fields", "0000:000011:a1b2c3\x00", "want LID:QPN:PSN:GID"},
		{"bad hex", "0000:0000zz:a1b2c3:00000000000000000000ffffc0a80101\x00", "field 2"},
		{"QPN over 24 bits", "0000:1000000:a1b2c3:0000000000000000000ffffc0a80101\x00", "field 2"},
		{"short GID", "0000:000011:a1b2c3:ffffc0a80101\x00", "GID has 12 hex digits"},
		{"GID not hex", "0000:000011:a1b2c3:0000000000000000000xffffc0a80101\x00", "GID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDest([]byte(tc.msg))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestExchange runs the client and server halves against each other over
// loopback TCP and checks the order the original depends on: the server
// connects its QP before it answers, and the client's "done" (5 bytes)
// closes the exchange.
func TestExchange(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	client := dest{qpn: 0x11, psn: 0x123456, gid: device.GIDFromAddr(netip.MustParseAddr("127.0.0.2"))}
	server := dest{qpn: 0x12, psn: 0xabcdef, gid: device.GIDFromAddr(netip.MustParseAddr("127.0.0.1"))}

	var (
		wg        sync.WaitGroup
		connected dest
		srvGot    dest
		srvErr    error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		var got []dest
		got, srvErr = serverExchange(ln, []dest{server}, 10*time.Second, func(d []dest) error {
			connected = d[0] // runs before the server's reply is written
			return nil
		})
		if srvErr == nil {
			srvGot = got[0]
		}
	}()
	got, err := clientExchange("127.0.0.1", port, []dest{client}, 10*time.Second)
	var cliGot dest
	if err == nil {
		cliGot = got[0]
	}
	wg.Wait()
	require.NoError(t, err)
	require.NoError(t, srvErr)
	assert.Equal(t, server, cliGot)
	assert.Equal(t, client, srvGot)
	assert.Equal(t, client, connected)
}

// TestExchangeWire plays the client by hand to check the bytes on the wire
// and that a server whose QP cannot connect hangs up without answering.
func TestExchangeWire(t *testing.T) {
	server := dest{qpn: 0x12, psn: 0xabcdef, gid: device.GIDFromAddr(netip.MustParseAddr("127.0.0.1"))}
	for _, tc := range []struct {
		name       string
		connectErr error
	}{
		{"connects", nil},
		{"QP fails to connect", errors.New("RTR refused")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			errc := make(chan error, 1)
			go func() {
				_, err := serverExchange(ln, []dest{server}, 10*time.Second, func([]dest) error { return tc.connectErr })
				errc <- err
			}()
			conn, err := net.Dial("tcp", ln.Addr().String())
			require.NoError(t, err)
			defer conn.Close()
			require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
			_, err = conn.Write(dest{qpn: 0x11, gid: server.gid}.marshal())
			require.NoError(t, err)
			reply, err := io.ReadAll(io.LimitReader(conn, int64(msgSize)))
			require.NoError(t, err)
			if tc.connectErr != nil {
				assert.Empty(t, reply, "no answer from a server that could not connect")
				err := <-errc
				require.Error(t, err)
				assert.Contains(t, err.Error(), "Couldn't connect to remote QP")
				return
			}
			assert.Equal(t, string(server.marshal()), string(reply))
			_, err = conn.Write([]byte("done\x00"))
			require.NoError(t, err)
			require.NoError(t, <-errc)
		})
	}
}

func TestClientExchangeRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close()) // nobody listens there now
	_, err = clientExchange("127.0.0.1", port, []dest{{}}, 5*time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Couldn't connect to 127.0.0.1:")
}

// srq_pingpong exchanges 256 addresses each way, the ones past its QPs
// zero, each its own 52-byte message, and then "done".
func TestExchangeSRQ(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mk := func(base uint32, n int) []dest {
		d := make([]dest, maxQP)
		for i := range n {
			d[i] = dest{qpn: base + uint32(i), psn: uint32(i), gid: device.GIDFromAddr(netip.MustParseAddr("127.0.0.1"))}
		}
		return d
	}
	server, client := mk(0x100, 3), mk(0x200, 3)
	var (
		wg     sync.WaitGroup
		srvGot []dest
		srvErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		srvGot, srvErr = serverExchange(ln, server, 10*time.Second, func(d []dest) error { return nil })
	}()
	got, err := clientExchange("127.0.0.1", ln.Addr().(*net.TCPAddr).Port, client, 10*time.Second)
	wg.Wait()
	require.NoError(t, err)
	require.NoError(t, srvErr)
	assert.Equal(t, server, got)
	assert.Equal(t, client, srvGot)
	assert.Equal(t, "0000:000000:000000:00000000000000000000000000000000\x00", string(server[3].marshal()))
}
