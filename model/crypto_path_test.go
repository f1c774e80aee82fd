package model

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"testing"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
)

// Crypto mkeys on the data path. The UMR WQEs and their BSFs are built
// here byte by byte from the layouts of rdma-core v44.0's wqe.h (struct
// mlx5_bsf, struct mlx5_crypto_bsf) and mlx5dv.h, as libmlx5's qp.c
// fills them; the DEKs are put in the model's table directly.

// enableCrypto gives the rig's HCA the crypto capability and its AES-XTS
// engines (single block; multi block too if multi, else not), on a copy
// of its profile, whatever the profile had.
func (r *rig) enableCrypto(multi bool) {
	h := r.d.h
	h.mu.Lock()
	defer h.mu.Unlock()
	p := *h.prof
	p.pages = maps.Clone(p.pages)
	g := append([]byte(nil), p.pages[prm.MLX5_CAP_GENERAL]...)
	prm.CmdHcaCap.Crypto.Set(g, 1)
	prm.CmdHcaCap.AesXtsSingleBlockLeTweak.Set(g, 1)
	prm.CmdHcaCap.AesXtsMultiBlockBeTweak.Set(g, 0)
	if multi {
		prm.CmdHcaCap.AesXtsMultiBlockBeTweak.Set(g, 1)
	}
	p.pages[prm.MLX5_CAP_GENERAL] = g
	h.prof = &p
}

// tdek puts a READY AES-XTS DEK of keyBytes-byte keys (16 or 32) in PD
// pdn, with keytag if it is not nil, and returns its object id and cipher.
func (r *rig) tdek(pdn uint32, keyBytes int, keytag []byte) (uint32, *xtsCipher) {
	r.t.Helper()
	key := make([]byte, 2*keyBytes)
	pattern(key, uint64(keyBytes))
	return r.tdekKey(pdn, key, keytag)
}

func (r *rig) tdekKey(pdn uint32, key, keytag []byte) (uint32, *xtsCipher) {
	r.t.Helper()
	h := r.d.h
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(key) / 2
	d := &dekObj{pdn: pdn, keyBits: 8 * n, key1: key[:n], key2: key[n:]}
	if keytag != nil {
		d.hasKeytag = true
		copy(d.keytag[:], keytag)
	}
	id := uint32(0x900 + len(h.deks))
	h.deks[id] = d
	x, err := newXTS(key[:n], key[n:])
	if err != nil {
		r.t.Fatal(err)
	}
	return id, x
}

// setDEK changes DEK id under the HCA's lock.
func (r *rig) setDEK(id uint32, f func(d *dekObj)) {
	r.d.h.mu.Lock()
	defer r.d.h.mu.Unlock()
	f(r.d.h.deks[id])
}

// cryptoMkey is a free crypto mkey as mlx5dv_create_mkey makes one with
// MLX5DV_MKEY_INIT_ATTR_FLAGS_CRYPTO (and BLOCK_SIGNATURE if signature):
// crypto_en 1, bsf_en 1, bsf_octword_size 4 for the crypto BSF plus 4 for
// a signature BSF.
func (r *rig) cryptoMkey(pdn uint32, signature bool) *tmkey {
	r.t.Helper()
	return r.freeMkeyPD(pdn, 1, signature, false, func(in []byte) {
		mkc := prm.CreateMkeyIn.MemoryKeyMkeyEntry
		prm.Mkc.CryptoEn.At(mkc).Set(in, 1)
		prm.Mkc.BsfEn.At(mkc).Set(in, 1)
		ow := uint64(4)
		if signature {
			ow = 8
		}
		prm.Mkc.BsfOctwordSize.At(mkc).Set(in, ow)
	})
}

// tcrypto is a crypto BSF to write: the enc_order, the data unit size
// selector (bs_pointer), the user's initial tweak (little-endian, as
// mlx5dv_crypto_attr takes it), the DEK and the keytag.
type tcrypto struct {
	order, sel uint8
	tweak      [16]byte
	dek        uint32
	keytag     [8]byte
}

// cryptoBSF writes struct mlx5_crypto_bsf as mlx5_umr_fill_crypto_bsf
// does: bsf_size_type, enc_order, enc_standard AES-XTS (0),
// raw_data_size all ones, bs_pointer, xts_init_tweak (reversed for the
// multi-block engine), rsvd_dek_ptr, keytag.
func cryptoBSF(c tcrypto, multi, withSig bool) []byte {
	b := make([]byte, 64)
	b[0] = 2<<6 | 1 // MLX5_BSF_SIZE_WITH_INLINE, MLX5_BSF_TYPE_CRYPTO
	if withSig {
		b[0] = 3<<6 | 1 // MLX5_BSF_SIZE_SIG_AND_CRYPTO
	}
	b[1] = c.order
	binary.BigEndian.PutUint32(b[4:], 0xffffffff)
	b[8] = c.sel
	for i := range 16 {
		if multi {
			b[16+i] = c.tweak[15-i]
		} else {
			b[16+i] = c.tweak[i]
		}
	}
	binary.BigEndian.PutUint32(b[32:], c.dek&0xffffff)
	copy(b[40:], c.keytag[:])
	return b
}

// tsel is bs_to_bs_selector (qp.c).
var tsel = map[sig.BlockSize]uint8{sig.BlockSize512: 1, sig.BlockSize520: 2, sig.BlockSize4096: 3, sig.BlockSize4160: 4, sig.BlockSize4048: 6}

// sigBSF writes struct mlx5_bsf as mlx5_umr_fill_sig_bsf does for
// domains that differ (no same block structure): bsf_size_sbs,
// check_byte_mask, the block size selectors, raw_data_size, the
// w/m_bfs_psv words and the inline T10-DIF parts. Nil domains leave
// theirs zero: both nil is the empty signature BSF libmlx5 writes beside
// a crypto BSF after a reset.
func sigBSF(mem, wire *sig.Domain, memPSV, wirePSV uint32, withCrypto bool) []byte {
	b := make([]byte, 64)
	b[0] = 2 << 6
	if withCrypto {
		b[0] = 3 << 6
	}
	binary.BigEndian.PutUint32(b[4:], 0xffffffff)
	if mem != nil || wire != nil {
		b[1] = 0xff
	}
	dom := func(d *sig.Domain, psv uint32, sel, bfs, inl []byte) {
		sel[0] = tsel[d.BlockSize]
		w := psv & 0xffffff
		if d.Type == sig.SigTypeCRC {
			base := map[sig.CRCType]uint32{sig.CRCTypeCRC32: 0x20, sig.CRCTypeCRC32C: 0x40, sig.CRCTypeCRC64XP10: 0x50}[d.CRC.Type]
			bits := uint32(0x2) // MLX5_BFS_CRC_REPEAT_BIT; SEED_BIT for a zero seed
			if d.CRC.Seed == 0 {
				bits |= 1
			}
			w |= (base | bits) << 24
		} else {
			dif := d.T10DIF
			binary.BigEndian.PutUint16(inl, 0xc000) // MLX5_BSF_INL_VALID | MLX5_BSF_REFRESH_DIF
			binary.BigEndian.PutUint16(inl[2:], dif.AppTag)
			binary.BigEndian.PutUint32(inl[4:], dif.RefTag)
			inl[8] = 1 // MLX5_T10DIF_CRC
			if dif.Guard == sig.T10DIFGuardCsum {
				inl[8] = 2
			}
			inl[9] = 0x80 // MLX5_BSF_REPEAT_BLOCK
			if dif.Seed == 0xffff {
				inl[9] |= 0x08 // MLX5_BSF_SEED
			}
			if dif.Flags&sig.T10DIFRefRemap != 0 {
				inl[13] |= 0x40 // MLX5_BSF_INC_REFTAG
			}
			binary.BigEndian.PutUint16(inl[14:], 0xffff)
		}
		binary.BigEndian.PutUint32(bfs, w)
	}
	if mem != nil {
		dom(mem, memPSV, b[3:4], b[12:16], b[48:64])
	}
	if wire != nil {
		dom(wire, wirePSV, b[2:3], b[8:12], b[32:48])
	}
	return b
}

// umrWQE is the UMR WQE of an mkey configure with a layout list of one
// entry (k) and access LW|RR|RW, as libmlx5 writes it: ctrl, UMR ctrl
// (INLINE, 4 KLM octwords, the BSF octwords, the mkey mask), the mkey
// context, the KLMs padded to four, then the BSFs.
func umrWQE(qpn uint32, pi uint16, key uint32, k klm, length uint64, bsfs ...[]byte) []byte {
	b := make([]byte, 16+48+64+64)
	for _, s := range bsfs {
		b = append(b, s...)
	}
	binary.BigEndian.PutUint32(b[0:], uint32(pi)<<8|0x25) // MLX5_OPCODE_UMR
	binary.BigEndian.PutUint32(b[4:], qpn<<8|uint32(len(b)/16))
	b[11] = tSignaled
	binary.BigEndian.PutUint32(b[12:], key)
	uc := b[16:64]
	uc[0] = 0x80                          // MLX5_WQE_UMR_CTRL_FLAG_INLINE
	binary.BigEndian.PutUint16(uc[4:], 4) // klm_octowords
	binary.BigEndian.PutUint16(uc[6:], uint16((len(b)-192)/16))
	mask := uint64(maskFree | maskMkey | maskLen | maskStartAddr | maskLR | maskLW | maskRR | maskRW)
	if len(bsfs) > 0 {
		mask |= maskBSFEnable
	}
	binary.BigEndian.PutUint64(uc[8:], mask)
	mkc := b[64:128]
	for _, f := range []prm.Field{prm.Mkc.Lr, prm.Mkc.Lw, prm.Mkc.Rr, prm.Mkc.Rw} {
		f.Set(mkc, 1)
	}
	prm.Mkc.Mkey70.Set(mkc, uint64(key&0xff))
	prm.Mkc.Qpn.Set(mkc, 0xffffff)
	prm.Mkc.Len.Set(mkc, length)
	if len(bsfs) > 0 {
		prm.Mkc.BsfEn.Set(mkc, 1)
	}
	binary.BigEndian.PutUint32(b[128:], k.byteCount)
	binary.BigEndian.PutUint32(b[132:], k.key)
	binary.BigEndian.PutUint64(b[136:], k.va)
	return b
}

// umr posts a UMR WQE built by umrWQE and returns its CQE.
func (q *tqp) umr(m *tmkey, k klm, length uint64, bsfs ...[]byte) []byte {
	q.r.t.Helper()
	idx := q.put(umrWQE(q.qpn, q.sqPI, m.key, k, length, bsfs...))
	q.ring(idx)
	return q.scq.next()
}

// cqeStatus is a CQE's opcode and, for an error CQE, its syndrome.
func cqeStatus(c []byte) (op, syndrome uint8) { return c[63] >> 4, c[55] }

// protect lays data out with d's signature after each block, as sig's
// engine generates it.
func protect(t *testing.T, d *sig.Domain, data []byte) []byte {
	t.Helper()
	eng, err := sig.NewEngine(&sig.BlockAttr{Wire: d, CheckMask: 0xff})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, layoutOf(eng, sig.DomainWire).bytes(uint64(len(data))))
	if me, err := eng.Transfer(sig.TX, out, data); err != nil || !me.OK() {
		t.Fatal(me, err)
	}
	return out
}

// xtsStream encrypts (or decrypts) b in data units of unit bytes, unit k
// (from 0) under tweak tw + k.
func xtsStream(t *testing.T, x *xtsCipher, b []byte, unit int, tw [16]byte, dec bool) []byte {
	t.Helper()
	out := make([]byte, len(b))
	for k := 0; k*unit < len(b); k++ {
		end := min((k+1)*unit, len(b))
		if err := x.crypt(out[k*unit:end], b[k*unit:end], xtsTweak(tw).add(uint64(k)), dec); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

var cryptoAll = uint32(accessLocalWrite | accessRemoteRead | accessRemoteWrite)

// TestCryptoMkeyRows moves data through crypto mkeys configured as each
// row of mlx5dv_wr_set_mkey_crypto(3)'s table (A to J; A and F with both
// orders, and the raw orders with the other domain's signature) and
// checks both directions against AES-XTS and sig's engine applied in the
// row's order: an RDMA WRITE gathering from the mkey (TX) puts the row's
// wire bytes on the wire, and an RDMA WRITE of those bytes into the mkey
// as an rkey (RX) leaves the row's memory bytes in memory, with no
// signature error either way (a check in the wrong order would fail).
func TestCryptoMkeyRows(t *testing.T) {
	t10 := t10dif(sig.BlockSize512, 9)
	crc := &sig.Domain{Type: sig.SigTypeCRC, BlockSize: sig.BlockSize512, CRC: &sig.CRC{Type: sig.CRCTypeCRC32, Seed: 0xffffffff}}
	tweak := [16]byte{0x9a, 0x78, 0x56, 0x34, 0x12, 15: 0x01}
	type layout func(t *testing.T, data []byte, enc func([]byte, int) []byte) []byte
	plain := func(t *testing.T, data []byte, enc func([]byte, int) []byte) []byte { return data }
	encd := func(u int) layout {
		return func(t *testing.T, data []byte, enc func([]byte, int) []byte) []byte { return enc(data, u) }
	}
	prot := func(d *sig.Domain) layout {
		return func(t *testing.T, data []byte, enc func([]byte, int) []byte) []byte { return protect(t, d, data) }
	}
	encProt := func(d *sig.Domain, u int) layout { // enc(data+SIG)
		return func(t *testing.T, data []byte, enc func([]byte, int) []byte) []byte {
			return enc(protect(t, d, data), u)
		}
	}
	protEnc := func(d *sig.Domain) layout { // enc(data)+SIG
		return func(t *testing.T, data []byte, enc func([]byte, int) []byte) []byte {
			return protect(t, d, enc(data, 512))
		}
	}
	rows := []struct {
		name      string
		order     uint8
		mem, wire *sig.Domain
		unit      sig.BlockSize
		memOf     layout
		wireOf    layout
	}{
		{"A before", orderEncryptedWireSig, nil, nil, sig.BlockSize512, plain, encd(512)},
		{"A after", orderRawWire, nil, nil, sig.BlockSize512, plain, encd(512)},
		{"B", orderRawWire, nil, crc, sig.BlockSize512, plain, protEnc(crc)},
		{"C", orderEncryptedWireSig, nil, t10, sig.BlockSize520, plain, encProt(t10, 520)},
		{"D", orderEncryptedWireSig, t10, nil, sig.BlockSize512, prot(t10), encd(512)},
		{"D by RAW_WIRE", orderRawWire, t10, nil, sig.BlockSize512, prot(t10), encd(512)},
		{"E", orderEncryptedWireSig, crc, t10, sig.BlockSize520, prot(crc), encProt(t10, 520)},
		{"F after", orderEncryptedMemSig, nil, nil, sig.BlockSize512, encd(512), plain},
		{"F before", orderRawMem, nil, nil, sig.BlockSize512, encd(512), plain},
		{"G", orderEncryptedMemSig, nil, crc, sig.BlockSize512, encd(512), prot(crc)},
		{"G by RAW_MEMORY", orderRawMem, nil, crc, sig.BlockSize512, encd(512), prot(crc)},
		{"H", orderEncryptedMemSig, t10, nil, sig.BlockSize520, encProt(t10, 520), plain},
		{"I", orderEncryptedMemSig, t10, crc, sig.BlockSize520, encProt(t10, 520), prot(crc)},
		{"J", orderRawMem, crc, nil, sig.BlockSize512, protEnc(crc), plain},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := newRig(t, "cx7")
			r.enableCrypto(true)
			a, _ := pair(t, r, qpOpts{})
			dekID, x := r.tdek(r.pdn, 32, nil)
			enc := func(b []byte, u int) []byte { return xtsStream(t, x, b, u, tweak, false) }
			data := make([]byte, 4*512)
			pattern(data, 25)
			wantMem, wantWire := row.memOf(t, data, enc), row.wireOf(t, data, enc)
			signed := row.mem != nil || row.wire != nil

			mem, km := r.mr(len(wantMem), cryptoAll)
			copy(mem, wantMem)
			mk := r.cryptoMkey(r.pdn, signed)
			c := tcrypto{order: row.order, sel: tsel[row.unit], tweak: tweak, dek: dekID}
			var bsfs [][]byte
			if signed {
				bsfs = append(bsfs, sigBSF(row.mem, row.wire, mk.memPSV, mk.wirePSV, true))
			}
			bsfs = append(bsfs, cryptoBSF(c, true, signed))
			if op, syn := cqeStatus(a.umr(mk, klm{uint32(len(mem)), km.LKey, addr(mem)}, uint64(len(mem)), bsfs...)); op != 0 {
				t.Fatalf("the UMR completed with opcode %#x syndrome %#x", op, syn)
			}

			// TX: gather through the mkey.
			dst, kdst := r.mr(len(wantWire)+64, cryptoAll)
			a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst), rkey: kdst.RKey, sges: []tsge{{uint32(len(wantWire)), mk.key, 0}}})
			if op, syn := cqeStatus(a.scq.next()); op != 0 {
				t.Fatalf("TX: opcode %#x syndrome %#x", op, syn)
			}
			if !bytes.Equal(dst[:len(wantWire)], wantWire) {
				t.Errorf("TX: the wire bytes are not the row's")
			}
			// RX: scatter through the mkey as an rkey.
			clear(mem)
			src, ksrc := r.mr(len(wantWire), cryptoAll)
			copy(src, wantWire)
			a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: 0, rkey: mk.key, sges: []tsge{{uint32(len(src)), ksrc.LKey, addr(src)}}})
			if op, syn := cqeStatus(a.scq.next()); op != 0 {
				t.Fatalf("RX: opcode %#x syndrome %#x", op, syn)
			}
			if !bytes.Equal(mem, wantMem) {
				t.Errorf("RX: memory does not hold the row's bytes")
			}
			a.scq.none(0)
			if f := r.d.Faults(); len(f) != 0 {
				t.Errorf("faults: %q", f)
			}
		})
	}
}

// TestCryptoTrafficAsRdmaCoreTests runs rdma-core's
// tests/test_mlx5_crypto.py traffic (v44.0, reg_client_mkey and traffic)
// on the model: the client's two crypto mkeys, one with encrypt_on_tx over
// msg_size/2 bytes of 'c' and one without over the expected ciphertext,
// data unit 512, tweak 0, both SENT to the server, whose first receive
// must hold the ciphertext and its second the 'c's. The 128-bit DEK is
// key1 = 1..16, key2 = 17..32, so the ciphertext is the one whose digest
// TestXTSUnits has from OpenSSL; msg_size 2048 is the multi-block test
// (two data units, tweaks 0 and 1). The same DEK decrypts on the
// server's RECV into a crypto mkey as well.
func TestCryptoTrafficAsRdmaCoreTests(t *testing.T) {
	for _, half := range []int{512, 1024} {
		t.Run(fmt.Sprint(half), func(t *testing.T) {
			r := newRig(t, "cx7")
			r.enableCrypto(true)
			client, server := pair(t, r, qpOpts{})
			key := make([]byte, 32)
			for i := range key {
				key[i] = byte(i + 1)
			}
			dekID, x := r.tdekKey(r.pdn, key, nil)
			var zero [16]byte
			ct := xtsStream(t, x, bytes.Repeat([]byte{'c'}, half), 512, zero, false)
			cmr, kc := r.mr(2*half, cryptoAll)
			copy(cmr, bytes.Repeat([]byte{'c'}, half))
			copy(cmr[half:], ct)
			wireEnc, memEnc := r.cryptoMkey(r.pdn, false), r.cryptoMkey(r.pdn, false)
			for i, mk := range []*tmkey{wireEnc, memEnc} {
				order := uint8(orderEncryptedWireSig) // encrypt_on_tx, SIGNATURE_BEFORE_CRYPTO_ON_TX
				if i == 1 {
					order = orderRawMem
				}
				c := cryptoBSF(tcrypto{order: order, sel: 1, dek: dekID}, true, false)
				if op, _ := cqeStatus(client.umr(mk, klm{uint32(half), kc.LKey, addr(cmr[i*half:])}, uint64(half), c)); op != 0 {
					t.Fatal("UMR failed")
				}
			}
			smr, ks := r.mr(2*half, cryptoAll)
			server.recv(tsge{uint32(half), ks.LKey, addr(smr)})
			server.recv(tsge{uint32(half), ks.LKey, addr(smr[half:])})
			client.post(twqe{opcode: tOpSend, fm: tSignaled, sges: []tsge{{uint32(half), wireEnc.key, 0}}})
			client.post(twqe{opcode: tOpSend, fm: tSignaled, sges: []tsge{{uint32(half), memEnc.key, 0}}})
			for range 2 {
				if op, syn := cqeStatus(client.scq.next()); op != 0 {
					t.Fatalf("SEND: opcode %#x syndrome %#x", op, syn)
				}
				if op, syn := cqeStatus(server.rcq.next()); op != 2 {
					t.Fatalf("RECV: opcode %#x syndrome %#x", op, syn)
				}
			}
			if !bytes.Equal(cmr[:half], smr[half:]) || !bytes.Equal(cmr[half:], smr[:half]) {
				t.Error("the server's buffers are not the client's swapped (validate_crypto_data)")
			}
			// RECV into a crypto mkey without encrypt_on_tx: RX encrypts,
			// so the plaintext a SEND carries lands as the ciphertext.
			rk := r.cryptoMkey(r.pdn, false)
			rmem, krm := r.mr(half, cryptoAll)
			if op, _ := cqeStatus(server.umr(rk, klm{uint32(half), krm.LKey, addr(rmem)}, uint64(half), cryptoBSF(tcrypto{order: orderEncryptedMemSig, sel: 1, dek: dekID}, true, false))); op != 0 {
				t.Fatal("UMR failed")
			}
			server.recv(tsge{uint32(half), rk.key, 0})
			client.post(twqe{opcode: tOpSend, fm: tSignaled, sges: []tsge{{uint32(half), kc.LKey, addr(cmr)}}})
			if op, _ := cqeStatus(client.scq.next()); op != 0 {
				t.Fatal("SEND failed")
			}
			if op, syn := cqeStatus(server.rcq.next()); op != 2 {
				t.Fatalf("RECV into the crypto mkey: opcode %#x syndrome %#x", op, syn)
			}
			if !bytes.Equal(rmem, ct) {
				t.Error("the RECV into the crypto mkey did not encrypt")
			}
		})
	}
}

// TestCryptoTweakAndOffsets checks where data units fall: an access at an
// offset starts at the data unit it is in, with the initial tweak plus
// that unit's number (an RDMA WRITE from unit 2, an RDMA READ of the mkey
// as an rkey from unit 1, an RDMA READ landing in it from unit 3), the
// last unit may be short (the man page's job-size rule), and the
// single-block engine, which reads the tweak little-endian, gives the same
// ciphertext for one data unit as the multi-block engine, which reads it
// reversed.
func TestCryptoTweakAndOffsets(t *testing.T) {
	tweak := [16]byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 8: 0x42} // carries into byte 8 at unit 2
	for _, multi := range []bool{true, false} {
		t.Run(fmt.Sprintf("multi=%v", multi), func(t *testing.T) {
			r := newRig(t, "cx7")
			r.enableCrypto(multi)
			a, b := pair(t, r, qpOpts{})
			dekID, x := r.tdek(r.pdn, 16, nil)
			const u = 512
			data := make([]byte, 8*u)
			pattern(data, 3)
			want := xtsStream(t, x, data, u, tweak, false)
			mem, km := r.mr(len(data), cryptoAll)
			copy(mem, data)
			mk := r.cryptoMkey(r.pdn, false)
			c := cryptoBSF(tcrypto{order: orderEncryptedWireSig, sel: 1, tweak: tweak, dek: dekID}, multi, false)
			if op, _ := cqeStatus(a.umr(mk, klm{uint32(len(mem)), km.LKey, addr(mem)}, uint64(len(mem)), c)); op != 0 {
				t.Fatal("UMR failed")
			}
			dst, kdst := r.mr(len(data), cryptoAll)
			if !multi {
				// One data unit, from offset 0: the single-block engine's
				// whole job.
				a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst), rkey: kdst.RKey, sges: []tsge{{u, mk.key, 0}}})
				if op, _ := cqeStatus(a.scq.next()); op != 0 || !bytes.Equal(dst[:u], want[:u]) {
					t.Fatalf("single block: opcode %#x, ciphertext equal %v", op, bytes.Equal(dst[:u], want[:u]))
				}
				a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst), rkey: kdst.RKey, sges: []tsge{{2 * u, mk.key, 0}}})
				if op, syn := cqeStatus(a.scq.next()); op != 13 || syn != SyndromeLocalProt {
					t.Errorf("two data units on the single-block engine: opcode %#x syndrome %#x, want 0xd and %#x", op, syn, SyndromeLocalProt)
				}
				return
			}
			a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst), rkey: kdst.RKey, sges: []tsge{{3*u + 48, mk.key, 2 * u}}})
			if op, _ := cqeStatus(a.scq.next()); op != 0 || !bytes.Equal(dst[:2*u], want[2*u:4*u]) {
				t.Errorf("RDMA WRITE from unit 2: opcode %#x, whole units equal %v", op, bytes.Equal(dst[:2*u], want[2*u:4*u]))
			}
			// The short last unit is a data unit of its own: 48 bytes.
			var tw xtsTweak = tweak
			short := make([]byte, 48)
			if err := x.crypt(short, data[5*u:5*u+48], tw.add(5), false); err != nil || !bytes.Equal(dst[3*u:3*u+48], short) {
				t.Errorf("the 48-byte last unit is not unit 5's tweak's (%v)", err)
			}
			clear(dst)
			b.post(twqe{opcode: tOpRDMARead, fm: tSignaled, hasRaddr: true, raddr: u, rkey: mk.key, sges: []tsge{{2 * u, kdst.LKey, addr(dst)}}})
			if op, _ := cqeStatus(b.scq.next()); op != 0 || !bytes.Equal(dst[:2*u], want[u:3*u]) {
				t.Errorf("RDMA READ from unit 1: opcode %#x", op)
			}
			// An RDMA READ landing in the mkey decrypts (RX).
			src, ksrc := r.mr(len(data), cryptoAll)
			copy(src, want)
			clear(mem)
			a.post(twqe{opcode: tOpRDMARead, fm: tSignaled, hasRaddr: true, raddr: addr(src[3*u:]), rkey: ksrc.RKey, sges: []tsge{{2 * u, mk.key, 3 * u}}})
			if op, _ := cqeStatus(a.scq.next()); op != 0 || !bytes.Equal(mem[3*u:5*u], data[3*u:5*u]) {
				t.Errorf("RDMA READ into unit 3: opcode %#x", op)
			}
			if f := r.d.Faults(); len(f) != 0 {
				t.Errorf("faults: %q", f)
			}
		})
	}
}

// TestCryptoErrors checks the refusals of the data path, each as the bad
// key it makes the mkey: the requester's gather fails with
// LOCAL_PROT_ERR, an RDMA WRITE into the mkey as an rkey with
// REMOTE_ACCESS_ERR at the requester: a keytag that is not the DEK's, a
// DEK in ERROR, a DEK destroyed or of another PD, a crypto mkey no UMR
// configured, an offset inside a data unit, and job sizes the man page
// rules out. A DEK without a keytag ignores the BSF's, and an atomic
// cannot go through a crypto mkey.
func TestCryptoErrors(t *testing.T) {
	type setup struct {
		r    *rig
		a    *tqp
		mk   *tmkey
		dek  uint32
		dst  []byte
		kdst uint32
		src  []byte
		ksrc uint32
		mem  []byte
	}
	mkSetup := func(t *testing.T, keytag []byte, bsfTag [8]byte, configure bool) *setup {
		r := newRig(t, "cx7")
		r.enableCrypto(true)
		s := &setup{r: r}
		s.a, _ = pair(t, r, qpOpts{})
		s.dek, _ = r.tdek(r.pdn, 32, keytag)
		var km, kd, ks seam.MR
		s.mem, km = r.mr(4096, cryptoAll)
		s.dst, kd = r.mr(4096, cryptoAll)
		s.src, ks = r.mr(4096, cryptoAll)
		s.kdst, s.ksrc = kd.RKey, ks.LKey
		s.mk = r.cryptoMkey(r.pdn, false)
		if configure {
			c := cryptoBSF(tcrypto{order: orderEncryptedWireSig, sel: 1, dek: s.dek, keytag: bsfTag}, true, false)
			if op, _ := cqeStatus(s.a.umr(s.mk, klm{4096, km.LKey, addr(s.mem)}, 4096, c)); op != 0 {
				t.Fatal("UMR failed")
			}
		}
		return s
	}
	// tx gathers n bytes at off of the mkey; rx writes n bytes at off of
	// it as an rkey. Each returns the CQE's opcode and syndrome.
	tx := func(s *setup, off, n uint32) (uint8, uint8) {
		s.a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(s.dst), rkey: s.kdst, sges: []tsge{{n, s.mk.key, uint64(off)}}})
		return cqeStatus(s.a.scq.next())
	}
	rx := func(s *setup, off, n uint32) (uint8, uint8) {
		s.a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: uint64(off), rkey: s.mk.key, sges: []tsge{{n, s.ksrc, addr(s.src)}}})
		return cqeStatus(s.a.scq.next())
	}
	tag := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	t.Run("keytag", func(t *testing.T) {
		s := mkSetup(t, tag[:], [8]byte{1, 2, 3, 4, 5, 6, 7, 9}, true)
		if op, syn := tx(s, 0, 512); op != 13 || syn != SyndromeLocalProt {
			t.Errorf("a wrong keytag: opcode %#x syndrome %#x", op, syn)
		}
		s = mkSetup(t, tag[:], tag, true)
		if op, _ := tx(s, 0, 512); op != 0 {
			t.Errorf("the right keytag: opcode %#x", op)
		}
		s = mkSetup(t, nil, tag, true)
		if op, _ := tx(s, 0, 512); op != 0 {
			t.Errorf("a DEK without a keytag and a BSF with one: opcode %#x", op)
		}
	})
	cases := []struct {
		name   string
		change func(s *setup)
		off, n uint32
		noUMR  bool
	}{
		{name: "DEK in ERROR", change: func(s *setup) { s.r.setDEK(s.dek, func(d *dekObj) { d.state = 1 }) }, n: 512},
		{name: "DEK destroyed", change: func(s *setup) {
			s.r.d.h.mu.Lock()
			delete(s.r.d.h.deks, s.dek)
			s.r.d.h.mu.Unlock()
		}, n: 512},
		{name: "DEK of another PD", change: func(s *setup) { s.r.setDEK(s.dek, func(d *dekObj) { d.pdn++ }) }, n: 512},
		{name: "not configured", noUMR: true, n: 512},
		{name: "inside a data unit", off: 16, n: 512},
		{name: "47 bytes", n: 47},
		{name: "8 bytes", n: 8},
		{name: "520 bytes: 8 short of a multiple of 16", n: 520},
		{name: "504 bytes: a last unit over 496", n: 504},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, side := range []string{"TX", "RX"} {
				s := mkSetup(t, nil, [8]byte{}, !c.noUMR)
				if c.change != nil {
					c.change(s)
				}
				run, want := tx, uint8(SyndromeLocalProt)
				if side == "RX" {
					run, want = rx, SyndromeRemoteAccess
				}
				op, syn := run(s, c.off, c.n)
				if op != 13 || syn != want {
					t.Errorf("%s: opcode %#x syndrome %#x, want 0xd and %#x", side, op, syn, want)
				}
				if side == "RX" && !bytes.Equal(s.mem, make([]byte, len(s.mem))) {
					t.Error("a refused RX changed memory")
				}
			}
		})
	}
	t.Run("job sizes allowed", func(t *testing.T) {
		// 128 bytes (a multiple of 16 in one unit) and 512 + 480 (the
		// last unit 16 short of a whole one).
		for _, n := range []uint32{16, 128, 512 + 480, 1024} {
			s := mkSetup(t, nil, [8]byte{}, true)
			if op, syn := tx(s, 0, n); op != 0 {
				t.Errorf("TX of %d bytes: opcode %#x syndrome %#x", n, op, syn)
			}
		}
	})
	t.Run("atomic", func(t *testing.T) {
		s := mkSetup(t, nil, [8]byte{}, true)
		// The model runs atomics on DC only; the rule is the key's.
		s.r.d.h.mu.Lock()
		_, e := s.r.d.h.atomic(s.mk.key, s.r.pdn, 0, opAtomicCS, 0, 0)
		s.r.d.h.mu.Unlock()
		if e == nil {
			t.Error("an atomic through a crypto mkey was accepted")
		}
	})
}

// TestCryptoUMR parses every BSF combination a UMR may carry for a crypto
// mkey, built from wqe.h's layouts, and the refusals: a crypto BSF alone
// (each engine's tweak byte order), a signature BSF then a crypto BSF, an
// empty signature BSF then a crypto BSF (libmlx5 after a signature
// reset), a signature BSF alone (which drops the crypto), and BSFs the
// model refuses with LOCAL_QP_OP_ERR, leaving the mkey as it was.
func TestCryptoUMR(t *testing.T) {
	t10 := t10dif(sig.BlockSize512, 3)
	tweak := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	tag := [8]byte{0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0x1, 0x2}
	c := tcrypto{order: orderEncryptedMemSig, sel: 2, tweak: tweak, dek: 0xabcdef, keytag: tag}
	want := cryptoConf{order: orderEncryptedMemSig, unit: 520, tweak: tweak, dek: 0xabcdef, keytag: tag}
	r := newRig(t, "cx7")
	r.enableCrypto(true)
	q := &qpObj{pdn: r.pdn, qpn: 0x77}
	umr := func(m *tmkey, bsfs ...[]byte) *wqeFail {
		b := umrWQE(q.qpn, 0, m.key, klm{4096, 0x100, 0}, 4096, bsfs...)
		r.d.h.mu.Lock()
		defer r.d.h.mu.Unlock()
		return r.d.h.execUMR(q, &sendWQE{opcode: 0x25, qpn: q.qpn, ds: len(b) / 16, imm: m.key, b: b})
	}
	state := func(m *tmkey) (*sigConf, *cryptoConf) {
		s := r.mkeyState(m.key)
		return s.sig, s.crypto
	}
	both := r.cryptoMkey(r.pdn, true)
	alone := r.cryptoMkey(r.pdn, false)
	plain := r.freeMkey(1, true)

	if f := umr(alone, cryptoBSF(c, true, false)); f != nil {
		t.Fatalf("crypto BSF alone: %s", f.why)
	}
	if s, cc := state(alone); s != nil || cc == nil || *cc != want {
		t.Errorf("crypto BSF alone, multi-block: signature %v, crypto %+v; want none and %+v", s, cc, want)
	}
	if f := umr(both, sigBSF(t10, nil, both.memPSV, both.wirePSV, true), cryptoBSF(c, true, true)); f != nil {
		t.Fatalf("signature and crypto BSFs: %s", f.why)
	}
	if s, cc := state(both); s == nil || s.attr.Mem == nil || s.attr.Wire != nil || s.memPSV != both.memPSV || cc == nil || *cc != want {
		t.Errorf("signature and crypto BSFs: signature %+v, crypto %+v", s, cc)
	}
	if f := umr(both, sigBSF(nil, nil, 0, 0, true), cryptoBSF(c, true, true)); f != nil {
		t.Fatalf("empty signature BSF and crypto BSF: %s", f.why)
	}
	if s, cc := state(both); s != nil || cc == nil {
		t.Errorf("empty signature BSF and crypto BSF: signature %+v, crypto %+v; want none and the crypto", s, cc)
	}
	if f := umr(both, sigBSF(nil, t10, both.memPSV, both.wirePSV, false)); f != nil {
		t.Fatalf("signature BSF alone on a crypto mkey: %s", f.why)
	}
	if s, cc := state(both); s == nil || cc != nil {
		t.Errorf("signature BSF alone: signature %+v, crypto %+v; want the signature and no crypto", s, cc)
	}
	if f := umr(alone); f != nil {
		t.Fatalf("a UMR without BSF: %s", f.why)
	}
	if _, cc := state(alone); cc == nil {
		t.Error("a UMR without BSF dropped the crypto configuration")
	}

	bad := func(mut func(b []byte)) []byte {
		b := cryptoBSF(c, true, false)
		mut(b)
		return b
	}
	refused := []struct {
		name string
		m    *tmkey
		bsfs [][]byte
	}{
		{"crypto BSF on an mkey without crypto_en", plain, [][]byte{cryptoBSF(c, true, false)}},
		{"crypto BSF alone of size SIG_AND_CRYPTO", alone, [][]byte{cryptoBSF(c, true, true)}},
		{"signature BSF of size SIG_AND_CRYPTO alone", both, [][]byte{sigBSF(t10, nil, both.memPSV, both.wirePSV, true)}},
		{"crypto BSF before the signature BSF", both, [][]byte{cryptoBSF(c, true, true), sigBSF(t10, nil, both.memPSV, both.wirePSV, true)}},
		{"two BSFs of size WITH_INLINE", both, [][]byte{sigBSF(t10, nil, both.memPSV, both.wirePSV, false), cryptoBSF(c, true, false)}},
		{"two BSFs on an mkey with room for one", alone, [][]byte{sigBSF(nil, nil, 0, 0, true), cryptoBSF(c, true, true)}},
		{"encryption standard 1", alone, [][]byte{bad(func(b []byte) { b[3] = 1 })}},
		{"enc_order 4", alone, [][]byte{bad(func(b []byte) { b[1] = 4 })}},
		{"data unit selector 0", alone, [][]byte{bad(func(b []byte) { b[8] = 0 })}},
		{"data unit selector 5", alone, [][]byte{bad(func(b []byte) { b[8] = 5 })}},
		{"a raw order with signatures in both domains", both, [][]byte{sigBSF(t10, t10dif(sig.BlockSize520, 1), both.memPSV, both.wirePSV, true), bad(func(b []byte) { b[0], b[1] = 3<<6|1, orderRawMem })}},
		{"three BSFs", both, [][]byte{sigBSF(nil, nil, 0, 0, true), cryptoBSF(c, true, true), cryptoBSF(c, true, true)}},
	}
	for _, tc := range refused {
		before, beforeC := state(tc.m)
		f := umr(tc.m, tc.bsfs...)
		if f == nil || f.syndrome != SyndromeLocalQPOp {
			t.Errorf("%s: accepted (%v)", tc.name, f)
			continue
		}
		if s, cc := state(tc.m); s != before || cc != beforeC {
			t.Errorf("%s: the refused UMR changed the mkey", tc.name)
		}
	}

	// The single-block engine reads xts_init_tweak as it is.
	r1 := newRig(t, "cx7")
	r1.enableCrypto(false)
	m1 := r1.cryptoMkey(r1.pdn, false)
	b := umrWQE(q.qpn, 0, m1.key, klm{4096, 0x100, 0}, 4096, cryptoBSF(c, false, false))
	r1.d.h.mu.Lock()
	f := r1.d.h.execUMR(&qpObj{pdn: r1.pdn, qpn: q.qpn}, &sendWQE{opcode: 0x25, qpn: q.qpn, ds: len(b) / 16, imm: m1.key, b: b})
	r1.d.h.mu.Unlock()
	want.single = true
	if cc := r1.mkeyState(m1.key).crypto; f != nil || cc == nil || *cc != want {
		t.Errorf("single-block engine: %v, crypto %+v, want %+v", f, cc, want)
	}
}

// TestCryptoCreateMkey checks CREATE_MKEY's rule for crypto_en: refused
// (BAD_PARAM) on an HCA without crypto, with crypto_en other than 1,
// without bsf_en or without room for a crypto BSF; accepted as libmlx5
// sends it.
func TestCryptoCreateMkey(t *testing.T) {
	create := func(r *rig, f func(in []byte, mkc prm.Field)) error {
		in := mbox(prm.CreateMkeyIn.Layout(), prm.MLX5_CMD_OP_CREATE_MKEY)
		mkc := prm.CreateMkeyIn.MemoryKeyMkeyEntry
		prm.Mkc.Free.At(mkc).Set(in, 1)
		prm.Mkc.UmrEn.At(mkc).Set(in, 1)
		prm.Mkc.AccessMode10.At(mkc).Set(in, accessModeKLMS)
		prm.Mkc.Pd.At(mkc).Set(in, uint64(r.pdn))
		prm.Mkc.TranslationsOctwordSize.At(mkc).Set(in, 4)
		prm.Mkc.CryptoEn.At(mkc).Set(in, 1)
		prm.Mkc.BsfEn.At(mkc).Set(in, 1)
		prm.Mkc.BsfOctwordSize.At(mkc).Set(in, 4)
		f(in, mkc)
		_, err := r.d.ObjCreate(in, make([]byte, 16))
		return err
	}
	off := newRig(t, "cx7")
	off.enableCrypto(false)
	off.setCap(prm.CmdHcaCap.Crypto, 0)
	if err := create(off, func([]byte, prm.Field) {}); err == nil {
		t.Error("a crypto mkey on an HCA without crypto was created")
	}
	r := newRig(t, "cx7")
	r.enableCrypto(false)
	if err := create(r, func([]byte, prm.Field) {}); err != nil {
		t.Errorf("a crypto mkey as libmlx5 creates it: %v", err)
	}
	for _, c := range []struct {
		name string
		f    func(in []byte, mkc prm.Field)
	}{
		{"crypto_en 2", func(in []byte, mkc prm.Field) { prm.Mkc.CryptoEn.At(mkc).Set(in, 2) }},
		{"bsf_en 0", func(in []byte, mkc prm.Field) { prm.Mkc.BsfEn.At(mkc).Set(in, 0) }},
		{"bsf_octword_size 2", func(in []byte, mkc prm.Field) { prm.Mkc.BsfOctwordSize.At(mkc).Set(in, 2) }},
		{"no AES-XTS engine", func([]byte, prm.Field) {
			r.setCap(prm.CmdHcaCap.AesXtsSingleBlockLeTweak, 0)
			r.setCap(prm.CmdHcaCap.AesXtsMultiBlockBeTweak, 0)
		}}, // last: it stays
	} {
		if err := create(r, c.f); err == nil {
			t.Errorf("%s: created", c.name)
		}
	}
}

// setCap sets a cmd_hca_cap field on the rig's copy of its profile
// (enableCrypto made one).
func (r *rig) setCap(f prm.Field, v uint64) {
	r.d.h.mu.Lock()
	defer r.d.h.mu.Unlock()
	f.Set(r.d.h.prof.pages[prm.MLX5_CAP_GENERAL], v)
}

// TestCryptoSigErr checks a signature check behind crypto: memory holds
// enc(data+T10-DIF) (row H), one ciphertext byte of block 2 is flipped,
// and the gather decrypts before it checks, so the guard of the
// decrypted block fails: a SIG_ERR CQE on the requester's send CQ with
// the error sig's engine finds in the decrypted bytes, then the RDMA
// WRITE completes.
func TestCryptoSigErr(t *testing.T) {
	t10 := t10dif(sig.BlockSize512, 0)
	r := newRig(t, "cx7")
	r.enableCrypto(true)
	a, _ := pair(t, r, qpOpts{})
	dekID, x := r.tdek(r.pdn, 16, nil)
	var tw [16]byte
	data := make([]byte, 4*512)
	pattern(data, 8)
	enc := xtsStream(t, x, protect(t, t10, data), 520, tw, false)
	enc[2*520+100] ^= 1
	mem, km := r.mr(len(enc), cryptoAll)
	copy(mem, enc)
	mk := r.cryptoMkey(r.pdn, true)
	bsfs := [][]byte{sigBSF(t10, nil, mk.memPSV, mk.wirePSV, true), cryptoBSF(tcrypto{order: orderEncryptedMemSig, sel: 2, dek: dekID}, true, true)}
	if op, _ := cqeStatus(a.umr(mk, klm{uint32(len(mem)), km.LKey, addr(mem)}, uint64(len(mem)), bsfs...)); op != 0 {
		t.Fatal("UMR failed")
	}
	eng, err := sig.NewEngine(&sig.BlockAttr{Mem: t10, CheckMask: 0xff})
	if err != nil {
		t.Fatal(err)
	}
	want, err := eng.Transfer(sig.TX, make([]byte, len(data)), xtsStream(t, x, enc, 520, tw, true))
	if err != nil || want.OK() || want.Offset != 2*520 {
		t.Fatalf("the engine finds %v, %v in the decrypted bytes", want, err)
	}
	dst, kdst := r.mr(len(data), cryptoAll)
	idx := a.post(twqe{opcode: tOpRDMAWrite, fm: tSignaled, hasRaddr: true, raddr: addr(dst), rkey: kdst.RKey, sges: []tsge{{uint32(len(data)), mk.key, 0}}})
	checkSigErr(t, a.scq.next(), mk.key, a.qpn, want, t10, 0)
	checkCQE(t, "RDMA WRITE after the signature error", a.scq.next(), a.wantReq(tOpRDMAWrite, idx, 0, 0))
	if !bytes.Equal(dst[:512], data[:512]) {
		t.Error("block 0 did not arrive decrypted and stripped")
	}
}

// FuzzCryptoBSF feeds BSF octwords to the UMR's BSF parser on a crypto
// mkey with a signature, then runs a transfer's crypto on what it
// accepts: nothing panics, and an accepted crypto configuration has an
// order, a data unit and a DEK id a crypto BSF can name.
func FuzzCryptoBSF(f *testing.F) {
	t10 := t10dif(sig.BlockSize512, 1)
	c := tcrypto{order: orderEncryptedWireSig, sel: 1, dek: 0x900}
	f.Add(cryptoBSF(c, true, false), uint32(0), uint32(512))
	f.Add(append(sigBSF(t10, nil, 0, 0, true), cryptoBSF(c, true, true)...), uint32(520), uint32(1040))
	f.Add(append(sigBSF(nil, nil, 0, 0, true), cryptoBSF(c, false, true)...), uint32(16), uint32(100))
	f.Fuzz(func(t *testing.T, b []byte, off, n uint32) {
		if len(b) != bsfSize && len(b) != 2*bsfSize {
			return
		}
		h := newHCA(profiles["cx7"])
		p := *h.prof
		p.pages = maps.Clone(p.pages)
		g := append([]byte(nil), p.pages[prm.MLX5_CAP_GENERAL]...)
		prm.CmdHcaCap.AesXtsSingleBlockLeTweak.Set(g, 1)
		prm.CmdHcaCap.AesXtsMultiBlockBeTweak.Set(g, uint64(n&1))
		p.pages[prm.MLX5_CAP_GENERAL] = g
		h.prof = &p
		key := make([]byte, 64)
		h.deks[0x900] = &dekObj{pdn: 1, keyBits: 256, key1: key[:32], key2: key[32:]}
		mkc := prm.Mkc.Layout().New()
		prm.Mkc.CryptoEn.Set(mkc, 1)
		prm.Mkc.BsfEn.Set(mkc, 1)
		prm.Mkc.Len.Set(mkc, 1<<20)
		mk := &mkeyObj{pdn: 1, mkc: mkc}
		sc, cc, fail := h.parseBSFs(mk, b)
		if fail != nil {
			return
		}
		if cc == nil {
			t.Fatal("a crypto mkey's BSFs parsed with no crypto and no refusal")
		}
		if cc.order > orderRawMem || cc.dek > 0xffffff || (cc.unit != 512 && cc.unit != 520 && cc.unit != 4048 && cc.unit != 4096 && cc.unit != 4160) {
			t.Fatalf("accepted %+v", *cc)
		}
		mk.sig, mk.crypto = sc, cc
		var sx *sigXfer
		if mk.sigOn() {
			x, e := mk.sigPlan(1, uint64(off), uint64(n%8192))
			if e != nil {
				return
			}
			sx = &x
		}
		j, e := h.cryptoPlan(mk, 1, uint64(off), uint64(n%8192), sx)
		if e != nil {
			return
		}
		for _, dir := range []sig.Direction{sig.TX, sig.RX} {
			if out := j.run(dir, make([]byte, j.n)); uint64(len(out)) != j.n {
				t.Fatalf("%d bytes in, %d out", j.n, len(out))
			}
		}
	})
}
