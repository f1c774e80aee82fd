package model

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
)

// cryptoUMRRecord is one line of testdata/crypto_umr_wqes.jsonl: a
// device's setup (its engines and DEKs) or one mkey configure.
type cryptoUMRRecord struct {
	umrRecord
	Device     json.RawMessage `json:"device"`
	MultiBlock bool            `json:"multi_block"`
	DEKs       []struct {
		ObjID     string `json:"obj_id"`
		PD        string `json:"pd"`
		KeySize   int    `json:"key_size"`
		HasKeytag bool   `json:"has_keytag"`
	} `json:"deks"`
	Setters []struct {
		umrSetter
		Crypto *struct {
			EncryptOnTX bool   `json:"encrypt_on_tx"`
			Order       string `json:"signature_crypto_order_name"`
			Unit        string `json:"data_unit_size_name"`
			Tweak       string `json:"initial_tweak"`
			DEK         struct {
				ObjID string `json:"obj_id"`
			} `json:"dek"`
			Keytag string `json:"keytag"`
		} `json:"crypto_attr"`
	} `json:"setters"`
}

// TestOracleCryptoUMR runs every mkey configure libmlx5 wrote in the
// crypto_umr family (crypto mkeys with and without a signature, both
// engines, lists and interleaved layouts, the reset flag, sequences on
// one mkey) on the model: its CREATE_MKEY, then the WQEBBs as recorded,
// with the model's QP number, mkey and PSV indexes in place of the fake
// kernel's (the DEKs keep the recorded object ids). It checks that the
// model reads from libmlx5's bytes the crypto configuration the harness
// passed to mlx5dv_wr_set_mkey_crypto (enc_order as libmlx5's
// get_crypto_order maps encrypt_on_tx and signature_crypto_order, the
// data unit, the tweak in the user's byte order whichever engine, the
// DEK and the keytag), kept across configures that do not set it, and
// the signature attributes as TestOracleUMR does.
func TestOracleCryptoUMR(t *testing.T) {
	orders := map[[2]string]uint8{
		{"true", "MLX5DV_SIGNATURE_CRYPTO_ORDER_SIGNATURE_AFTER_CRYPTO_ON_TX"}:   orderRawWire,
		{"true", "MLX5DV_SIGNATURE_CRYPTO_ORDER_SIGNATURE_BEFORE_CRYPTO_ON_TX"}:  orderEncryptedWireSig,
		{"false", "MLX5DV_SIGNATURE_CRYPTO_ORDER_SIGNATURE_AFTER_CRYPTO_ON_TX"}:  orderEncryptedMemSig,
		{"false", "MLX5DV_SIGNATURE_CRYPTO_ORDER_SIGNATURE_BEFORE_CRYPTO_ON_TX"}: orderRawMem,
	}
	units := map[string]uint64{"MLX5DV_BLOCK_SIZE_512": 512, "MLX5DV_BLOCK_SIZE_520": 520, "MLX5DV_BLOCK_SIZE_4048": 4048, "MLX5DV_BLOCK_SIZE_4096": 4096, "MLX5DV_BLOCK_SIZE_4160": 4160}
	var (
		r          *rig
		a, b       *tqp
		multi      bool
		key        uint32
		psvs       map[uint32]uint32
		wantCrypto *cryptoConf
		wantSig    *sig.BlockAttr
	)
	ran, withBSF := 0, 0
	readJSONL(t, "testdata/crypto_umr_wqes.jsonl", func(line []byte) {
		var rec cryptoUMRRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.DEKs != nil { // a device's setup
			r = newRig(t, "cx7")
			multi = rec.MultiBlock
			r.enableCrypto(multi)
			a, b = pair(t, r, qpOpts{logSQ: 4})
			for _, d := range rec.DEKs {
				pdn := r.pdn
				if d.PD != "pd" {
					pdn++ // another PD: the UMR does not look at the DEK
				}
				n := d.KeySize / 8
				o := &dekObj{pdn: pdn, keyBits: d.KeySize, key1: make([]byte, n), key2: make([]byte, n), hasKeytag: d.HasKeytag}
				r.d.h.mu.Lock()
				r.d.h.deks[uint32(num(t, d.ObjID))] = o
				r.d.h.mu.Unlock()
			}
			return
		}
		if rec.Result != 0 || len(rec.WQEBBs) == 0 {
			return // libmlx5 wrote nothing (an unfinished WR posts nothing too)
		}
		if rec.Mkc != "" {
			if c := prm.Mkc.CryptoEn.Get(unhex(t, rec.Mkc)); c != 1 {
				t.Fatalf("%s: libmlx5's CREATE_MKEY has crypto_en %d", rec.Case, c)
			}
			key, psvs = r.recordedMkey(t, &rec.umrRecord)
		}
		if rec.Fresh {
			wantCrypto, wantSig = nil, nil
		}
		sawSig := false
		for _, s := range rec.Setters {
			switch {
			case s.Op == "wr_set_mkey_sig_block":
				attr, err := s.Attr.BlockAttr()
				if err != nil {
					t.Fatal(err)
				}
				wantSig, sawSig = attr, true
			case s.Crypto != nil:
				c := s.Crypto
				o, ok := orders[[2]string{map[bool]string{true: "true", false: "false"}[c.EncryptOnTX], c.Order}]
				u, uok := units[c.Unit]
				if !ok || !uok {
					t.Fatalf("%s: crypto attribute %+v", rec.Case, c)
				}
				wantCrypto = &cryptoConf{order: o, unit: u, dek: uint32(num(t, c.DEK.ObjID)), single: !multi}
				copy(wantCrypto.tweak[:], unhex(t, c.Tweak))
				copy(wantCrypto.keytag[:], unhex(t, c.Keytag))
			}
		}
		if !sawSig && rec.ConfFlags&1 != 0 {
			wantSig = nil // RESET_SIG_ATTR
		}

		a.reset()
		b.reset()
		connect(a, b, true)
		var wq []byte
		for _, h := range rec.WQEBBs {
			wq = append(wq, unhex(t, h)...)
		}
		// Records that start elsewhere in the ring (wrap cases) run from
		// counter 0: their ctrl segments take the new WQE indexes.
		for off := 0; off < len(wq); off += (int(wq[off+7]&0x3f)*16 + 63) &^ 63 {
			binary.BigEndian.PutUint16(wq[off+1:], uint16(off/64))
			if wq[off+3] == 0x25 && binary.BigEndian.Uint16(wq[off+22:]) != 0 {
				withBSF++
			}
		}
		patchUMR(t, rec.Case, wq, rec.QPN, a.qpn, uint32(num(t, rec.LKey)), key, psvs)
		runRecorded(t, a, rec.Case, wq)
		ran++

		st := r.mkeyState(key)
		switch {
		case wantCrypto == nil && st.crypto != nil:
			t.Errorf("%s: a crypto configuration (%+v) where none was set", rec.Case, *st.crypto)
		case wantCrypto != nil && (st.crypto == nil || prm.Mkc.BsfEn.Get(st.mkc) == 0):
			t.Errorf("%s: no crypto configuration (bsf_en %d)", rec.Case, prm.Mkc.BsfEn.Get(st.mkc))
		case wantCrypto != nil && *st.crypto != *wantCrypto:
			t.Errorf("%s: the crypto BSF reads as %+v (tweak %s), libmlx5 was given %+v (tweak %s)", rec.Case,
				*st.crypto, hex.EncodeToString(st.crypto.tweak[:]), *wantCrypto, hex.EncodeToString(wantCrypto.tweak[:]))
		}
		switch {
		case wantSig == nil && st.sigOn():
			t.Errorf("%s: a signature (%+v) where none was set", rec.Case, st.sig.attr)
		case wantSig != nil && !st.sigOn():
			t.Errorf("%s: no signature", rec.Case)
		case wantSig != nil && !sameAttr(&st.sig.attr, wantSig):
			t.Errorf("%s: the BSF reads as\n%s, libmlx5 was given\n%s", rec.Case, attrString(&st.sig.attr), attrString(wantSig))
		}
		if f := r.d.Faults(); len(f) != 0 {
			t.Fatalf("%s: faults: %q", rec.Case, f)
		}
	})
	t.Logf("%d configures, %d with a BSF", ran, withBSF)
	if ran != 79 || withBSF < 60 {
		t.Errorf("%d configures ran (%d with a BSF), want the 79 libmlx5 wrote", ran, withBSF)
	}
}
