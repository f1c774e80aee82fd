package mlx5

import (
	"fmt"

	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
)

// QueryHCACap returns the device's capabilities of one type (prm's
// MLX5_CAP_*, e.g. MLX5_CAP_GENERAL for cmd_hca_cap): the current values if
// cur, else the maximum ones. The bytes are the capability union of
// QUERY_HCA_CAP's output, to be read with prm's layouts (prm.CmdHcaCap and
// friends).
func (c *Context) QueryHCACap(capType uint16, cur bool) ([]byte, error) {
	const op = "query hca cap"
	if err := c.checkOpen(op); err != nil {
		return nil, err
	}
	in := make([]byte, prm.QueryHcaCapIn.Layout().Size)
	prm.QueryHcaCapIn.Opcode.Set(in, prm.MLX5_CMD_OP_QUERY_HCA_CAP)
	prm.QueryHcaCapIn.OpMod.Set(in, uint64(prm.QueryHCACapOpMod(capType, cur)))
	out := make([]byte, prm.QueryHcaCapOut.Layout().Size)
	if err := c.GeneralCmd(in, out); err != nil {
		return nil, wrapAs(op, c.name, "", err)
	}
	b := prm.QueryHcaCapOut.Capability.Bytes(out)
	if b == nil {
		return nil, opErr(op, c.name, fmt.Errorf("output of %d bytes has no capability area", len(out)))
	}
	return b, nil
}

// generalCaps returns the device's current general capabilities
// (cmd_hca_cap), read once per context.
func (c *Context) generalCaps() ([]byte, error) {
	c.capsOnce.Do(func() { c.general, c.capsErr = c.QueryHCACap(prm.MLX5_CAP_GENERAL, true) })
	return c.general, c.capsErr
}

// SigCaps returns the device's block signature capabilities as
// mlx5dv_query_device reports them (sig_caps, with
// MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD), derived from its general HCA
// caps as libmlx5 derives them (docs/MLX5.md, "Signature caps"). They
// are read once per context. A device without block signature offload
// reports zero caps (Offload false); an error means the caps could not be
// read (libmlx5 then reports zero caps too).
//
// CreateMkey refuses BlockSignature on a device without Offload, and an
// mkey configure refuses a signature block the caps do not cover
// (sig.Caps.Supports), both with ErrUnsupported.
func (c *Context) SigCaps() (sig.Caps, error) {
	const op = "query sig caps"
	if err := c.checkOpen(op); err != nil {
		return sig.Caps{}, err
	}
	caps, err := c.generalCaps()
	if err != nil {
		return sig.Caps{}, wrapAs(op, c.name, "", err)
	}
	return sigCapsOf(caps), nil
}

// sigCapsOf derives mlx5dv_query_device's sig_caps from the general caps
// (cmd_hca_cap) as libmlx5 44.0's get_hca_sig_caps (providers/mlx5
// verbs.c) does: none at all unless the device has both the signature
// handover offload (sho) and the SIG_ERR CQE's domain and signature type
// fields (sigerr_domain_and_sig_type); with both, T10-DIF and CRC
// signatures, blocks of 512, 520, 4096 and 4160 bytes, CRC and IP
// checksum T10-DIF guards, and CRC32; then 4048-byte blocks with
// sig_block_4048, CRC32C with sig_crc32c and CRC64_XP10 with
// sig_crc64_xp10.
func sigCapsOf(general []byte) sig.Caps {
	if prm.CmdHcaCap.Sho.Get(general) == 0 || prm.CmdHcaCap.SigerrDomainAndSigType.Get(general) == 0 {
		return sig.Caps{}
	}
	c := sig.Caps{
		BlockProt: 1<<sig.SigTypeT10DIF | 1<<sig.SigTypeCRC,
		BlockSize: 1<<sig.BlockSize512 | 1<<sig.BlockSize520 | 1<<sig.BlockSize4096 | 1<<sig.BlockSize4160,
		T10DIFBG:  1<<sig.T10DIFGuardCRC | 1<<sig.T10DIFGuardCsum,
		CRCType:   1 << sig.CRCTypeCRC32,
	}
	if prm.CmdHcaCap.SigBlock4048.Get(general) != 0 {
		c.BlockSize |= 1 << sig.BlockSize4048
	}
	if prm.CmdHcaCap.SigCrc32c.Get(general) != 0 {
		c.CRCType |= 1 << sig.CRCTypeCRC32C
	}
	if prm.CmdHcaCap.SigCrc64Xp10.Get(general) != 0 {
		c.CRCType |= 1 << sig.CRCTypeCRC64XP10
	}
	return c
}

// blockSignature returns the signature caps (sigCapsOf) for a signature
// mkey: mlx5dv_create_mkey refuses BLOCK_SIGNATURE with EOPNOTSUPP when
// their block_prot is 0 (mlx5_create_sig_ctx), that is without sho or
// sigerr_domain_and_sig_type, and the mkey's configures are checked
// against them.
func (c *Context) blockSignature() (sig.Caps, error) {
	caps, err := c.generalCaps()
	if err != nil {
		return sig.Caps{}, err
	}
	return sigCapsOf(caps), nil
}

// maxMessage is the longest message a QP of the context sends: the
// ports' max_msg_sz (ibv_query_port; mlx5_ib answers 1 << log_max_msg)
// as the context learned it at open; without an answer (a context that
// makes no verbs objects), 1 << the general caps' log_max_msg; failing
// that, the IB spec's 2^31 bytes. The sum of a send's SGEs (the length
// of an RDMA READ) may not exceed it: rxe refuses such a post too
// (validate_send_wr), libmlx5 posts it.
func (c *Context) maxMessage() uint32 {
	if c.maxMsgSz != 0 {
		return min(c.maxMsgSz, wqe.MaxMessage)
	}
	if caps, err := c.generalCaps(); err == nil {
		if l := prm.CmdHcaCap.LogMaxMsg.Get(caps); l > 0 && l < 31 {
			return 1 << l
		}
	}
	return wqe.MaxMessage
}
