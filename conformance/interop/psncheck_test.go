//go:build linux

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPSNPairs(t *testing.T) {
	// The guest's rdma (iproute2 6.1) and goroce's roce-devinfo, as they print.
	guest := `[{"ifindex":2,"ifname":"rxe0","port":1,"lqpn":17,"rqpn":1193046,"type":"RC","state":"RTS","rq-psn":900,"sq-psn":700,"path-mig-state":"MIGRATED","pid":0,"comm":"[smc]"},` +
		`{"ifindex":2,"ifname":"rxe0","port":1,"lqpn":1,"type":"GSI","state":"RTS","sq-psn":0,"pid":0,"comm":"[ib_core]"}]`
	goroce := `[{"ifindex":1,"ifname":"goroce-smc","port":1,"lqpn":1193046,"rqpn":17,"type":"RC","state":"RTS","rq-psn":700,"sq-psn":900,"path-mig-state":"MIGRATED","path-mtu":1024,"pdn":2,"pid":42,"comm":"smcat"}]`
	gq, err := parseResQP("# rdma -j res show qp\n" + guest + "\n")
	require.NoError(t, err)
	hq, err := parseResQP(goroce)
	require.NoError(t, err)
	pairs, bad := psnPairs(hq, gq)
	assert.Len(t, pairs, 1)
	assert.Empty(t, bad)

	hq[0].SQPSN++ // goroce thinks it sent one more than the guest accepted
	_, bad = psnPairs(hq, gq)
	assert.Len(t, bad, 1)
	_, bad = psnPairs(nil, gq)
	assert.Contains(t, bad[0], "no QP pair")
	_, err = parseResQP("rdma: command not found")
	assert.Error(t, err)
}
