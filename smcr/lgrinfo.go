package smcr

import (
	"cmp"
	"net/netip"
	"slices"
)

// LinkGroupInfo is a link group as smc-tools' smcr linkgroup show lists a
// Linux one: its id, role, type, connections and device, and each of its
// links (linkgroup link-show) with its state and connections.
type LinkGroupInfo struct {
	ID   uint32 `json:"id"`
	Role string `json:"role"` // "client" or "server"
	// Type is smc-tools' name of Linux's SMC_LGR_* type: SINGLE for a
	// group of one link, SYM for one of two or more on distinct devices,
	// ASYMP and ASYML for an asymmetric one (the peer's single device, or
	// this side's).
	Type     string         `json:"type"`
	Version  int            `json:"version"` // SMC-R 1 or 2
	Conns    int            `json:"conns"`
	Device   netip.AddrPort `json:"device"`
	PeerHost string         `json:"peer_host,omitempty"`
	EID      string         `json:"eid,omitempty"`
	Links    []GroupLink    `json:"links"`
}

// GroupLink is one link of a group.
type GroupLink struct {
	LinkInfo
	// State is Linux's SMC_LNK_*: LINK_ACTIVATING until the group is
	// ready, LINK_ACTIVE, LINK_INACTIVE once the link failed.
	State string `json:"state"`
	Conns int    `json:"conns"` // the connections whose data it carries
	// UID is the link's user id, which this side sent in CONFIRM_LINK.
	UID uint32 `json:"uid"`
}

// LinkGroups returns the process's link groups (lingering ones too),
// sorted by id.
func LinkGroups() []LinkGroupInfo {
	stacks.Lock()
	var groups []*linkGroup
	for _, s := range stacks.m {
		s.mu.Lock()
		groups = append(groups, s.lgrs...)
		s.mu.Unlock()
	}
	stacks.Unlock()
	out := make([]LinkGroupInfo, 0, len(groups))
	for _, g := range groups {
		out = append(out, g.info())
	}
	slices.SortFunc(out, func(a, b LinkGroupInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// info describes the group and every link it has (its lock, and none of a
// connection's).
func (g *linkGroup) info() LinkGroupInfo {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := LinkGroupInfo{ID: g.id, Role: g.role.String(), Type: g.typ.short(), Version: 1, Conns: len(g.conns),
		Device: g.st.primary().key, PeerHost: g.peerHost}
	if g.v2 {
		i.Version, i.EID = 2, g.eid.String()
	}
	for _, l := range g.links {
		if l == nil {
			continue
		}
		li := g.linkInfoLocked(l, nil)
		i.Links = append(i.Links, GroupLink{LinkInfo: li, State: "LINK_" + li.State, Conns: li.Conns, UID: l.userID})
	}
	return i
}
