package device

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/rundir/rundirtest"
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
	assert.Equal(t, processName(), p.Comm)
	assert.NotEmpty(t, p.Comm)
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

// openMem opens a device on an in-memory link at addr.
func openMem(t *testing.T, addr string) *Device {
	t.Helper()
	b, err := memlink.NewNetwork().Attach(netip.MustParseAddrPort(addr))
	require.NoError(t, err)
	d, err := New(Config{Backend: b})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

// readPublished is ReadPublished with a bound on the wait.
func readPublished(path string) (*Published, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return ReadPublished(ctx, path)
}

// fakeCounters is what a socket that is not the device's answers: counters
// that readers must never show.
const fakeCounters = "goroce-device 2\nname fake\naddr 127.0.0.1:4791\npid 1\ncounter sent_pkts 99\n"

// A run directory that another user owns or may write to, or that is a
// symbolic link or no directory, is refused to publishers and readers,
// with an error that says what is wrong and what to do.
func TestPublishRefusesUntrustedRunDir(t *testing.T) {
	ap := netip.MustParseAddrPort("127.0.0.1:4791")
	base := t.TempDir()
	dirWith := func(name string, mode os.FileMode) string {
		d := filepath.Join(base, name)
		require.NoError(t, os.Mkdir(d, 0o700))
		require.NoError(t, os.Chmod(d, mode))
		return d
	}
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(dirWith("target", 0o700), link))
	notDir := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(notDir, nil, 0o600))
	cases := []struct {
		name, dir, want string
	}{
		{"mode 0777", dirWith("world", 0o777), "has mode 0777"},
		{"group-writable", dirWith("group", 0o775), "has mode 0775"},
		{"a symbolic link", link, "is a symbolic link"},
		{"not a directory", notDir, "is not a directory"},
	}
	if os.Geteuid() == 0 { // only root can give a directory away
		d := dirWith("nobody", 0o700)
		require.NoError(t, os.Chown(d, 65534, 65534))
		cases = append(cases, struct{ name, dir, want string }{"another user's", d, "belongs to uid 65534"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := openMem(t, ap.String())
			err := d.Publish(tc.dir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "not trusted")
			assert.Contains(t, err.Error(), "GOROCE_RUN_DIR")
		})
	}
	t.Run("a reader in a world-writable directory", func(t *testing.T) {
		d := dirWith("reader", 0o700)
		path := PublishPath(d, ap)
		rundirtest.Serve(t, path, fakeCounters)
		require.NoError(t, os.Chmod(d, 0o777))
		p, err := readPublished(path)
		require.Error(t, err, "read %+v", p)
		assert.Contains(t, err.Error(), "has mode 0777")
	})
}

// A reader removes a stale socket (its process died, by SIGKILL even);
// a publisher leaves alone a file at its path that is not its socket.
func TestPublishStaleAndForeignFiles(t *testing.T) {
	dir := t.TempDir()
	ap := netip.MustParseAddrPort("127.0.0.1:4791")
	path := PublishPath(dir, ap)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	ln.Close()
	_, err = readPublished(path)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.NoFileExists(t, path, "the reader removes a stale socket")

	require.NoError(t, os.WriteFile(path, []byte("keep"), 0o600))
	err = openMem(t, ap.String()).Publish(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not a socket")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(b), "a file the publisher did not make is not removed")
}

// A socket that another user's process serves is refused, though the
// directory and the socket file are the reader's (root only: it runs a
// process as nobody).
func TestReadPublishedRefusesAnotherUsersSocket(t *testing.T) {
	path := PublishPath(t.TempDir(), netip.MustParseAddrPort("127.0.0.1:4791"))
	rundirtest.ForeignSocket(t, path, fakeCounters)
	p, err := readPublished(path)
	require.Error(t, err, "read %+v", p)
	assert.Contains(t, err.Error(), "is served by uid 65534, not by you")
}

// A reader bounds what it takes from a publisher: the counters and the
// bytes of a snapshot.
func TestReadPublishedBounded(t *testing.T) {
	head := "goroce-device 2\nname x\n"
	for _, tc := range []struct {
		name, reply, want string
	}{
		{"too many counters", head + strings.Repeat("counter c 1\n", maxPublishedCounters+1), "more than 4096 counters"},
		{"too many bytes", head + strings.Repeat("name "+strings.Repeat("x", 10000)+"\n", maxPublishedBytes/10000+1), "larger than 33554432 bytes"},
		{"a line too long", head + "name " + strings.Repeat("x", 70000) + "\n", "token too long"},
		{"too many QPs", head + strings.Repeat("qp lqpn 1 type RC state RTS port 1 sq-psn 0 path-mtu 1024 pdn 1\n", maxPublishedQPs+1), "more than 16384 qp lines"},
		{"too many pairs", head + "pd" + strings.Repeat(" users 1", maxResourcePairs+1) + "\n", "want up to 32 key value pairs"},
		{"half a pair", head + "pd pdn 1 users\n", "want up to 32 key value pairs"},
		{"a QPN beyond 24 bits", head + "qp lqpn 16777216 type RC state RTS port 1 sq-psn 0 path-mtu 1024 pdn 1\n", "lqpn"},
		{"a missing key", head + "cq cqn 1 users 1\n", "no cqe"},
		{"an unknown kind", head + "srq srqn 1\n", "unknown line"},
		{"a counter without a value", head + "counter sent_pkts\n", "bad counter line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.sock")
			rundirtest.Serve(t, path, tc.reply)
			_, err := readPublished(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// What a device publishes of its live objects reads back as Resources
// gives them: its regions and their protection domain here (its queue
// pairs are qp's, tested there and in roce-devinfo).
func TestPublishResources(t *testing.T) {
	dir := t.TempDir()
	d := openMem(t, "127.0.0.1:4791")
	pd := d.AllocPD()
	for _, n := range []int{4096, 100} {
		_, err := pd.RegisterMR(make([]byte, n), AccessLocalWrite|AccessRemoteWrite)
		require.NoError(t, err)
	}
	require.NoError(t, d.Publish(dir))
	p, err := readPublished(PublishPath(dir, d.LocalAddr()))
	require.NoError(t, err)
	want := d.Resources()
	require.Len(t, want.MRs, 2)
	assert.Equal(t, []PDResource{{PDN: pd.PDN(), Users: 2}}, want.PDs)
	assert.Equal(t, want, p.Resources)

	// Every field of every kind survives the trip.
	all := Resources{
		QPs: []QPResource{
			{LQPN: 0xabcdef, Connected: true, RQPN: 0x123456, Type: "RC", State: "RTS", Port: 1, SQPSN: 0xffffff, RQPSN: 7, PathMigState: "MIGRATED", PathMTU: 4096, PDN: 3},
			{LQPN: 17, Type: "UD", State: "RESET", SQPSN: 0, PathMTU: 1024, PDN: 3},
		},
		CQs: []CQResource{{CQN: 9, CQE: 32767, Users: 2}},
		MRs: []MRResource{{MRN: 1, RKey: 0xffffffff, LKey: 1, IOVA: 0xffffffffffffffff, Len: 1 << 40, PDN: 3}},
		PDs: []PDResource{{PDN: 3, Users: 4}},
	}
	var sb strings.Builder
	writeResources(&sb, all)
	path := filepath.Join(t.TempDir(), "x.sock")
	rundirtest.Serve(t, path, "goroce-device 2\nname x\n"+sb.String())
	p, err = readPublished(path)
	require.NoError(t, err)
	assert.Equal(t, all, p.Resources)
}

// Unpublish stops publishing and removes the socket; Publish may start
// again, unlike after Close.
func TestUnpublish(t *testing.T) {
	dir := t.TempDir()
	d := openMem(t, "127.0.0.1:4791")
	require.NoError(t, d.Publish(dir))
	path := PublishPath(dir, d.LocalAddr())
	require.FileExists(t, path)
	d.Unpublish()
	assert.NoFileExists(t, path)
	d.Unpublish() // a second time does nothing
	require.NoError(t, d.Publish(dir))
	_, err := readPublished(path)
	require.NoError(t, err)
}
