package smcr

import (
	"fmt"

	"github.com/goroce/goroce/rocev2/device"
)

// maxLinks is how many links a link group has at most (Linux's
// SMC_LINKS_PER_LGR_MAX: two, and a third while an asymmetric one is
// replaced), and addLinksMax how many it asks for (SMC_LINKS_ADD_LNK_MAX).
const (
	maxLinks    = 3
	addLinksMax = 2
)

// A buffer is a connection's RMB or send buffer with its memory regions,
// one per link of the group (each link has a protection domain of its
// own, Linux's rmb_desc->mr[link_idx]). The regions are the group's to
// change, under its mu: a buffer is registered on every link that is not
// down, from when it is created (newBuffer) or when the link is added
// (registerLink) until the link is cleared (clearLink) or the buffer goes.
// A connection reads the region of the link it sends on, which cannot
// change while it does.
type buffer struct {
	mem    []byte
	remote bool // an RMB: the peer writes into it
	mrs    [maxLinks]*device.MR
}

// access is what a buffer's regions allow.
func (b *buffer) access() device.Access {
	if b.remote {
		return device.AccessLocalWrite | device.AccessRemoteWrite
	}
	return 0
}

// newBufferLocked registers mem on every link of the group that is not
// down and keeps it in the group's buffers. mu is held.
func (g *linkGroup) newBufferLocked(mem []byte, remote bool) (*buffer, error) {
	b := &buffer{mem: mem, remote: remote}
	for _, l := range g.links {
		if l == nil || l.down.Load() {
			continue
		}
		mr, err := l.pd.RegisterMR(mem, b.access())
		if err != nil {
			b.deregister()
			return nil, fmt.Errorf("smcr: register a buffer on link %d: %w", l.id, err)
		}
		b.mrs[l.idx] = mr
	}
	g.bufs[b] = struct{}{}
	return b, nil
}

// freeBuffer deregisters b on every link and forgets it.
func (g *linkGroup) freeBuffer(b *buffer) {
	g.mu.Lock()
	delete(g.bufs, b)
	b.deregister()
	g.mu.Unlock()
}

// deregister drops every region of b. The group's mu is held (or b is
// no one else's yet).
func (b *buffer) deregister() {
	for i, mr := range b.mrs {
		if mr != nil {
			_ = mr.Deregister()
			b.mrs[i] = nil
		}
	}
}

// registerLinkLocked registers every buffer of the group on l, a link
// being added: from then on the connections' buffers are reachable
// through it too. mu is held.
func (g *linkGroup) registerLinkLocked(l *link) error {
	for b := range g.bufs {
		mr, err := l.pd.RegisterMR(b.mem, b.access())
		if err != nil {
			return fmt.Errorf("smcr: register a buffer on the new link %d: %w", l.id, err)
		}
		b.mrs[l.idx] = mr
	}
	return nil
}

// clearLinkLocked deregisters every buffer of the group on l, whose queue
// pair is gone (nothing reaches them through it), and forgets the peer's
// rkeys on it. mu is held.
func (g *linkGroup) clearLinkLocked(l *link) {
	for b := range g.bufs {
		if mr := b.mrs[l.idx]; mr != nil && mr.PD() == l.pd {
			_ = mr.Deregister()
			b.mrs[l.idx] = nil
		}
	}
	for i := range g.rtoks {
		g.rtoks[i].set[l.idx] = rtoken{}
	}
}

// rkeyOn returns b's rkey on link idx (0 when it has no region there).
func (b *buffer) rkeyOn(idx int) uint32 {
	if mr := b.mrs[idx]; mr != nil {
		return mr.RKey()
	}
	return 0
}

// An rtoken is one of the peer's RMBs as one link reaches it: the rkey
// and virtual address its WRITEs use there.
type rtoken struct {
	rkey uint32
	va   uint64
}

// An rtokenEntry is one RMB of the peer on every link (Linux's
// lgr->rtokens[i][link_idx]): the rkeys arrive with CONFIRM_RKEY (all
// links), the CLC message (the connection's link) and ADD_LINK (a new
// link), and leave with DELETE_RKEY.
type rtokenEntry struct {
	used bool
	set  [maxLinks]rtoken
}

// maxRTokens bounds the peer's RMBs a group keeps (Linux's
// SMC_RMBS_PER_LGR_MAX): a peer that announces more gets negative
// answers, and hurts only its own group.
const maxRTokens = 255

// rtokenAddLocked records the peer's RMB (rkey, va) on link idx and
// returns its entry: the existing one with that rkey and address on that
// link, or a new one; -1 when the table is full. mu is held.
func (g *linkGroup) rtokenAddLocked(idx int, rkey uint32, va uint64) int {
	free := -1
	for i := range g.rtoks {
		e := &g.rtoks[i]
		if e.used && e.set[idx] == (rtoken{rkey, va}) {
			return i
		}
		if !e.used && free < 0 {
			free = i
		}
	}
	if free < 0 {
		if len(g.rtoks) >= maxRTokens {
			return -1
		}
		g.rtoks = append(g.rtoks, rtokenEntry{})
		free = len(g.rtoks) - 1
	}
	g.rtoks[free] = rtokenEntry{used: true}
	g.rtoks[free].set[idx] = rtoken{rkey, va}
	return free
}

// rtokenSetLocked gives the entry whose rkey on link known is rkeyKnown
// the rtoken (rkey, va) on link idx (Linux's smc_rtoken_set: ADD_LINK's
// rkey pairs); an rkey it does not know is ignored. mu is held.
func (g *linkGroup) rtokenSetLocked(known, idx int, rkeyKnown, rkey uint32, va uint64) {
	for i := range g.rtoks {
		e := &g.rtoks[i]
		if e.used && rkeyKnown != 0 && e.set[known].rkey == rkeyKnown {
			e.set[idx] = rtoken{rkey, va}
			return
		}
	}
}

// rtokenDeleteLocked forgets the entry whose rkey on link idx is rkey
// (DELETE_RKEY) and reports whether there was one. mu is held.
func (g *linkGroup) rtokenDeleteLocked(idx int, rkey uint32) bool {
	for i := range g.rtoks {
		e := &g.rtoks[i]
		if e.used && rkey != 0 && e.set[idx].rkey == rkey {
			g.rtoks[i] = rtokenEntry{}
			return true
		}
	}
	return false
}

// rtokenOn returns entry i's rtoken on link idx, ok false when the peer
// gave none there.
func (g *linkGroup) rtokenOn(i, idx int) (rtoken, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i < 0 || i >= len(g.rtoks) || !g.rtoks[i].used {
		return rtoken{}, false
	}
	t := g.rtoks[i].set[idx]
	return t, t.rkey != 0
}
