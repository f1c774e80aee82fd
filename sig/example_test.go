package sig_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/sig/crc"
)

// A block store keeps 512-byte sectors in memory with their T10-DIF tuple
// after each one (520 bytes per sector), and sends plain data on the wire.
func Example() {
	attr := &sig.BlockAttr{
		Mem: &sig.Domain{
			Type:      sig.SigTypeT10DIF,
			BlockSize: sig.BlockSize512,
			T10DIF: &sig.T10DIF{
				Guard:  sig.T10DIFGuardCRC,
				Seed:   0xffff,
				AppTag: 0x0001,
				RefTag: 1000, // the LBA of the first sector
				Flags:  sig.T10DIFRefRemap,
			},
		},
		CheckMask: sig.MaskT10DIFGuard | sig.MaskT10DIFAppTag | sig.MaskT10DIFRefTag,
	}
	e, err := sig.NewEngine(attr)
	if err != nil {
		fmt.Println(err)
		return
	}

	// RX: 4 sectors arrive as plain data and are stored with their tuples.
	wire := bytes.Repeat([]byte("mlx5go!!"), 4*512/8)
	n, _ := e.OutputLen(sig.RX, len(wire))
	mem := make([]byte, n)
	if _, err := e.Transfer(sig.RX, mem, wire); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("stored %d bytes; sector 2's tuple: % x\n", len(mem), mem[2*520+512:3*520])

	// Later one stored byte rots; TX checks and strips the tuples.
	mem[3*520+100] ^= 0x04
	out := make([]byte, len(wire))
	me, err := e.Transfer(sig.TX, out, mem)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(me)
	fmt.Println("bad LBA:", 1000+me.Offset/520)
	// Output:
	// stored 2080 bytes; sector 2's tuple: 1c de 00 01 00 00 03 ea
	// bad guard in memory domain at offset 0x618: actual 0x1cde, expected 0xe9e2
	// bad LBA: 1003
}

// Validation says which rule a configuration breaks, before anything
// reaches a device.
func ExampleBlockAttr_Validate() {
	attr := &sig.BlockAttr{
		Wire: &sig.Domain{Type: sig.SigTypeCRC, BlockSize: sig.BlockSize4096,
			CRC: &sig.CRC{Type: sig.CRCTypeCRC32C, Seed: 0x1234}},
	}
	err := attr.Validate()
	fmt.Println(err)
	fmt.Println(errors.Is(err, sig.ErrCRCSeed), errors.Is(err, sig.ErrInvalidAttr))
	// Output:
	// sig: wire.crc.seed = 0x1234: CRC seed is neither 0 nor all ones
	// true true
}

// Generate fills in the signatures of a buffer in place; Check validates
// them.
func ExampleEngine_Generate() {
	e, err := sig.NewEngine(&sig.BlockAttr{
		Mem:       &sig.Domain{Type: sig.SigTypeCRC, BlockSize: sig.BlockSize4096, CRC: &sig.CRC{Type: sig.CRCTypeCRC32C, Seed: 0xffffffff}},
		CheckMask: sig.MaskCRC32C,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	bs, pi := e.Layout(sig.DomainMemory)
	buf := make([]byte, 2*(bs+pi)) // two zero blocks, each followed by its CRC32C
	if err := e.Generate(sig.DomainMemory, buf); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("CRC32C of block 0: %#08x\n", binary.BigEndian.Uint32(buf[bs:]))
	me, _ := e.Check(sig.DomainMemory, buf)
	fmt.Println(me)
	// Output:
	// CRC32C of block 0: 0x98f94189
	// no error
}

// MatchCRC64 is what the CRC64_XP10 hardware test will use: it names the
// candidate parameters that reproduce a signature the device generated.
// Here the "device" is played by CRC-64/XZ.
func ExampleMatchCRC64() {
	data := []byte("123456789")
	var fromDevice [8]byte
	binary.BigEndian.PutUint64(fromDevice[:], crc.NewCRC64(crc.CRC64XZ).Checksum(data))
	for _, m := range sig.MatchCRC64(data, fromDevice) {
		fmt.Println(m.Candidate.Name, m.Order, "guess:", m.Candidate.Guess)
	}
	// Output:
	// CRC-64/XZ big-endian guess: false
}

// A device reports a signature error in a SIG_ERR CQE; DecodeSigErrCQE
// turns its fields into what mlx5dv_mkey_check returns. The fields are
// those of the oracle's case check/t10dif_wire_apptag.
func ExampleDecodeSigErrCQE() {
	mem := &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512,
		T10DIF: &sig.T10DIF{Seed: 0xffff, AppTag: 0x1234, RefTag: 0x5678}}
	wire := &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize520,
		T10DIF: &sig.T10DIF{Guard: sig.T10DIFGuardCsum}}
	me, err := sig.DecodeSigErrCQE(sig.SigErrCQE{
		ExpectedTransSig: 0x11112222, ActualTransSig: 0x33334444,
		ExpectedRefTag: 0xdeadbeef, ActualRefTag: 0xfeedface,
		Syndrome: sig.SyndromeAppTag, Domain: uint8(sig.DomainWire), Offset: 0x1208,
	}, &sig.BlockAttr{Mem: mem, Wire: wire, CheckMask: 0xff})
	fmt.Println(me, err)
	// Output:
	// bad application tag in wire domain at offset 0x1208: actual 0x4444, expected 0x2222 <nil>
}
