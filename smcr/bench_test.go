package smcr_test

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/race"
	"github.com/goroce/goroce/smcr"
)

// The SMC-R data path against TCP loopback with the same workload in the
// same run: bulk 64 KiB writes, and 64-byte request/response, over one and
// over 64 connections. Compare the pairs of sub-benchmarks (smcr vs tcp),
// never absolute figures across runs.

// connPairs returns n connected (client, server) pairs over transport.
func connPairs(b *testing.B, transport string, n int) (clients, servers []net.Conn) {
	b.Helper()
	var ln net.Listener
	var dial func() (net.Conn, error)
	switch transport {
	case "smcr":
		p := newPair(b, func(c *smcr.Config) {
			c.LinkGroupLinger = time.Second
			if n := benchBuf; n > 0 {
				c.SendBufSize, c.RecvBufSize = n, n
			}
		})
		ln = p.ln
		dial = func() (net.Conn, error) { return p.d.Dial("tcp", ln.Addr().String()) }
	case "tcp":
		srv, cli := freshAddrs()
		l, err := net.Listen("tcp", netip.AddrPortFrom(srv, 0).String())
		require.NoError(b, err)
		b.Cleanup(func() { l.Close() })
		ln = l
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(cli, 0))}
		dial = func() (net.Conn, error) { return d.Dial("tcp", ln.Addr().String()) }
	}
	for range n {
		acc := make(chan net.Conn, 1)
		go func() {
			c, _ := ln.Accept()
			acc <- c
		}()
		c, err := dial()
		require.NoError(b, err)
		s := <-acc
		require.NotNil(b, s)
		if transport == "smcr" {
			requireMode(b, c, smcr.ModeSMCRv2)
		}
		b.Cleanup(func() { c.Close(); s.Close() })
		clients, servers = append(clients, c), append(servers, s)
	}
	return clients, servers
}

func BenchmarkBulk64KiB(b *testing.B) {
	for _, conns := range []int{1, 64} {
		for _, tr := range []string{"smcr", "tcp"} {
			b.Run(fmt.Sprintf("%s/conns=%d", tr, conns), func(b *testing.B) {
				clients, servers := connPairs(b, tr, conns)
				msg := make([]byte, 64<<10)
				b.SetBytes(int64(len(msg)))
				var wg sync.WaitGroup
				for _, s := range servers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						io.Copy(io.Discard, s)
					}()
				}
				b.ResetTimer()
				var sw sync.WaitGroup
				per := (b.N + conns - 1) / conns
				for _, c := range clients {
					sw.Add(1)
					go func() {
						defer sw.Done()
						for range per {
							if _, err := c.Write(msg); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				sw.Wait()
				for _, c := range clients {
					c.(interface{ CloseWrite() error }).CloseWrite()
				}
				wg.Wait()
				b.StopTimer()
			})
		}
	}
}

func BenchmarkRequestResponse64B(b *testing.B) {
	for _, conns := range []int{1, 64} {
		for _, tr := range []string{"smcr", "tcp"} {
			b.Run(fmt.Sprintf("%s/conns=%d", tr, conns), func(b *testing.B) {
				clients, servers := connPairs(b, tr, conns)
				for _, s := range servers {
					go func() {
						buf := make([]byte, 64)
						for {
							if _, err := io.ReadFull(s, buf); err != nil {
								return
							}
							if _, err := s.Write(buf); err != nil {
								return
							}
						}
					}()
				}
				b.ResetTimer()
				var wg sync.WaitGroup
				per := (b.N + conns - 1) / conns
				for _, c := range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						buf := make([]byte, 64)
						for range per {
							if _, err := c.Write(buf); err != nil {
								b.Error(err)
								return
							}
							if _, err := io.ReadFull(c, buf); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
			})
		}
	}
}

// A request/response on an established SMC-R connection allocates nothing:
// Write (an inline WRITE and CDC), the completions, the peer's Read and
// Write, and the Read of the answer, in both processes' worth of code.
func TestDataPathDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	noLeaks(t)
	p := newPair(t, nil)
	c, s := p.dial(t)
	requireMode(t, c, smcr.ModeSMCRv2)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := s.Read(buf)
			if err != nil {
				return
			}
			if _, err := s.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	for _, size := range []int{64, 1000, 4096} {
		t.Run(sizeName(size), func(t *testing.T) {
			out, in := make([]byte, size), make([]byte, size)
			rr := func() {
				if _, err := c.Write(out); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(c, in); err != nil {
					t.Fatal(err)
				}
			}
			for range 200 { // warm up: pools, slices, the CQ's rings
				rr()
			}
			allocs := testing.AllocsPerRun(1000, rr)
			require.Less(t, allocs, 0.05, "allocations per request/response of %d bytes", size)
		})
	}
}

// benchBuf overrides the SMC-R buffer sizes of the benchmarks
// (-smcr.bufsize).
var benchBuf int

func init() {
	flag.IntVar(&benchBuf, "smcr.bufsize", 0, "SMC-R send buffer and RMB size for the benchmarks (0: the default)")
}
