package smcr

import (
	"encoding/json"
	"fmt"
)

// What a snapshot carries after its sockets (publish.go): the process's
// link groups, one line each, then its statistics on one line; the header
// says how many groups and whether the statistics follow.

// MaxPublishedLinkGroups is the most link groups one snapshot lists.
const MaxPublishedLinkGroups = 10000

// extras are the link groups and statistics of a snapshot.
type extras struct {
	NumGroups int  `json:"linkgroups,omitempty"`
	HasStats  bool `json:"stats,omitempty"`
	// Groups and Stats are what followed the sockets.
	Groups []LinkGroupInfo `json:"-"`
	Stats  *Stats          `json:"-"`
}

// currentExtras is the process's link groups and statistics now.
func currentExtras() extras {
	gs := LinkGroups()
	if len(gs) > MaxPublishedLinkGroups {
		gs = gs[:MaxPublishedLinkGroups]
	}
	st := ReadStats()
	if len(st.FallbackReasons) > maxFallbackReasons {
		st.FallbackReasons = st.FallbackReasons[:maxFallbackReasons]
	}
	return extras{NumGroups: len(gs), HasStats: true, Groups: gs, Stats: &st}
}

// write writes the groups and the statistics, one JSON value a line.
func (e *extras) write(enc *json.Encoder) error {
	for i := range e.Groups {
		if err := enc.Encode(&e.Groups[i]); err != nil {
			return err
		}
	}
	if e.HasStats {
		return enc.Encode(e.Stats)
	}
	return nil
}

// read reads what the header announced, every count bounded; next returns
// the snapshot's next line.
func (e *extras) read(next func(what string) ([]byte, error)) error {
	if e.NumGroups < 0 || e.NumGroups > MaxPublishedLinkGroups {
		return fmt.Errorf("header: %d link groups: out of range 0..%d", e.NumGroups, MaxPublishedLinkGroups)
	}
	e.Groups = make([]LinkGroupInfo, 0, min(e.NumGroups, 64))
	for i := range e.NumGroups {
		what := fmt.Sprintf("link group %d of %d", i+1, e.NumGroups)
		line, err := next(what)
		if err != nil {
			return err
		}
		var g LinkGroupInfo
		if err := json.Unmarshal(line, &g); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if len(g.Links) > maxLinksPerSock {
			return fmt.Errorf("%s: %d links (at most %d)", what, len(g.Links), maxLinksPerSock)
		}
		e.Groups = append(e.Groups, g)
	}
	if !e.HasStats {
		return nil
	}
	line, err := next("statistics")
	if err != nil {
		return err
	}
	var st Stats
	if err := json.Unmarshal(line, &st); err != nil {
		return fmt.Errorf("statistics: %w", err)
	}
	if len(st.FallbackReasons) > maxFallbackReasons {
		return fmt.Errorf("statistics: %d fallback reasons (at most %d)", len(st.FallbackReasons), maxFallbackReasons)
	}
	e.Stats = &st
	return nil
}
