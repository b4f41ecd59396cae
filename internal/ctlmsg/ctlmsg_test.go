package ctlmsg

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type rw struct {
	io.Reader
	io.Writer
}

func TestReadWrite(t *testing.T) {
	type m struct {
		Kind string `json:"kind"`
		N    int    `json:"n"`
	}
	var out bytes.Buffer
	w := New(rw{strings.NewReader(""), &out})
	require.NoError(t, w.Write(m{"a", 1}))
	require.NoError(t, w.Write(m{"b", 2}))
	r := New(rw{&out, io.Discard})
	var got m
	require.NoError(t, r.Read(&got))
	require.Equal(t, m{"a", 1}, got)
	require.NoError(t, r.Read(&got))
	require.Equal(t, m{"b", 2}, got)
	require.ErrorIs(t, r.Read(&got), io.EOF)
}

func TestReadRefusesHostileInput(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"endless line", `{"kind":"` + strings.Repeat("x", 3*MaxLen), ErrTooLong},
		{"cut mid-line", `{"kind":"a"`, io.ErrUnexpectedEOF},
		{"not JSON", "\x00\x01\x02\n", nil},
		{"empty stream", "", io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v map[string]any
			err := New(rw{strings.NewReader(tt.in), io.Discard}).Read(&v)
			require.Error(t, err)
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
			}
		})
	}
}
