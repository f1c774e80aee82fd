package model

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/prm"
)

// TestQueryHCACapShortOutput: the firmware checks QUERY_HCA_CAP's output
// mailbox against the PRM's query_hca_cap_out with a 2048-byte
// capability union (rdma-core 44.0's tests/mlx5_base.py is_eth queries
// with 2064 bytes on ConnectX hardware), not today's 4096-byte union, and
// writes the part of the answer that fits.
func TestQueryHCACapShortOutput(t *testing.T) {
	d := newDev(t, "cx6dx")
	in := mbox(prm.QueryHcaCapIn.Layout(), prm.MLX5_CMD_OP_QUERY_HCA_CAP)
	prm.QueryHcaCapIn.OpMod.Set(in, uint64(prm.QueryHCACapOpMod(prm.MLX5_CAP_GENERAL, false)))
	whole := prm.QueryHcaCapOut.Layout().New()
	if err := d.GeneralCmd(in, whole); err != nil {
		t.Fatalf("QUERY_HCA_CAP with %d bytes: %v", len(whole), err)
	}
	const min = 16 + 2048
	for _, n := range []int{min, min + 1, len(whole) - 1} {
		out := make([]byte, n)
		if err := d.GeneralCmd(in, out); err != nil {
			t.Errorf("QUERY_HCA_CAP with %d bytes: %v, want the answer", n, err)
			continue
		}
		if !bytes.Equal(out, whole[:n]) {
			t.Errorf("QUERY_HCA_CAP with %d bytes: not the first %d bytes of the whole answer", n, n)
		}
	}
	if err := d.GeneralCmd(in, make([]byte, min-1)); !errors.Is(err, prm.MLX5_CMD_STAT_BAD_OUTP_LEN_ERR) {
		t.Errorf("QUERY_HCA_CAP with %d bytes: %v, want BAD_OUTP_LEN_ERR", min-1, err)
	}
	// Every other command still needs its whole output struct.
	q := mbox(prm.QueryAdapterIn.Layout(), prm.MLX5_CMD_OP_QUERY_ADAPTER)
	n := int(prm.QueryAdapterOut.Layout().Size)
	if err := d.GeneralCmd(q, make([]byte, n)); err != nil {
		t.Fatalf("QUERY_ADAPTER with %d bytes: %v", n, err)
	}
	if err := d.GeneralCmd(q, make([]byte, n-1)); !errors.Is(err, prm.MLX5_CMD_STAT_BAD_OUTP_LEN_ERR) {
		t.Errorf("QUERY_ADAPTER with %d bytes: %v, want BAD_OUTP_LEN_ERR", n-1, err)
	}
}
