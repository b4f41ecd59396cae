package pattern

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPattern(t *testing.T) {
	a := make([]byte, 1000)
	Fill(a, 3, 5)
	assert.Equal(t, -1, Check(a, 3, 5))
	// Any slice of the stream is the stream at that offset.
	b := make([]byte, 13)
	Fill(b, 3, 5+77)
	assert.Equal(t, a[77:90], b)
	// Other connections' streams, and shifted ones, differ at once.
	assert.Equal(t, 0, Check(a[:64], 4, 5))
	assert.NotEqual(t, -1, Check(a[:64], 3, 6))
	a[500] ^= 1
	assert.Equal(t, 500, Check(a, 3, 5))
}
