package smcr

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// snapshot builds a publisher's answer from a header and socket lines.
func snapshot(header string, lines ...string) string {
	return publishMagic + "\n" + header + "\n" + strings.Join(append(lines, ""), "\n")
}

// What a hostile or broken publisher can send a reader: every case is
// refused with an error, never a panic, and nothing grows past the bounds.
func TestReadSnapshotHostile(t *testing.T) {
	sock := `{"state":"ACTIVE","mode":"smcr-v2","local":"127.0.0.1:1","peer":"127.0.0.2:2"}`
	manyLinks := `{"state":"ACTIVE","links":[` + strings.Repeat(`{},`, maxLinksPerSock) + `{}]}`
	tests := []struct {
		name, in, err string
	}{
		{"empty", "", "magic line: unexpected EOF"},
		{"another protocol", "goroce-counters 1\nname x\n", "not a goroce SMC publisher"},
		{"a newer version", "goroce-smc 3\n{}\n", "not a goroce SMC publisher"},
		{"the old version", "goroce-smc 1\n{}\n", "not a goroce SMC publisher"},
		{"a magic line without end", strings.Repeat("g", maxLineBytes+1), "longer than"},
		{"no header", publishMagic + "\n", "header: unexpected EOF"},
		{"header not JSON", snapshot("pid 1"), "header:"},
		{"negative count", snapshot(`{"sockets":-1}`), "out of range"},
		{"a count past the bound", snapshot(fmt.Sprintf(`{"sockets":%d}`, MaxPublishedSockets+1)), "out of range"},
		{"negative more", snapshot(`{"sockets":0,"more":-5}`), "out of range"},
		{"fewer sockets than announced", snapshot(`{"sockets":2}`, sock), "socket 2 of 2: unexpected EOF"},
		{"more sockets than announced", snapshot(`{"sockets":1}`, sock, sock), "more than the 1 sockets"},
		{"a socket line not JSON", snapshot(`{"sockets":1}`, "ACTIVE 127.0.0.1:1"), "socket 1 of 1:"},
		{"a wrong type", snapshot(`{"sockets":1}`, `{"state":7}`), "socket 1 of 1:"},
		{"an unknown mode", snapshot(`{"sockets":1}`, `{"mode":"smcd"}`), "unknown mode"},
		{"a bad address", snapshot(`{"sockets":1}`, `{"local":"300.0.0.1:1"}`), "socket 1 of 1:"},
		{"too many links", snapshot(`{"sockets":1}`, manyLinks), "links (at most"},
		{"a socket line too long", snapshot(`{"sockets":1}`, `{"eid":"`+strings.Repeat("A", maxLineBytes)+`"}`), "longer than"},
		{"deep nesting", snapshot(`{"sockets":1}`, strings.Repeat("[", maxLineBytes/2)), "socket 1 of 1:"},
		{"a NUL in the magic line", "goroce-smc 2\x00\n", "not a goroce SMC publisher"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readSnapshot(strings.NewReader(tt.in))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.err)
		})
	}
}

// A snapshot larger than the bound is cut off there, even when every line
// is well formed: the reader stops reading.
func TestReadSnapshotBounded(t *testing.T) {
	line := `{"state":"ACTIVE","eid":"` + strings.Repeat("E", maxLineBytes-100) + `"}`
	var b strings.Builder
	b.WriteString(snapshot(fmt.Sprintf(`{"sockets":%d}`, MaxPublishedSockets)))
	r := &countingReader{r: strings.NewReader(b.String()), more: line + "\n"}
	_, err := readSnapshot(r)
	require.ErrorContains(t, err, "larger than")
	assert.LessOrEqual(t, r.n, int64(maxSnapshotBytes+1), "read no more than the bound")
}

// countingReader serves r, then more over and over, counting bytes.
type countingReader struct {
	r    *strings.Reader
	more string
	off  int
	n    int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, _ := c.r.Read(p)
	if n == 0 {
		n = copy(p, c.more[c.off:])
		c.off = (c.off + n) % len(c.more)
	}
	c.n += int64(n)
	return n, nil
}

func TestReadSnapshotRoundTrip(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeSnapshot(&b))
	p, err := readSnapshot(&b)
	require.NoError(t, err)
	assert.Equal(t, os.Getpid(), p.PID)
	assert.Equal(t, p.Count, len(p.Sockets))
}

func FuzzReadSnapshot(f *testing.F) {
	var b bytes.Buffer
	require.NoError(f, writeSnapshot(&b))
	f.Add(b.Bytes())
	f.Add([]byte(snapshot(`{"pid":1,"sockets":1}`, `{"state":"ACTIVE","mode":"smcr-v2","local":"127.0.0.1:1","links":[{"ID":1,"LocalGID":"::ffff:127.0.0.1"}]}`)))
	f.Add([]byte(snapshot(`{"sockets":1}`, `{"state":"LISTEN","local":"[::1]:5"}`)))
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := readSnapshot(bytes.NewReader(in))
		if err == nil {
			require.Len(t, p.Sockets, p.Count)
			for _, s := range p.Sockets {
				require.LessOrEqual(t, len(s.Links), maxLinksPerSock)
			}
		}
	})
}

// The publisher reads nothing: bytes a client sends it are ignored, and a
// client that never reads does not stop the next one's snapshot.
func TestPublisherIgnoresClientBytes(t *testing.T) {
	pub, err := Publish(t.TempDir())
	require.NoError(t, err)
	defer pub.Close()
	for _, junk := range [][]byte{nil, []byte("GET / HTTP/1.0\r\n\r\n"), bytes.Repeat([]byte{0xff}, 1<<20)} {
		c, err := net.Dial("unix", pub.Path())
		require.NoError(t, err)
		go c.Write(junk) // may fail once the publisher closed
		got, err := readSnapshot(c)
		c.Close()
		require.NoError(t, err)
		assert.Equal(t, os.Getpid(), got.PID)
	}
	// A client that never reads, and a reader after it.
	idle, err := net.Dial("unix", pub.Path())
	require.NoError(t, err)
	defer idle.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // hang guard only
	defer cancel()
	_, err = ReadPublished(ctx, pub.Path())
	require.NoError(t, err)
}

// The close flags map onto Linux's socket states and shutdown mask.
func TestSocketStates(t *testing.T) {
	tests := []struct {
		name  string
		set   func(s *smcConn)
		state string
		shut  uint8
	}{
		{"open", func(s *smcConn) {}, "ACTIVE", 0},
		{"CloseWrite", func(s *smcConn) { s.doneWriting = true }, "PEERCLOSEWAIT1", 2},
		{"Close", func(s *smcConn) { s.closed = true }, "PEERCLOSEWAIT1", 2},
		{"peer done writing", func(s *smcConn) { s.peerDoneWriting = true }, "APPCLOSEWAIT1", 1},
		{"peer closed", func(s *smcConn) { s.peerClosed = true }, "APPCLOSEWAIT1", 1},
		{"peer aborted", func(s *smcConn) { s.peerAborted = true }, "PROCESSABORT", 1},
		{"both done writing", func(s *smcConn) { s.doneWriting, s.peerDoneWriting = true, true }, "PEERCLOSEWAIT2", 3},
		{"CloseWrite, peer closed", func(s *smcConn) { s.doneWriting, s.peerClosed = true, true }, "APPFINCLOSEWAIT", 3},
		{"Close, peer done writing", func(s *smcConn) { s.closed, s.peerDoneWriting = true, true }, "PEERFINCLOSEWAIT", 3},
		{"both closed", func(s *smcConn) { s.closed, s.peerClosed = true, true }, "CLOSED", 3},
		{"closed after the peer's abort", func(s *smcConn) { s.closed, s.peerAborted = true, true }, "CLOSED", 3},
		{"link group ended", func(s *smcConn) { s.err = errLinkGroupEnd }, "CLOSED", 0},
		{"freed", func(s *smcConn) { s.freed, s.closed = true, true }, "CLOSED", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &smcConn{}
			tt.set(s)
			state, shut := s.state()
			assert.Equal(t, tt.state, state)
			assert.Equal(t, tt.shut, shut)
		})
	}
}

func TestModeText(t *testing.T) {
	for _, m := range []Mode{ModeFallback, ModeSMCRv1, ModeSMCRv2} {
		b, err := m.MarshalText()
		require.NoError(t, err)
		var got Mode
		require.NoError(t, got.UnmarshalText(b))
		assert.Equal(t, m, got)
	}
	_, err := Mode(9).MarshalText()
	assert.Error(t, err)
}
