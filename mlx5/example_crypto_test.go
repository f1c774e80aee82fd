package mlx5_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
	"github.com/mlx5go/mlx5go/sig"
)

// The write path of an NVMe-oF target that keeps its blocks encrypted at
// rest, each with a T10-DIF tuple (docs/CRYPTO.md): the host RDMA-WRITEs
// plain data, 4 blocks of 512 bytes, into the target's crypto and
// signature mkey. As the data arrives the device computes each block's
// T10-DIF on the plaintext, appends it, and encrypts data and tuple
// together with AES-XTS, one 520-byte data unit a block, the tweak the
// block's LBA. This is row H of mlx5dv_wr_set_mkey_crypto(3)'s table:
// memory enc(data+DIF), wire data; EncryptOnTx false (memory holds
// ciphertext: the device encrypts what it receives), the signature after
// crypto on TX (so before it on RX), a memory domain of T10-DIF and no
// wire domain. The guard protects the plaintext, which is what the host
// sent and what an end-to-end check can recompute.
//
// To show what memory holds, the host then RDMA-READs it through a second
// mkey of the target with the same DEK and tweak but no signature (row F:
// decrypt on TX): the plaintext blocks come back with their tuples, the
// tuples sig's engine computes from the plaintext.
func Example_nvmeofEncryptedWrite() {
	c, err := mlx5test.Open("cx7")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	caps, err := c.CryptoCaps()
	if err != nil || caps.Flags&mlx5.CryptoFlagCrypto == 0 {
		log.Fatalf("no crypto: %+v %v", caps, err)
	}
	pd, _ := c.AllocPD()
	buf, _ := mlx5.AllocBuffer(1 << 16)
	defer buf.Close()
	mr, err := pd.RegMR(buf.Bytes(), mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite|mlx5.AccessRemoteRead)
	if err != nil {
		log.Fatal(err)
	}
	cq, _ := c.CreateCQ(mlx5.CQOptions{Entries: 64})
	opt := mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 8, MaxSendSGE: 1, MkeyConfigure: true, MaxMkeyEntries: 1}
	host, _ := c.CreateQP(opt)
	target, _ := c.CreateQP(opt)
	path, _ := c.LoopbackPath(1)
	if err := host.Connect(target.QPN(), path); err != nil {
		log.Fatal(err)
	}
	if err := target.Connect(host.QPN(), path); err != nil {
		log.Fatal(err)
	}
	wait := func(wrID uint64) {
		var wc [1]mlx5.Completion
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			if n, err := cq.Poll(wc[:]); err != nil || (n == 1 && (wc[0].WrID != wrID || wc[0].Status != mlx5.WCSuccess)) {
				log.Fatalf("%+v %v", wc[0], err)
			} else if n == 1 {
				return
			}
		}
		log.Fatal("no completion")
	}

	// The namespace's key: two 256-bit AES keys, imported in plaintext
	// (the model's default import mode; a device in wrapped mode takes
	// them wrapped by its import KEK, through a crypto login).
	key := make([]byte, 64)
	for i := range key {
		key[i] = byte(i*37 + 1)
	}
	dek, err := pd.CreateDEK(mlx5.DEKOptions{KeyBits: 256, Key: key, Plaintext: true, Opaque: [8]byte{'n', 's', '1'}})
	clear(key) // the device has it; the driver zeroed its own copies
	if err != nil {
		log.Fatal(err)
	}
	defer dek.Close()

	// The target's mkey over 4 stored blocks of 520 bytes, for a write at
	// LBA 5000.
	const lba, blocks, stored, target0 = 5000, 4, 4 * 520, 32768
	var tweak [16]byte
	binary.LittleEndian.PutUint64(tweak[:], lba)
	dif := &sig.BlockAttr{Mem: &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512,
		T10DIF: &sig.T10DIF{Guard: sig.T10DIFGuardCRC, Seed: 0xffff, AppTag: 0x0001, RefTag: lba, Flags: sig.T10DIFRefRemap}},
		CheckMask: sig.MaskT10DIFGuard | sig.MaskT10DIFRefTag}
	encryptAtRest := &mlx5.CryptoAttr{EncryptOnTx: false, Order: mlx5.SigAfterCryptoOnTx, DataUnitSize: sig.BlockSize520,
		InitialTweak: tweak, DEK: dek}
	mk, err := pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true, Crypto: true})
	if err != nil {
		log.Fatal(err)
	}
	defer mk.Close()
	layout := []mlx5.KLM{{Addr: mr.Addr() + target0, ByteCount: stored, Mkey: mr.LKey()}}
	if err := target.PostMkeyConfigure(&mlx5.MkeyConfigureWR{WrID: 1, Mkey: mk, Flags: mlx5.SendSignaled,
		SetAccess: true, Access: mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite,
		List: layout, Sig: dif, Crypto: encryptAtRest}); err != nil {
		log.Fatal(err)
	}
	wait(1)

	// The host's write: plain data, no protection information on the wire.
	mem := buf.Bytes()
	plain := mem[:blocks*512]
	for i := range plain {
		plain[i] = byte(i*3 + i/512)
	}
	if err := host.PostSend(&mlx5.SendWR{WrID: 2, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled,
		RemoteAddr: 0, RKey: mk.RKey(), SGL: []mlx5.SGE{{Addr: mr.Addr(), Length: blocks * 512, LKey: mr.LKey()}}}); err != nil {
		log.Fatal(err)
	}
	wait(2)
	if me, err := mk.Check(); err != nil || !me.OK() {
		log.Fatal(me, err)
	}
	atRest := mem[target0 : target0+stored]
	leaked := false
	for i := 0; i < len(plain); i += 16 {
		leaked = leaked || bytes.Contains(atRest, plain[i:i+16])
	}
	fmt.Printf("stored %d bytes; any 16 bytes of plaintext in them: %v\n", len(atRest), leaked)

	// What memory holds, decrypted by a second mkey (no signature).
	view, err := pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, Crypto: true})
	if err != nil {
		log.Fatal(err)
	}
	defer view.Close()
	if err := target.PostMkeyConfigure(&mlx5.MkeyConfigureWR{WrID: 3, Mkey: view, Flags: mlx5.SendSignaled,
		SetAccess: true, Access: mlx5.AccessLocalWrite | mlx5.AccessRemoteRead, List: layout,
		Crypto: &mlx5.CryptoAttr{DataUnitSize: sig.BlockSize520, InitialTweak: tweak, DEK: dek}}); err != nil {
		log.Fatal(err)
	}
	wait(3)
	back := mem[8192 : 8192+stored]
	if err := host.PostSend(&mlx5.SendWR{WrID: 4, Opcode: mlx5.OpRDMARead, Flags: mlx5.SendSignaled,
		RemoteAddr: 0, RKey: view.RKey(), SGL: []mlx5.SGE{{Addr: mr.Addr() + 8192, Length: stored, LKey: mr.LKey()}}}); err != nil {
		log.Fatal(err)
	}
	wait(4)
	eng, err := sig.NewEngine(dif)
	if err != nil {
		log.Fatal(err)
	}
	for b := range blocks {
		blk := back[b*520 : (b+1)*520]
		tuple := binary.BigEndian.Uint64(blk[512:])
		want, _ := eng.Signature(sig.DomainMemory, plain[b*512:(b+1)*512], uint64(b))
		fmt.Printf("block %d: data intact %v, guard %#04x, app tag %#04x, ref tag %d, the plaintext's tuple %v\n", b,
			bytes.Equal(blk[:512], plain[b*512:(b+1)*512]), tuple>>48, tuple>>32&0xffff, uint32(tuple), tuple == want)
	}
	// Output:
	// stored 2080 bytes; any 16 bytes of plaintext in them: false
	// block 0: data intact true, guard 0x66bb, app tag 0x0001, ref tag 5000, the plaintext's tuple true
	// block 1: data intact true, guard 0x5c54, app tag 0x0001, ref tag 5001, the plaintext's tuple true
	// block 2: data intact true, guard 0x5936, app tag 0x0001, ref tag 5002, the plaintext's tuple true
	// block 3: data intact true, guard 0x9473, app tag 0x0001, ref tag 5003, the plaintext's tuple true
}
