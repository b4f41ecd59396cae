package getopt

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	opts := []Opt{{'s', "size", true, false}, {'e', "events", false, false}, {0, "sl", true, false}, {0, "udp-port", true, true}}
	tests := []struct {
		args     []string
		list     bool
		want     string // the options seen, "i=val" each
		operands []string
		err      error
		diag     string
	}{
		{[]string{"-es64", "host"}, false, "1= 0=64", []string{"host"}, nil, ""},
		{[]string{"host", "--size", "8", "--ev"}, false, "0=8 1=", []string{"host"}, nil, ""},
		{[]string{"--size=9", "-udp-port", "5", "--", "-e"}, false, "0=9 3=5", []string{"-e"}, nil, ""},
		{[]string{"-x"}, false, "", nil, ErrBadOption, "p: invalid option -- 'x'"},
		{[]string{"--nosuch"}, false, "", nil, ErrBadOption, "p: unrecognized option '--nosuch'"},
		{[]string{"--s=1"}, false, "", nil, ErrBadOption, "p: option '--s=1' is ambiguous\n"},
		{[]string{"--s=1"}, true, "", nil, ErrBadOption, "is ambiguous; possibilities: '--size' '--sl'"},
		{[]string{"-s"}, false, "", nil, ErrUsage, "option requires an argument -- 's'"},
		{[]string{"--size"}, false, "", nil, ErrUsage, "option '--size' requires an argument"},
		{[]string{"--events=1"}, false, "", nil, ErrUsage, "option '--events' doesn't allow an argument"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var seen []string
			var diag bytes.Buffer
			p := Parser{Prog: "p", Opts: opts, ListAmbiguous: tt.list}
			operands, err := p.Parse(tt.args, func(i int, val string) error {
				seen = append(seen, fmt.Sprintf("%d=%s", i, val))
				return nil
			}, &diag)
			require.ErrorIs(t, err, tt.err)
			assert.Contains(t, diag.String(), tt.diag)
			if tt.err == nil {
				assert.Equal(t, tt.want, strings.Join(seen, " "))
				assert.Equal(t, tt.operands, operands)
			}
		})
	}
	// An error of set ends the parse, as it is.
	stop := fmt.Errorf("stop")
	_, err := (&Parser{Prog: "p", Opts: opts}).Parse([]string{"-e", "-s1"}, func(int, string) error { return stop }, &bytes.Buffer{})
	assert.Equal(t, stop, err)
}
