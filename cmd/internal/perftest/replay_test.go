package perftest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/rxevectors"
)

const rxeDir = "../../../conformance/testdata/rxe"

// tcpMsg is one TCP payload of a capture, and which side sent it.
type tcpMsg struct {
	fromClient bool
	data       []byte
}

// oobMessages returns the TCP payloads of perftest's exchange (port 18515)
// in a capture, in order.
func oobMessages(t *testing.T, name string) []tcpMsg {
	t.Helper()
	frames, err := rxevectors.Frames(filepath.Join(rxeDir, name+".pcap"))
	require.NoError(t, err)
	var out []tcpMsg
	for _, f := range frames {
		pkt := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		tcp, ok := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if !ok || len(tcp.Payload) == 0 {
			continue
		}
		out = append(out, tcpMsg{fromClient: tcp.DstPort == defPort, data: tcp.Payload})
	}
	require.NotEmpty(t, out)
	return out
}

// goldenOutput returns one side's output in a capture's .txt.
func goldenOutput(t *testing.T, name, side string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rxeDir, name+".txt"))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "--- "+side)
	require.True(t, ok, side)
	_, rest, _ = strings.Cut(rest, "\n")
	body, _, _ := strings.Cut(rest, "\n--- ")
	return strings.Split(strings.TrimSuffix(body, "\n"), "\n")
}

// lineWriter collects output and tells when a line with a given text has
// been written.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	want  string
	found chan struct{}
}

func newLineWriter(want string) *lineWriter {
	return &lineWriter{want: want, found: make(chan struct{})}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.found)
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestReplayRxeClient plays the client side of perftest 6.06 runs on rxe,
// byte for byte as captured, against goroce's server: the server must
// answer each exchange with a message of the size the rxe server sent,
// accept every byte the real client sent, and print what the rxe server
// printed (its own addresses and the device's name aside), down to the
// client's report it got over the wire.
func TestReplayRxeClient(t *testing.T) {
	for _, tc := range []struct {
		capture string
		test    *Test
		args    []string
	}{
		{"write_bw", WriteBW, []string{"-x", "1", "-F", "-n", "5", "-s", "4096"}},
		{"read_bw", ReadBW, []string{"-x", "1", "-F", "-n", "5", "-s", "4096"}},
		{"atomic_fetch_add", AtomicBW, []string{"-x", "1", "-F", "-n", "5", "-A", "FETCH_AND_ADD"}},
	} {
		t.Run(tc.capture, func(t *testing.T) {
			msgs := oobMessages(t, tc.capture)
			port := freeTCPPort(t)
			out := newLineWriter("Waiting for client to connect")
			args := append([]string{"-d", "127.0.0.1", "-udp-port", strconv.Itoa(freeUDPPort(t)),
				"-p", strconv.Itoa(port), "--timeout", "20s"}, tc.args...)
			status := make(chan int, 1)
			go func() { status <- Main(tc.test, args, out, out) }()
			select {
			case <-out.found:
			case s := <-status:
				require.FailNow(t, fmt.Sprintf("server exited with %d", s), out.String())
			}
			conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			require.NoError(t, err)
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(20 * time.Second))

			var got []byte
			for i, m := range msgs {
				if m.fromClient {
					_, err := conn.Write(m.data)
					if i < len(msgs)-1 || !bytes.Equal(m.data, []byte("done\x00")) {
						require.NoError(t, err, "message %d", i)
					}
					continue
				}
				b := make([]byte, len(m.data))
				_, err := io.ReadFull(conn, b)
				require.NoError(t, err, "message %d: %d bytes from the server; so far: %q\n%s", i, len(m.data), got, out.String())
				got = append(got, b...)
				switch len(m.data) {
				case maxVersion:
					assert.Equal(t, append([]byte(Version), make([]byte, maxVersion-len(Version))...), b)
				case recordLenGID:
					_, err := parseDest(b, true)
					assert.NoError(t, err)
				case 5:
					assert.Equal(t, []byte("done\x00"), b)
				case 2:
					assert.Equal(t, []byte("5\x00"), b, "IB MTU 4096 on loopback")
				}
			}
			// Nothing more: the server closes (with a reset if our
			// "done" was still unread, as perftest's close does).
			n, err := conn.Read(make([]byte, 1))
			assert.Equal(t, 0, n)
			if !errors.Is(err, syscall.ECONNRESET) {
				assert.ErrorIs(t, err, io.EOF)
			}
			require.Equal(t, 0, <-status, out.String())

			want := goldenOutput(t, tc.capture, "vm1 (server) output")
			have := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			norm := func(lines []string) []string {
				var o []string
				skip := 0
				for _, l := range lines {
					switch {
					case skip > 0:
						skip--
						continue
					case strings.HasPrefix(l, " local address:"):
						skip = 1 // and its GID line: this device's own
						continue
					case strings.HasPrefix(l, "Device not recognized"):
						continue // stderr, where stdio's buffering put it
					}
					o = append(o, strings.ReplaceAll(l, "rxe0", deviceName))
				}
				return o
			}
			assert.Equal(t, norm(want), norm(have))
			assert.Contains(t, out.String(), " local address: LID 0000 QPN 0x")
			if tc.test.verb == Read {
				assert.Contains(t, out.String(), "Device not recognized to implement inline feature. Disabling it\n")
			}
		})
	}
}

// freeTCPPort returns a TCP port nobody listens on right now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// freeUDPPort returns a UDP port free on both test addresses.
func freeUDPPort(t *testing.T) int {
	t.Helper()
	for range 20 {
		a, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(serverAddr)})
		require.NoError(t, err)
		port := a.LocalAddr().(*net.UDPAddr).Port
		b, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(clientAddr), Port: port})
		a.Close()
		if err == nil {
			b.Close()
			return port
		}
	}
	require.FailNow(t, "no UDP port free on both "+serverAddr+" and "+clientAddr)
	return 0
}

// The two ends' addresses: two loopback addresses, so that both devices
// bind the same UDP port as RoCEv2 peers do.
const (
	serverAddr = "127.0.0.1"
	clientAddr = "127.0.0.2"
)
