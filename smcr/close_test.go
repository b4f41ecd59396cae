package smcr_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/smcr"
)

// Every close order: what each side reads and writes afterwards, and that
// no byte sent before a close is lost.
func TestCloseOrders(t *testing.T) {
	noLeaks(t)
	p := newPair(t, nil)
	data := make([]byte, 300000)
	pattern(data, 9)
	closeWrite := func(c net.Conn) error { return c.(*smcr.Conn).CloseWrite() }
	tests := []struct {
		name string
		run  func(t *testing.T, c, s net.Conn)
	}{
		{"client shuts down writing, then both close", func(t *testing.T, c, s net.Conn) {
			go func() {
				_, err := c.Write(data)
				require.NoError(t, err)
				require.NoError(t, closeWrite(c))
			}()
			got, err := io.ReadAll(s)
			require.NoError(t, err, "the server reads everything, then io.EOF")
			require.Equal(t, data, got)
			_, err = c.Write([]byte("x"))
			require.Error(t, err, "no write after CloseWrite")
			_, err = s.Write([]byte("still"))
			require.NoError(t, err, "the other direction stays open")
			buf := make([]byte, 5)
			_, err = io.ReadFull(c, buf)
			require.NoError(t, err)
			require.NoError(t, s.Close())
			_, err = io.ReadAll(c)
			require.NoError(t, err)
			require.NoError(t, c.Close())
		}},
		{"server closes first", func(t *testing.T, c, s net.Conn) {
			go func() {
				_, err := s.Write(data)
				require.NoError(t, err)
				require.NoError(t, s.Close())
			}()
			got, err := io.ReadAll(c)
			require.NoError(t, err)
			require.Equal(t, data, got)
			waitErr(t, func() error { _, err := c.Write([]byte("x")); return err })
			require.NoError(t, c.Close())
		}},
		{"both close at once", func(t *testing.T, c, s net.Conn) {
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); require.NoError(t, c.Close()) }()
			go func() { defer wg.Done(); require.NoError(t, s.Close()) }()
			wait(t, &wg, 30*time.Second)
		}},
		{"close with unread data aborts", func(t *testing.T, c, s net.Conn) {
			_, err := s.Write([]byte("never read"))
			require.NoError(t, err)
			waitReadable(t, c)
			require.NoError(t, c.Close()) // unread data: abort
			_, err = io.ReadAll(s)
			require.Error(t, err, "the server sees the reset")
			waitErr(t, func() error { _, err := s.Write([]byte("x")); return err })
			require.NoError(t, s.Close())
		}},
		{"a WriteTo's writer that closes once it has everything closes, not aborts", func(t *testing.T, c, s net.Conn) {
			_, err := s.Write(data[:1000])
			require.NoError(t, err)
			w := &closeAt{c: c, n: 1000}
			_, err = c.(io.WriterTo).WriteTo(w)
			require.Error(t, err, "WriteTo ends with its own Close")
			require.Equal(t, 1000, w.got)
			_, err = io.ReadAll(s)
			require.NoError(t, err, "the peer reads io.EOF, no reset")
			require.NoError(t, s.Close())
		}},
		{"SetLinger(0) makes Close abort with nothing unread", func(t *testing.T, c, s net.Conn) {
			require.NoError(t, c.(*smcr.Conn).SetLinger(0))
			require.NoError(t, c.Close())
			_, err := io.ReadAll(s)
			require.Error(t, err, "the server sees the reset")
			require.NoError(t, s.Close())
		}},
		{"reads and writes after Close fail", func(t *testing.T, c, s net.Conn) {
			require.NoError(t, c.Close())
			_, err := c.Read(make([]byte, 1))
			require.Error(t, err)
			_, err = c.Write([]byte("x"))
			require.Error(t, err)
			require.NoError(t, c.Close(), "closing twice is harmless")
			_, err = io.ReadAll(s)
			require.NoError(t, err, "the peer reads io.EOF")
			require.NoError(t, s.Close())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, s := p.dial(t)
			tt.run(t, c, s)
		})
	}
}

// waitReadable waits until c has data (a Read of one byte would not block),
// without reading it: the peer's CDC must have arrived for a test about
// unread data.
func waitReadable(t *testing.T, c net.Conn) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if i, _ := smcr.Info(c); i.BytesReceived > 0 || smcr.Pending(c) > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no data arrived")
}

// waitErr waits until op fails (the peer's close has arrived).
func waitErr(t *testing.T, op func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := op(); err != nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the operation never failed")
}

var _ = errors.Is

// closeAt is a writer that closes c once it got n bytes, from inside
// Write, as an application closes a connection once it has what it wants.
type closeAt struct {
	c   net.Conn
	n   int
	got int
}

func (w *closeAt) Write(p []byte) (int, error) {
	w.got += len(p)
	if w.got >= w.n {
		w.c.Close()
	}
	return len(p), nil
}
