package device

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/backend/memlink"
)

func newTestDevice(t *testing.T) *Device {
	t.Helper()
	b, err := memlink.NewNetwork().Attach(netip.MustParseAddrPort("127.0.0.1:4791"))
	require.NoError(t, err)
	d, err := New(Config{Backend: b})
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func TestMRKeysAreUniqueAndUnpredictable(t *testing.T) {
	d := newTestDevice(t)
	pd := d.AllocPD()
	seen := map[uint32]bool{}
	var prev uint32
	sequential := 0
	for i := 0; i < 1000; i++ {
		mr, err := pd.RegisterMR(make([]byte, 8), AccessLocalWrite|AccessRemoteWrite)
		require.NoError(t, err)
		for _, k := range []uint32{mr.LKey(), mr.RKey()} {
			require.NotZero(t, k)
			require.False(t, seen[k], "key %#x reused", k)
			seen[k] = true
			if k == prev+1 || k == prev+0x100 {
				sequential++
			}
			prev = k
		}
		got, isR := d.LookupKey(mr.RKey())
		require.Same(t, mr, got)
		require.True(t, isR)
		got, isR = d.LookupKey(mr.LKey())
		require.Same(t, mr, got)
		require.False(t, isR)
	}
	assert.Less(t, sequential, 5, "keys look sequential")
}

func TestMRChecks(t *testing.T) {
	d := newTestDevice(t)
	pd, other := d.AllocPD(), d.AllocPD()
	buf := make([]byte, 64)
	mr, err := pd.RegisterMRAt(buf, 0x1000, AccessLocalWrite|AccessRemoteWrite)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		pd   *PD
		va   uint64
		n    int
		need Access
		want error
	}{
		{"whole region", pd, 0x1000, 64, AccessRemoteWrite, nil},
		{"last byte", pd, 0x103f, 1, AccessRemoteWrite, nil},
		{"empty at the end", pd, 0x1040, 0, AccessRemoteWrite, nil},
		{"one past the end", pd, 0x1001, 64, AccessRemoteWrite, ErrOutOfMR},
		{"before the start", pd, 0xfff, 2, AccessRemoteWrite, ErrOutOfMR},
		{"far beyond (no overflow)", pd, ^uint64(0) - 2, 8, AccessRemoteWrite, ErrOutOfMR},
		{"other PD", other, 0x1000, 8, AccessRemoteWrite, ErrWrongPD},
		{"missing right", pd, 0x1000, 8, AccessRemoteRead, ErrNoAccess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clear(buf)
			err := mr.CopyTo(tc.pd, tc.va, make([]byte, tc.n), tc.need)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
	_, err = pd.RegisterMR(buf, AccessRemoteWrite)
	require.Error(t, err, "remote write without local write")
}

func TestMRDeregisterAndInvalidate(t *testing.T) {
	d := newTestDevice(t)
	pd := d.AllocPD()
	mr, err := pd.RegisterMR(make([]byte, 16), AccessLocalWrite|AccessRemoteWrite|AccessRemoteAtomic)
	require.NoError(t, err)
	require.NoError(t, mr.CopyTo(pd, mr.VA(), []byte{1}, AccessRemoteWrite))
	_, err = mr.Atomic(pd, mr.VA()+4, func(v uint64) uint64 { return v })
	require.ErrorIs(t, err, ErrMisalign)
	orig, err := mr.Atomic(pd, mr.VA()+8, func(v uint64) uint64 { return v + 5 })
	require.NoError(t, err)
	require.Zero(t, orig)

	require.NoError(t, mr.Deregister())
	require.ErrorIs(t, mr.CopyTo(pd, mr.VA(), []byte{1}, AccessRemoteWrite), ErrMRInvalid)
	got, _ := d.LookupKey(mr.RKey())
	require.Nil(t, got)
	require.Error(t, mr.Deregister(), "twice")

	mr2, err := pd.RegisterMR(make([]byte, 16), AccessLocalWrite)
	require.NoError(t, err)
	mr2.Invalidate()
	require.False(t, mr2.Valid())
	require.ErrorIs(t, mr2.CopyFrom(pd, mr2.VA(), make([]byte, 1), 0), ErrMRInvalid)
}

// ReadSync reads what a concurrent CopyTo (the receive path's write) left,
// ordered after it, and WriteSync writes what a concurrent CopyFrom (a
// retransmission's gather) reads: the loops see each other's writes, and
// the race detector sees no race.
func TestMRReadSync(t *testing.T) {
	d := newTestDevice(t)
	pd := d.AllocPD()
	mr, err := pd.RegisterMRAt(make([]byte, 64), 0x1000, AccessLocalWrite|AccessRemoteWrite)
	require.NoError(t, err)
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := 1; i <= 100; i++ {
			_ = mr.CopyTo(pd, 0x1000+63, []byte{byte(i)}, AccessRemoteWrite)
		}
	}()
	var b [1]byte
	for b[0] != 100 {
		require.NoError(t, mr.ReadSync(0x1000+63, b[:]))
	}
	<-wrote
	// And the other way: the owner writes while the device reads.
	done := make(chan struct{})
	go func() {
		defer close(done)
		var c [1]byte
		for c[0] != 50 {
			_ = mr.CopyFrom(pd, 0x1000, c[:], 0)
		}
	}()
	for i := 1; i <= 50; i++ {
		require.NoError(t, mr.WriteSync(0x1000, []byte{byte(i)}))
	}
	<-done
	assert.ErrorIs(t, mr.ReadSync(0x1000+64, b[:]), ErrOutOfMR)
	require.NoError(t, mr.Deregister())
	assert.ErrorIs(t, mr.ReadSync(0x1000, b[:]), ErrMRInvalid)
}
