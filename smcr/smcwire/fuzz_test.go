package smcwire

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkCLC runs every CLC parser over b. Whatever parses must expose its
// fields without panicking, marshal to JSON, and survive a rebuild from
// its Fields with the same Fields. It returns the first parser's error.
func checkCLC(t testing.TB, b []byte) error {
	c, err := ParseCLC(b)
	if err != nil {
		mustBeParseError(t, err)
		return err
	}
	_ = c.Name()
	_ = c.Trailer()
	if p, err := ParseProposal(b); err == nil {
		f := p.Fields()
		roundTrip(t, f, func() any {
			q, err := ParseProposal(AppendProposal(nil, &f))
			require.NoError(t, err)
			return q.Fields()
		})
	} else {
		mustBeParseError(t, err)
	}
	if a, err := ParseAcceptConfirm(b); err == nil {
		f := a.Fields()
		roundTrip(t, f, func() any {
			q, err := ParseAcceptConfirm(AppendAcceptConfirm(nil, &f))
			require.NoError(t, err)
			return q.Fields()
		})
	} else {
		mustBeParseError(t, err)
	}
	if d, err := ParseDecline(b); err == nil {
		f := d.Fields()
		_ = f.Diagnosis.String()
		roundTrip(t, f, func() any {
			q, err := ParseDecline(AppendDecline(nil, &f))
			require.NoError(t, err)
			return q.Fields()
		})
	} else {
		mustBeParseError(t, err)
	}
	return nil
}

// checkLLC does the same for LLC messages, and checks that Classify agrees.
func checkLLC(t testing.TB, b []byte) error {
	k := Classify(b)
	l, err := ParseLLC(b)
	if err != nil {
		mustBeParseError(t, err)
		if k == KindLLCv1 || k == KindLLCv2 {
			t.Fatalf("classified %v but does not parse: %v", k, err)
		}
		return err
	}
	if len(l) == len(b) && l.Version() == 2 && k != KindLLCv2 && int(b[1])|int(b[2])<<8 == len(b) {
		t.Fatalf("v2 message of its own LE length not classified: %x", b)
	}
	_ = l.Name()
	f := l.Fields()
	if f.DeleteLink != nil {
		_ = f.DeleteLink.Reason.String()
	}
	roundTrip(t, f, func() any {
		q, err := ParseLLC(AppendLLC(nil, &f))
		require.NoError(t, err)
		return q.Fields()
	})
	return nil
}

// checkCDC does the same for CDC messages.
func checkCDC(t testing.TB, b []byte) error {
	c, err := ParseCDC(b)
	if err != nil {
		mustBeParseError(t, err)
		if Classify(b) == KindCDC {
			t.Fatalf("classified CDC but does not parse: %v", err)
		}
		return err
	}
	f := c.Fields()
	roundTrip(t, f, func() any {
		q, err := ParseCDC(AppendCDC(nil, &f))
		require.NoError(t, err)
		return q.Fields()
	})
	_ = f.Prod.Diff(f.Cons, 1<<16)
	_ = f.Prod.Add(100, 1<<16).Before(f.Cons)
	return nil
}

func mustBeParseError(t testing.TB, err error) {
	if _, ok := err.(ParseError); !ok {
		t.Fatalf("untyped error %T %v", err, err)
	}
}

func roundTrip(t testing.TB, f any, rebuild func() any) {
	if _, err := json.Marshal(f); err != nil {
		t.Fatalf("json: %v", err)
	}
	if g := rebuild(); !assert.ObjectsAreEqual(f, g) {
		t.Fatalf("fields changed in a rebuild:\n%+v\n%+v", f, g)
	}
}

// Every strict prefix of every message of the captures (and of one built
// message of each kind the captures lack) is rejected with a ParseError by
// its parser, and no parser panics on it.
func TestTruncation(t *testing.T) {
	clc, llc, cdc := smcMessages(t)
	clc = append(clc, syntheticCLC()...)
	llc = append(llc, syntheticLLC()...)
	for _, set := range []struct {
		name  string
		msgs  [][]byte
		check func(testing.TB, []byte) error
	}{{"CLC", clc, checkCLC}, {"LLC", llc, checkLLC}, {"CDC", cdc, checkCDC}} {
		for i, m := range set.msgs {
			require.NoError(t, set.check(t, m), "%s message %d", set.name, i)
			for n := range len(m) {
				p := append([]byte(nil), m[:n]...) // exact capacity: reads past n would fault
				assert.Error(t, set.check(t, p), "%s message %d prefix %d", set.name, i, n)
				checkCLC(t, p)
				checkLLC(t, p)
				checkCDC(t, p)
			}
		}
	}
}

func syntheticCLC() [][]byte {
	return [][]byte{
		AppendProposal(nil, &ProposalFields{CLCHeader: CLCHeader{Version: 2, TypeV1: TypeB, TypeV2: TypeB},
			SMCDInfo: &SMCDInfo{}, IPArea: &IPArea{IPv6Prefixes: make([]IPv6Prefix, 2)},
			V2Ext: &ProposalV2Ext{UserEIDs: make([]EID, 2)}, SMCDv2: &SMCDv2Ext{ISMGIDs: make([]ISMGIDCHID, 2)}}),
		AppendAcceptConfirm(nil, &AcceptConfirmFields{CLCHeader: CLCHeader{Version: 1}}),
		AppendDecline(nil, &DeclineFields{CLCHeader: CLCHeader{Version: 1}}),
		AppendDecline(nil, &DeclineFields{CLCHeader: CLCHeader{Version: 2}, ExtraDiags: []DiagCode{1}}),
	}
}

func syntheticLLC() [][]byte {
	var out [][]byte
	for t := LLCConfirmLink; t <= LLCDeleteRKey; t++ {
		out = append(out, AppendLLC(nil, &LLCFields{Type: t}))
	}
	return append(out,
		AppendAddLink(nil, true, 0, &AddLinkFields{V2Ext: &AddLinkV2Ext{RKeys: make([]RKeyPair, 3)}}),
		AppendRequestAddLink(nil, true, 0, &RequestAddLinkFields{GIDs: make([]GID, 4)}),
		AppendDeleteRKey(nil, true, 0, &DeleteRKeyFields{RKeys: make([]uint32, 20)}),
	)
}

// The fuzz targets take arbitrary bytes. Seeds: f.Add below (the messages
// of the captures and synthetic ones) and testdata/fuzz/<target>, which
// holds the same capture messages in the go test corpus format.

func FuzzCLC(f *testing.F) {
	clc, _, _ := smcMessages(f)
	for _, m := range append(clc, syntheticCLC()...) {
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkCLC(t, b) })
}

func FuzzLLC(f *testing.F) {
	_, llc, _ := smcMessages(f)
	for _, m := range append(llc, syntheticLLC()...) {
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkLLC(t, b) })
}

func FuzzCDC(f *testing.F) {
	_, _, cdc := smcMessages(f)
	for _, m := range cdc {
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkCDC(t, b) })
}
