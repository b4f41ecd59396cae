package cqlegacy_test

import (
	"testing"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/cq/cqtest"
	"github.com/goroce/goroce/internal/cqlegacy"
)

// The legacy design runs the checks every completion design runs.
func TestLegacyDesign(t *testing.T) {
	cqtest.Run(t, cqtest.Design{
		Name:       "legacy",
		New:        func(d []cq.Device) cq.Allocator { return cqlegacy.New(cqlegacy.Config{Devices: d}) },
		Reserve:    cq.Allocator.Reserve,
		Goroutines: []string{"cqlegacy.(*Legacy).loop"},
	})
}
