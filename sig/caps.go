package sig

// The questions a device's Caps answer. Each bit set is indexed by the
// enum it belongs to, so a value outside an enum is never supported.

// Offload reports whether the device offers block signature offload at
// all: libmlx5 creates signature mkeys only when block_prot is not 0
// (mlx5dv_create_mkey with MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE
// fails with EOPNOTSUPP otherwise).
func (c Caps) Offload() bool { return c.BlockProt != 0 }

// HasBlockSize reports whether the device protects blocks of size b
// (block_size).
func (c Caps) HasBlockSize(b BlockSize) bool { return c.BlockSize>>b&1 != 0 }

// HasSigType reports whether the device computes signatures of type t
// (block_prot).
func (c Caps) HasSigType(t SigType) bool { return c.BlockProt>>t&1 != 0 }

// HasT10DIFGuard reports whether the device computes T10-DIF guards of
// type g (t10dif_bg).
func (c Caps) HasT10DIFGuard(g T10DIFGuard) bool { return c.T10DIFBG>>g&1 != 0 }

// HasCRCType reports whether the device computes CRC signatures of type t
// (crc_type).
func (c Caps) HasCRCType(t CRCType) bool { return c.CRCType>>t&1 != 0 }

// SupportsT10DIF reports whether the device protects blocks of size b
// with T10-DIF tuples whose guard is of type g: "T10-DIF with a CRC guard
// on 4096-byte blocks?" is SupportsT10DIF(T10DIFGuardCRC, BlockSize4096).
func (c Caps) SupportsT10DIF(g T10DIFGuard, b BlockSize) bool {
	return c.HasSigType(SigTypeT10DIF) && c.HasT10DIFGuard(g) && c.HasBlockSize(b)
}

// SupportsCRC reports whether the device protects blocks of size b with a
// CRC of type t: "CRC64_XP10 on 4096-byte blocks?" is
// SupportsCRC(CRCTypeCRC64XP10, BlockSize4096).
func (c Caps) SupportsCRC(t CRCType, b BlockSize) bool {
	return c.HasSigType(SigTypeCRC) && c.HasCRCType(t) && c.HasBlockSize(b)
}

// Supports checks a against the capabilities only: each domain's block
// size, signature type, T10-DIF guard type and CRC type must be ones the
// device reports. It returns an *AttrError matching ErrUnsupported (and
// not ErrInvalidAttr) for the first it does not, checking the memory
// domain before the wire domain, each in that order. Everything else
// about a is Validate's business: Supports ignores absent domains and the
// parameters of a domain whose T10DIF or CRC is nil, and a nil a is
// supported. It allocates nothing unless it fails. ValidateCaps does
// both checks, Validate first.
func (c Caps) Supports(a *BlockAttr) error {
	if a == nil || c.fits(a.Mem) && c.fits(a.Wire) {
		return nil
	}
	if err := c.supportsDomain("mem", a.Mem); err != nil {
		return err
	}
	return c.supportsDomain("wire", a.Wire)
}

// fits is supportsDomain's answer without the error: the bit tests alone,
// for the posting path.
func (c Caps) fits(d *Domain) bool {
	if d == nil {
		return true
	}
	sub := true
	switch d.Type {
	case SigTypeT10DIF:
		sub = d.T10DIF == nil || c.T10DIFBG>>d.T10DIF.Guard&1 != 0
	case SigTypeCRC:
		sub = d.CRC == nil || c.CRCType>>d.CRC.Type&1 != 0
	}
	return sub && c.BlockSize>>d.BlockSize&1 != 0 && c.BlockProt>>d.Type&1 != 0
}

func (c Caps) supportsDomain(name string, d *Domain) error {
	switch {
	case d == nil:
		return nil
	case !c.HasBlockSize(d.BlockSize):
		return attrErr(name+".block_size", uint64(d.BlockSize), ErrUnsupported)
	case !c.HasSigType(d.Type):
		return attrErr(name+".sig_type", uint64(d.Type), ErrUnsupported)
	case d.Type == SigTypeT10DIF && d.T10DIF != nil && !c.HasT10DIFGuard(d.T10DIF.Guard):
		return attrErr(name+".t10dif.bg_type", uint64(d.T10DIF.Guard), ErrUnsupported)
	case d.Type == SigTypeCRC && d.CRC != nil && !c.HasCRCType(d.CRC.Type):
		return attrErr(name+".crc.type", uint64(d.CRC.Type), ErrUnsupported)
	}
	return nil
}
