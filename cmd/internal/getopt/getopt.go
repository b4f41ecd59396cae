// Package getopt parses a command line the way glibc's getopt_long does for
// the C programs goroce's tools stand in for (rdma-core's pingpong examples,
// perftest): short options may be clustered (-ec) and take their argument
// attached (-s64) or separately (-s 64); long options may be abbreviated to
// a unique prefix and take --opt=value or --opt value; options and operands
// may come in any order; "--" ends the options. Diagnostics go to stderr in
// getopt's words. goroce's own long options may also be spelt with a single
// dash (-udp-port 4791), as the Go flag package would.
package getopt

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Opt is one option.
type Opt struct {
	Short  byte // 0: long only
	Long   string
	HasArg bool
	Goroce bool // goroce-only: also accepted with a single dash
}

var (
	// ErrBadOption is an option the program does not have: an invalid
	// short option, an unrecognized or ambiguous long one.
	ErrBadOption = errors.New("bad option")
	// ErrUsage is an option used wrongly: an argument missing, or one given
	// to an option that takes none.
	ErrUsage = errors.New("usage")
)

// Parser is a program's options and how it reports them.
type Parser struct {
	Prog string
	Opts []Opt
	// ListAmbiguous names the candidates of an ambiguous abbreviation, as
	// newer glibc does.
	ListAmbiguous bool
}

// Parse calls set for each option in args (its index in Opts and its
// argument) and returns the operands. An error of set ends the parse and is
// returned as it is.
func (p *Parser) Parse(args []string, set func(i int, val string) error, stderr io.Writer) ([]string, error) {
	var operands []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(operands, args[i+1:]...), nil
		case strings.HasPrefix(a, "--") || p.isGoroceLong(a):
			k, val, hasVal, err := p.matchLong(a, stderr)
			if err != nil {
				return nil, err
			}
			o := p.Opts[k]
			if o.HasArg && !hasVal {
				if i+1 == len(args) {
					fmt.Fprintf(stderr, "%s: option '--%s' requires an argument\n", p.Prog, o.Long)
					return nil, ErrUsage
				}
				i++
				val = args[i]
			} else if !o.HasArg && hasVal {
				fmt.Fprintf(stderr, "%s: option '--%s' doesn't allow an argument\n", p.Prog, o.Long)
				return nil, ErrUsage
			}
			if err := set(k, val); err != nil {
				return nil, err
			}
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				k := p.short(a[j])
				if k < 0 {
					fmt.Fprintf(stderr, "%s: invalid option -- '%c'\n", p.Prog, a[j])
					return nil, ErrBadOption
				}
				var val string
				if p.Opts[k].HasArg {
					switch {
					case j+1 < len(a):
						val = a[j+1:]
					case i+1 < len(args):
						i++
						val = args[i]
					default:
						fmt.Fprintf(stderr, "%s: option requires an argument -- '%c'\n", p.Prog, a[j])
						return nil, ErrUsage
					}
					j = len(a)
				}
				if err := set(k, val); err != nil {
					return nil, err
				}
			}
		default:
			operands = append(operands, a)
		}
	}
	return operands, nil
}

// isGoroceLong reports whether a single-dash argument names one of goroce's
// own long options; such a word would otherwise read as a cluster of short
// options.
func (p *Parser) isGoroceLong(a string) bool {
	if len(a) < 2 || a[0] != '-' || a[1] == '-' {
		return false
	}
	name, _, _ := strings.Cut(a[1:], "=")
	for _, o := range p.Opts {
		if o.Goroce && o.Long == name {
			return true
		}
	}
	return false
}

func (p *Parser) short(c byte) int {
	for k, o := range p.Opts {
		if o.Short == c && c != 0 {
			return k
		}
	}
	return -1
}

// matchLong finds a long option by its name or a unique prefix of it.
func (p *Parser) matchLong(a string, stderr io.Writer) (k int, val string, hasVal bool, err error) {
	name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
	var found []int
	for k, o := range p.Opts {
		if o.Long == name {
			return k, val, hasVal, nil
		}
		if name != "" && strings.HasPrefix(o.Long, name) {
			found = append(found, k)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], val, hasVal, nil
	case len(found) == 0:
		fmt.Fprintf(stderr, "%s: unrecognized option '%s'\n", p.Prog, a)
	case p.ListAmbiguous:
		var names []string
		for _, k := range found {
			names = append(names, "'--"+p.Opts[k].Long+"'")
		}
		fmt.Fprintf(stderr, "%s: option '%s' is ambiguous; possibilities: %s\n", p.Prog, a, strings.Join(names, " "))
	default:
		fmt.Fprintf(stderr, "%s: option '%s' is ambiguous\n", p.Prog, a)
	}
	return -1, "", false, ErrBadOption
}
