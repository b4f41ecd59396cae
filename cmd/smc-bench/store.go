package main

import (
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/redcon"
)

// store is the RESP server's in-memory keyspace: strings and lists, the
// commands redis-benchmark's tests use (GET, SET, PING, INCR, LPUSH,
// LRANGE). Every other command is an error, as an unknown one is to
// redis-server (go-redis's HELLO then falls back to RESP2).
type store struct {
	mu    sync.RWMutex
	str   map[string][]byte
	lists map[string][][]byte
}

// Bounds on what clients may store: the server must not grow without limit
// whatever a client sends.
const (
	maxKeys    = 1 << 20
	maxListLen = 1 << 16
)

func newStore() *store { return &store{str: map[string][]byte{}, lists: map[string][][]byte{}} }

func (s *store) handle(c redcon.Conn, cmd redcon.Command) {
	args := cmd.Args
	switch strings.ToLower(string(args[0])) {
	case "ping":
		switch len(args) {
		case 1:
			c.WriteString("PONG")
		case 2:
			c.WriteBulk(args[1])
		default:
			wrongArgs(c, args[0])
		}
	case "get":
		if len(args) != 2 {
			wrongArgs(c, args[0])
			return
		}
		s.mu.RLock()
		v, ok := s.str[string(args[1])]
		if ok {
			c.WriteBulk(v) // copied into the reply buffer under the lock
		}
		s.mu.RUnlock()
		if !ok {
			c.WriteNull()
		}
	case "set":
		if len(args) != 3 {
			wrongArgs(c, args[0])
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		old, ok := s.str[string(args[1])]
		if !ok && len(s.str)+len(s.lists) >= maxKeys {
			c.WriteError("ERR max number of keys reached")
			return
		}
		// Reuse the value's memory when it fits: SET of the same key at
		// the benchmark's rate should not allocate per request.
		if cap(old) >= len(args[2]) {
			s.str[string(args[1])] = append(old[:0], args[2]...)
		} else {
			s.str[string(args[1])] = append([]byte(nil), args[2]...)
		}
		c.WriteString("OK")
	case "incr":
		if len(args) != 2 {
			wrongArgs(c, args[0])
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		v, ok := s.str[string(args[1])]
		if !ok && len(s.str)+len(s.lists) >= maxKeys {
			c.WriteError("ERR max number of keys reached")
			return
		}
		n := int64(0)
		if ok {
			var err error
			if n, err = strconv.ParseInt(string(v), 10, 64); err != nil {
				c.WriteError("ERR value is not an integer or out of range")
				return
			}
		}
		n++
		s.str[string(args[1])] = strconv.AppendInt(v[:0], n, 10)
		c.WriteInt64(n)
	case "lpush":
		if len(args) < 3 {
			wrongArgs(c, args[0])
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		l, ok := s.lists[string(args[1])]
		if !ok && len(s.str)+len(s.lists) >= maxKeys {
			c.WriteError("ERR max number of keys reached")
			return
		}
		for _, v := range args[2:] {
			l = append(l, append([]byte(nil), v...))
		}
		if len(l) > maxListLen { // keep the newest, as a capped list
			l = append(l[:0:0], l[len(l)-maxListLen:]...)
		}
		s.lists[string(args[1])] = l
		c.WriteInt(len(l))
	case "lrange":
		if len(args) != 4 {
			wrongArgs(c, args[0])
			return
		}
		start, err1 := strconv.Atoi(string(args[2]))
		stop, err2 := strconv.Atoi(string(args[3]))
		if err1 != nil || err2 != nil {
			c.WriteError("ERR value is not an integer or out of range")
			return
		}
		s.mu.RLock()
		defer s.mu.RUnlock()
		// The list is kept oldest first; LPUSH puts the newest at the
		// head, so index i is l[len-1-i].
		l := s.lists[string(args[1])]
		lo, hi := rangeOf(start, stop, len(l))
		c.WriteArray(hi - lo)
		for i := lo; i < hi; i++ {
			c.WriteBulk(l[len(l)-1-i])
		}
	default:
		c.WriteError("ERR unknown command '" + string(args[0]) + "'")
	}
}

// rangeOf turns LRANGE's inclusive, possibly negative, indexes into a
// half-open range within n elements.
func rangeOf(start, stop, n int) (int, int) {
	if start < 0 {
		start += n
	}
	if stop < 0 {
		stop += n
	}
	start = max(start, 0)
	stop = min(stop, n-1)
	if start > stop {
		return 0, 0
	}
	return start, stop + 1
}

func wrongArgs(c redcon.Conn, name []byte) {
	c.WriteError("ERR wrong number of arguments for '" + strings.ToLower(string(name)) + "' command")
}
