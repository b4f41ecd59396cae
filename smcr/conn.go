package smcr

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/smcr/smcwire"
	"github.com/goroce/goroce/smcr/tcpopt"
)

// Conn is a connection from Listener.Accept or Dialer.DialContext: SMC-R
// when the handshake chose it, else the TCP connection it ran over
// (fallback), untouched. It implements net.Conn, CloseWrite, and
// io.ReaderFrom / io.WriterTo (which move data straight between the
// connection's buffers and the other end).
type Conn struct {
	tcp  *net.TCPConn
	sig  *tcpopt.Signaller // to Forget the socket when it closes
	info ConnInfo          // the handshake's part; counters are live
	smc  *smcConn          // nil for a fallback connection
	st   *stack            // the stack an SMC connection holds a reference on

	closeOnce sync.Once
	tcpOnce   sync.Once
	reset     atomic.Bool // close the TCP connection with a reset (a killed link group)
}

var (
	_ net.Conn      = (*Conn)(nil)
	_ io.ReaderFrom = (*Conn)(nil)
	_ io.WriterTo   = (*Conn)(nil)
)

// newFallback returns a fallback connection over tcp, with the reason.
func newFallback(tcp *net.TCPConn, sig *tcpopt.Signaller, info ConnInfo, diag smcwire.DiagCode, by string) *Conn {
	info.Mode, info.Fallback, info.FallbackBy = ModeFallback, diag, by
	stats.countFallback(info.Role == "server", diag)
	c := &Conn{tcp: tcp, sig: sig, info: info}
	track(c)
	return c
}

// Read reads data from the connection.
func (c *Conn) Read(p []byte) (int, error) {
	if c.smc != nil {
		return c.smc.read(p)
	}
	return c.tcp.Read(p)
}

// Write writes data to the connection. Over SMC-R it returns once every
// byte is posted to the peer's RMB (waiting for room as TCP waits for its
// window).
func (c *Conn) Write(p []byte) (int, error) {
	if c.smc != nil {
		return c.smc.write(p)
	}
	return c.tcp.Write(p)
}

// ReadFrom copies r into the connection until EOF.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if c.smc != nil {
		return c.smc.readFrom(r)
	}
	return c.tcp.ReadFrom(r)
}

// WriteTo copies the connection's data into w until EOF.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	if c.smc != nil {
		return c.smc.writeTo(w)
	}
	return io.Copy(w, c.tcp)
}

// CloseWrite shuts down the writing side (SMC-R: peer_done_writing): the
// peer reads io.EOF after the data sent before.
func (c *Conn) CloseWrite() error {
	if c.smc != nil {
		return c.smc.closeWrite()
	}
	return c.tcp.CloseWrite()
}

// Close closes the connection. Over SMC-R, with nothing left unread it
// sends peer_conn_closed and the TCP connection closes once the peer has
// closed too; with unread data it aborts (peer_conn_abort), as Linux does.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		if c.smc != nil {
			err = c.smc.close()
			return
		}
		c.closeTCP()
	})
	return err
}

// SetLinger sets what Close does with a connection's unfinished business,
// as TCP's SO_LINGER: sec 0 makes Close abort (SMC-R: peer_conn_abort,
// whatever is unread; over TCP fallback: a reset), for a peer that must
// see an abort; a negative or positive sec keeps the default (an orderly
// close unless data is unread).
func (c *Conn) SetLinger(sec int) error {
	if c.smc != nil {
		c.smc.mu.Lock()
		c.smc.abortOnClose = sec == 0
		c.smc.mu.Unlock()
		return nil
	}
	return c.tcp.SetLinger(sec)
}

// closeTCP closes the TCP connection and drops what the stack holds for
// it; once.
func (c *Conn) closeTCP() {
	c.tcpOnce.Do(func() {
		untrack(c)
		if c.sig != nil {
			c.sig.Forget(c.tcp)
		}
		switch {
		case c.reset.Load():
			_ = c.tcp.SetLinger(0) // RST, as Linux's tcp_abort
		case c.smc != nil:
			_ = c.tcp.SetLinger(-1) // the default again: an orderly close (see watchTCP)
		}
		_ = c.tcp.Close()
		if c.st != nil {
			c.st.release()
		}
	})
}

// LocalAddr returns the TCP connection's local address.
func (c *Conn) LocalAddr() net.Addr { return c.tcp.LocalAddr() }

// RemoteAddr returns the TCP connection's remote address.
func (c *Conn) RemoteAddr() net.Addr { return c.tcp.RemoteAddr() }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if c.smc != nil {
		c.smc.rdl.set(t)
		c.smc.wdl.set(t)
		return nil
	}
	return c.tcp.SetDeadline(t)
}

// SetReadDeadline sets the deadline of Read (os.ErrDeadlineExceeded).
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.smc != nil {
		c.smc.rdl.set(t)
		return nil
	}
	return c.tcp.SetReadDeadline(t)
}

// SetWriteDeadline sets the deadline of Write.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.smc != nil {
		c.smc.wdl.set(t)
		return nil
	}
	return c.tcp.SetWriteDeadline(t)
}

// Info returns what is known of the connection (see ConnInfo).
func (c *Conn) Info() ConnInfo {
	i := c.info
	if s := c.smc; s != nil {
		i.BytesSent, i.BytesReceived = s.bytesSent.Load(), s.bytesRecv.Load()
		i.Token, i.PeerToken = s.token, s.peerTok
		i.LocalRMBSize, i.PeerRMBSize, i.SendBufSize = len(s.rmb), int(s.peerSize), len(s.snd)
		i.LinkGroup = s.g.id
		i.LinkGroupType, i.Links = s.g.linkInfos(s.link())
	}
	return i
}
