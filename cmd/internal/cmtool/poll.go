package cmtool

import (
	"context"
	"fmt"

	"github.com/goroce/goroce/cq"
)

// PollN takes n completions from c, calling fn for each (nil: none),
// sleeping on the CQ's events between them: what the examples' poll_cqs
// loops do by spinning. A completion in error ends it with the status.
func PollN(ctx context.Context, c *cq.CQ, n int, fn func(*cq.WC) error) error {
	wcs := make([]cq.WC, 8)
	for done := 0; done < n; {
		got := c.Poll(wcs[:min(len(wcs), n-done)])
		if got == 0 {
			if c.Arm(false) {
				continue
			}
			if err := c.Wait(ctx); err != nil {
				return err
			}
			continue
		}
		for i := range wcs[:got] {
			if wcs[i].Status != cq.Success {
				return fmt.Errorf("completion failed: %v", wcs[i].Status)
			}
			if fn != nil {
				if err := fn(&wcs[i]); err != nil {
					return err
				}
			}
		}
		done += got
	}
	return nil
}
