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

// generalCaps returns the device's current general capabilities
// (cmd_hca_cap), read once per context.
func (c *Context) generalCaps() ([]byte, error) {
	c.capsOnce.Do(func() { c.general, c.capsErr = c.QueryHCACap(prm.MLX5_CAP_GENERAL, true) })
	return c.general, c.capsErr
}

// blockSignature reports whether the device offers block signature
// offload as libmlx5 decides it (get_hca_sig_caps in providers/mlx5
// verbs.c): only with both the signature handover offload (sho) and the
// SIG_ERR CQE's domain and type fields (sigerr_domain_and_sig_type);
// otherwise mlx5dv_create_mkey refuses BLOCK_SIGNATURE with EOPNOTSUPP.
func (c *Context) blockSignature() (bool, error) {
	caps, err := c.generalCaps()
	if err != nil {
		return false, err
	}
	return prm.CmdHcaCap.Sho.Get(caps) != 0 && prm.CmdHcaCap.SigerrDomainAndSigType.Get(caps) != 0, nil
}
