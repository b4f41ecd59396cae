package main

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The TCP baseline: the same request/response shape over loopback TCP
// connections, one goroutine per connection on each side.

// tcpServe answers every req-byte request with a resp-byte response until
// the listener closes; it returns when every connection has ended.
func tcpServe(ln net.Listener, req, resp int) {
	var wg sync.WaitGroup
	for {
		c, err := ln.Accept()
		if err != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			in, out := make([]byte, req), make([]byte, resp)
			for {
				if _, err := io.ReadFull(c, in); err != nil {
					return
				}
				if _, err := c.Write(out); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// tcpClient runs n connections to addr for d and returns the transactions.
func tcpClient(addr string, n, req, resp int, d time.Duration, h *hist) (uint64, error) {
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return 0, err
		}
		conns = append(conns, c)
	}
	var total atomic.Uint64
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, in := make([]byte, req), make([]byte, resp)
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if _, err := c.Write(out); err != nil {
					return
				}
				if _, err := io.ReadFull(c, in); err != nil {
					return
				}
				h.add(time.Since(t0))
				total.Add(1)
			}
		}()
	}
	wg.Wait()
	return total.Load(), nil
}
