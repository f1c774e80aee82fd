// Package sigattr reads the signature block attributes the oracle records
// (struct mlx5dv_sig_block_attr as the harness passed it, in its umr_sig
// and mkey_check families) into sig's types. It is for tests.
package sigattr

import (
	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/sig"
)

// Domain is one recorded struct mlx5dv_sig_block_domain.
type Domain struct {
	SigType uint32 `json:"sig_type_value"`
	Dif     *struct {
		BGType uint32 `json:"bg_type_value"`
		BG     uint16 `json:"bg"`
		App    uint16 `json:"app_tag"`
		Ref    uint32 `json:"ref_tag"`
		Flags  uint16 `json:"flags"`
	} `json:"dif"`
	CRC *struct {
		Type uint32 `json:"type_value"`
		Seed string `json:"seed"`
	} `json:"crc"`
	BlockSize uint32 `json:"block_size_value"`
	CompMask  uint64 `json:"comp_mask"`
}

// Attr is one recorded struct mlx5dv_sig_block_attr.
type Attr struct {
	Mem       *Domain `json:"mem"`
	Wire      *Domain `json:"wire"`
	Flags     uint32  `json:"flags"`
	CheckMask uint8   `json:"check_mask"`
	CopyMask  uint8   `json:"copy_mask"`
	CompMask  uint64  `json:"comp_mask"`
}

// Num parses a recorded number ("0x..." or decimal): oracle.ParseNum.
func Num(s string) (uint64, error) { return oracle.ParseNum(s) }

// BlockAttr converts the record, unvalidated, as the harness handed it to
// libmlx5.
func (a *Attr) BlockAttr() (*sig.BlockAttr, error) {
	mem, err := a.Mem.domain()
	if err != nil {
		return nil, err
	}
	wire, err := a.Wire.domain()
	if err != nil {
		return nil, err
	}
	return &sig.BlockAttr{Mem: mem, Wire: wire, Flags: sig.BlockAttrFlags(a.Flags),
		CheckMask: sig.Mask(a.CheckMask), CopyMask: sig.Mask(a.CopyMask), CompMask: a.CompMask}, nil
}

func (v *Domain) domain() (*sig.Domain, error) {
	if v == nil {
		return nil, nil
	}
	d := &sig.Domain{Type: sig.SigType(v.SigType), BlockSize: sig.BlockSize(v.BlockSize), CompMask: v.CompMask}
	if v.Dif != nil {
		d.T10DIF = &sig.T10DIF{Guard: sig.T10DIFGuard(v.Dif.BGType), Seed: v.Dif.BG, AppTag: v.Dif.App,
			RefTag: v.Dif.Ref, Flags: sig.T10DIFFlags(v.Dif.Flags)}
	}
	if v.CRC != nil {
		seed, err := Num(v.CRC.Seed)
		if err != nil {
			return nil, err
		}
		d.CRC = &sig.CRC{Type: sig.CRCType(v.CRC.Type), Seed: seed}
	}
	return d, nil
}
