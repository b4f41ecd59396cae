package smcr

// reportLink tells Config.OnLink that link l came up (up) or went (err
// says why). A link is reported gone only if it was reported up, and
// each once.
func (g *linkGroup) reportLink(l *link, up bool, err error) {
	if g.onLink == nil || !l.reported.CompareAndSwap(!up, up) {
		return
	}
	g.mu.Lock()
	info := g.linkInfoLocked(l, nil)
	typ := g.typ.String()
	g.mu.Unlock()
	if !up {
		info.State = linkInactive.String()
	}
	g.onLink(LinkEvent{LinkGroup: g.id, Role: g.role.String(), LinkGroupType: typ, Up: up, Link: info, Err: err})
}
