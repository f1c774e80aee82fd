package wqe

import "github.com/mlx5go/mlx5go/prm"

// Access are the access flags of an mkey (enum ibv_access_flags, as
// mlx5dv_wr_set_mkey_access_flags takes them).
type Access uint32

// Values of enum ibv_access_flags that a UMR can set.
const (
	AccessLocalWrite   Access = 1 << 0 // IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite  Access = 1 << 1 // IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead   Access = 1 << 2 // IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic Access = 1 << 3 // IBV_ACCESS_REMOTE_ATOMIC
)

// Mkc is the mkey context segment of a UMR WQE (struct
// mlx5_wqe_mkey_context_seg). Its 64 bytes have the layout of the PRM's
// mkc (prm.Mkc), which PutMkc uses; the oracle's bytes confirm the fields
// it sets (access bits, qpn, bsf_en, expected_sigerr_count, len).
type Mkc struct {
	Free                bool   // free
	Access              Access // a, rw, rr, lw (local read is not set)
	QPN                 uint32 // qpn: 0xffffff for a UMR-configured mkey
	Mkey70              uint8  // mkey_7_0: the variant byte of the mkey
	BSFEnable           bool   // bsf_en
	ExpectedSigErrCount uint8  // expected_sigerr_count (1 bit)
	PD                  uint32 // pd
	StartAddr           uint64 // start_addr
	Len                 uint64 // len
	BSFOctwordSize      uint32 // bsf_octword_size
	TranslationsOctword uint32 // translations_octword_size
	LogPageSize         uint8  // log_page_size
}

func b2u(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

// PutMkc writes m into b[:64]; every other bit is zeroed.
func PutMkc(b []byte, m *Mkc) error {
	if len(b) < MkcSegSize {
		return ErrShort
	}
	b = b[:MkcSegSize]
	clear(b)
	prm.Mkc.Free.Set(b, b2u(m.Free))
	prm.Mkc.A.Set(b, b2u(m.Access&AccessRemoteAtomic != 0))
	prm.Mkc.Rw.Set(b, b2u(m.Access&AccessRemoteWrite != 0))
	prm.Mkc.Rr.Set(b, b2u(m.Access&AccessRemoteRead != 0))
	prm.Mkc.Lw.Set(b, b2u(m.Access&AccessLocalWrite != 0))
	prm.Mkc.Qpn.Set(b, uint64(m.QPN))
	prm.Mkc.Mkey70.Set(b, uint64(m.Mkey70))
	prm.Mkc.BsfEn.Set(b, b2u(m.BSFEnable))
	prm.Mkc.ExpectedSigerrCount.Set(b, uint64(m.ExpectedSigErrCount))
	prm.Mkc.Pd.Set(b, uint64(m.PD))
	prm.Mkc.StartAddr.Set(b, m.StartAddr)
	prm.Mkc.Len.Set(b, m.Len)
	prm.Mkc.BsfOctwordSize.Set(b, uint64(m.BSFOctwordSize))
	prm.Mkc.TranslationsOctwordSize.Set(b, uint64(m.TranslationsOctword))
	prm.Mkc.LogPageSize.Set(b, uint64(m.LogPageSize))
	return nil
}
