package wqe

import (
	"encoding/binary"

	"github.com/mlx5go/mlx5go/prm"
)

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

// mkcWords are the word forms of the mkc fields PutMkc writes, taken from
// prm's table (TestMkcWords checks that each field has one).
var mkcWords = struct {
	free, a, rw, rr, lw, qpn, mkey70, bsfEn, expectedSigerrCount, pd, bsfOctwordSize, translationsOctwordSize, logPageSize prm.Word32
}{
	free: word(prm.Mkc.Free), a: word(prm.Mkc.A), rw: word(prm.Mkc.Rw), rr: word(prm.Mkc.Rr), lw: word(prm.Mkc.Lw),
	qpn: word(prm.Mkc.Qpn), mkey70: word(prm.Mkc.Mkey70), bsfEn: word(prm.Mkc.BsfEn),
	expectedSigerrCount: word(prm.Mkc.ExpectedSigerrCount), pd: word(prm.Mkc.Pd),
	bsfOctwordSize: word(prm.Mkc.BsfOctwordSize), translationsOctwordSize: word(prm.Mkc.TranslationsOctwordSize),
	logPageSize: word(prm.Mkc.LogPageSize),
}

func word(f prm.Field) prm.Word32 {
	w, _ := f.Word32()
	return w
}

// PutMkc writes m into b[:64]; every other bit is zeroed. The fields are
// composed in sixteen 32-bit words, then stored big-endian.
func PutMkc(b []byte, m *Mkc) error {
	if m == nil {
		return ErrNil
	}
	if len(b) < MkcSegSize {
		return ErrShort
	}
	var w [MkcSegSize / 4]uint32
	f := &mkcWords
	f.free.Put(w[:], uint32(b2u(m.Free)))
	f.a.Put(w[:], uint32(b2u(m.Access&AccessRemoteAtomic != 0)))
	f.rw.Put(w[:], uint32(b2u(m.Access&AccessRemoteWrite != 0)))
	f.rr.Put(w[:], uint32(b2u(m.Access&AccessRemoteRead != 0)))
	f.lw.Put(w[:], uint32(b2u(m.Access&AccessLocalWrite != 0)))
	f.qpn.Put(w[:], m.QPN)
	f.mkey70.Put(w[:], uint32(m.Mkey70))
	f.bsfEn.Put(w[:], uint32(b2u(m.BSFEnable)))
	f.expectedSigerrCount.Put(w[:], uint32(m.ExpectedSigErrCount))
	f.pd.Put(w[:], m.PD)
	f.bsfOctwordSize.Put(w[:], m.BSFOctwordSize)
	f.translationsOctwordSize.Put(w[:], m.TranslationsOctword)
	f.logPageSize.Put(w[:], uint32(m.LogPageSize))
	b = b[:MkcSegSize]
	for i, v := range w {
		binary.BigEndian.PutUint32(b[4*i:], v)
	}
	// start_addr and len are 64-bit, word-aligned fields.
	binary.BigEndian.PutUint64(b[prm.Mkc.StartAddr.Off/8:], m.StartAddr)
	binary.BigEndian.PutUint64(b[prm.Mkc.Len.Off/8:], m.Len)
	return nil
}
