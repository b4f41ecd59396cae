package smcr_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/smcr"
)

// Transfers of every size across every wrap of the buffers, in both
// directions at once (concurrent Read and Write), byte-exact.
func TestTransferSizes(t *testing.T) { testTransferSizes(t, nil) }

func testTransferSizes(t *testing.T, mod func(*smcr.Config)) {
	noLeaks(t)
	p := newPair(t, mod)
	sizes := []int{1, 100, 1023, 4096, 4097, 65535, 65536, 65537, 200003, 1 << 20}
	if !testing.Short() {
		sizes = append(sizes, 16<<20)
	}
	for _, n := range sizes {
		t.Run(sizeName(n), func(t *testing.T) {
			c, s := p.dial(t)
			requireMode(t, c, smcr.ModeSMCRv2)
			requireMode(t, s, smcr.ModeSMCRv2)
			exchange(t, c, s, n)
		})
	}
}

// exchange sends n bytes each way at once and checks both arrive intact
// and end with io.EOF after CloseWrite.
func exchange(t *testing.T, a, b io.ReadWriter, n int) {
	t.Helper()
	require.NoError(t, transfer(t, a, b, n))
}

// transfer sends n bytes each way at once. It returns the first error of
// a Read or Write; without one, both directions must have arrived intact.
func transfer(t *testing.T, a, b io.ReadWriter, n int) error {
	t.Helper()
	out := [2][]byte{make([]byte, n), make([]byte, n)}
	pattern(out[0], n)
	pattern(out[1], n+1)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	send := func(w io.Writer, p []byte) {
		defer wg.Done()
		if _, err := w.Write(p); err != nil {
			errs <- err
			return
		}
		if cw, ok := w.(interface{ CloseWrite() error }); ok {
			if err := cw.CloseWrite(); err != nil {
				errs <- err
			}
		}
	}
	got := [2][]byte{}
	recv := func(r io.Reader, i int) {
		defer wg.Done()
		b, err := io.ReadAll(r)
		got[i] = b
		if err != nil {
			errs <- err
		}
	}
	wg.Add(4)
	go send(a, out[0])
	go send(b, out[1])
	go recv(b, 0)
	go recv(a, 1)
	wait(t, &wg, 120*time.Second)
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	require.True(t, bytes.Equal(out[0], got[0]), "a→b: %d bytes sent, %d received", len(out[0]), len(got[0]))
	require.True(t, bytes.Equal(out[1], got[1]), "b→a: %d bytes sent, %d received", len(out[1]), len(got[1]))
	return nil
}

// wait waits for wg, failing after limit (a hang guard).
func wait(t *testing.T, wg *sync.WaitGroup, limit time.Duration) {
	t.Helper()
	waitOr(t, wg, limit, func() {})
}

// waitOr is wait, with report telling what hung.
func waitOr(t *testing.T, wg *sync.WaitGroup, limit time.Duration, report func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		report()
		t.Fatal("hang")
	}
}

// io.Copy uses the connection's ReadFrom and WriteTo (no extra buffer).
func TestCopy(t *testing.T) {
	noLeaks(t)
	p := newPair(t, nil)
	c, s := p.dial(t)
	const n = 3<<20 + 17
	src := make([]byte, n)
	pattern(src, 5)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the server echoes with io.Copy (WriteTo of the conn)
		defer wg.Done()
		_, err := io.Copy(s, s)
		require.NoError(t, err)
		require.NoError(t, s.(*smcr.Conn).CloseWrite())
	}()
	var got bytes.Buffer
	go func() {
		defer wg.Done()
		_, err := io.Copy(&got, c)
		require.NoError(t, err)
	}()
	m, err := io.Copy(c, bytes.NewReader(src)) // ReadFrom of the conn
	require.NoError(t, err)
	require.EqualValues(t, n, m)
	require.NoError(t, c.(*smcr.Conn).CloseWrite())
	wait(t, &wg, 60*time.Second)
	require.True(t, bytes.Equal(src, got.Bytes()))
	ic, _ := smcr.Info(c)
	require.EqualValues(t, n, ic.BytesSent)
	require.EqualValues(t, n, ic.BytesReceived)
}

// Deadlines: a Read with nothing to read, and a Write the peer's RMB has no
// room for, end with os.ErrDeadlineExceeded; a deadline in the past fails
// at once; clearing it lets them go on.
func TestDeadlines(t *testing.T) {
	noLeaks(t)
	p := newPair(t, nil)
	c, s := p.dial(t)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err := c.Read(make([]byte, 8))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)

	// Nobody reads s: the client's writes fill its RMB, then block.
	require.NoError(t, c.SetWriteDeadline(time.Now().Add(50*time.Millisecond)))
	big := make([]byte, 1<<20)
	n, err := c.Write(big)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.Less(t, n, len(big))
	require.Positive(t, n)

	require.NoError(t, c.SetWriteDeadline(time.Time{}))
	require.NoError(t, c.SetReadDeadline(time.Time{}))
	go func() { // now read everything the server gets
		buf := make([]byte, 1<<20)
		total := 0
		for total < n+5 {
			k, err := s.Read(buf)
			if err != nil {
				return
			}
			total += k
		}
	}()
	_, err = c.Write([]byte("after"))
	require.NoError(t, err)

	require.NoError(t, c.SetReadDeadline(time.Now().Add(-time.Second)))
	_, err = c.Read(make([]byte, 1))
	require.True(t, errors.Is(err, os.ErrDeadlineExceeded))
}
