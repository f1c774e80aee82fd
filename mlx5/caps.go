package mlx5

import (
	"fmt"

	"github.com/mlx5go/mlx5go/prm"
)

// QueryHCACap returns the device's capabilities of one type (prm's
// MLX5_CAP_*, e.g. MLX5_CAP_GENERAL for cmd_hca_cap): the current values if
// cur, else the maximum ones. The bytes are the capability union of
// QUERY_HCA_CAP's output, to be read with prm's layouts (prm.CmdHcaCap and
// friends).
func (c *Context) QueryHCACap(capType uint16, cur bool) ([]byte, error) {
	in := make([]byte, prm.QueryHcaCapIn.Layout().Size)
	prm.QueryHcaCapIn.Opcode.Set(in, prm.MLX5_CMD_OP_QUERY_HCA_CAP)
	prm.QueryHcaCapIn.OpMod.Set(in, uint64(prm.QueryHCACapOpMod(capType, cur)))
	out := make([]byte, prm.QueryHcaCapOut.Layout().Size)
	if err := c.GeneralCmd(in, out); err != nil {
		return nil, err
	}
	b := prm.QueryHcaCapOut.Capability.Bytes(out)
	if b == nil {
		return nil, fmt.Errorf("mlx5: query hca cap: output of %d bytes has no capability area", len(out))
	}
	return b, nil
}
