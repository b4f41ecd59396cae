package smcwire

import (
	"testing"

	"github.com/goroce/goroce/internal/race"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Parsing, classifying, reading fields through the views and appending
// into a buffer with room do not allocate: the SMC-R receive and send
// paths can use them per message.
func TestCodecsDoNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	clc, llc, cdc := smcMessages(t)
	require.NotEmpty(t, llc)
	prop, accept := clc[0], clc[1]
	buf := make([]byte, 0, 256)
	var sink uint64
	allocs := testing.AllocsPerRun(100, func() {
		for _, m := range llc {
			if Classify(m) == KindNone {
				t.Fatal("classify")
			}
			l, err := ParseLLC(m)
			if err != nil {
				t.Fatal(err)
			}
			switch l.Type().Base() {
			case LLCAddLink:
				a := AddLink(l)
				for i := range a.NumRKeys() {
					sink += uint64(a.RKey(i).RKey)
				}
			case LLCConfirmLink:
				sink += uint64(ConfirmLink(l).SenderQPN())
			case LLCDeleteRKey:
				sink += uint64(DeleteRKey(l).RKey(0))
			}
		}
		for _, m := range cdc {
			c, err := ParseCDC(m)
			if err != nil {
				t.Fatal(err)
			}
			sink += uint64(c.Prod().Diff(c.Cons(), 65536))
			f := c.Fields()
			buf = AppendCDC(buf[:0], &f)
		}
		p, err := ParseProposal(prop)
		if err != nil {
			t.Fatal(err)
		}
		sink += uint64(p.MaxConns()) + uint64(p.RoCEGID()[15])
		a, err := ParseAcceptConfirm(accept)
		if err != nil {
			t.Fatal(err)
		}
		sink += a.RMBVA() + uint64(a.RMBESize())
		buf = AppendConfirmLink(buf[:0], true, LLCFlagNoRMBEEyecatcher, &ConfirmLinkFields{LinkNum: 1})
		buf = AppendDeleteRKey(buf[:0], true, 0, &DeleteRKeyFields{})
	})
	assert.Zero(t, allocs)
	assert.NotZero(t, sink)
}

func BenchmarkClassifyParseLLC(b *testing.B) {
	_, llc, _ := smcMessages(b)
	m := llc[0]
	b.ReportAllocs()
	for b.Loop() {
		if Classify(m) != KindLLCv2 {
			b.Fatal("classify")
		}
		if _, err := ParseLLC(m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseCDC(b *testing.B) {
	_, _, cdc := smcMessages(b)
	m := cdc[0]
	b.ReportAllocs()
	for b.Loop() {
		c, err := ParseCDC(m)
		if err != nil || c.Seq() == 0 {
			b.Fatal(err)
		}
	}
}
