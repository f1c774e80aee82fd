package mlx5

import (
	"testing"

	"github.com/mlx5go/mlx5go/sig"
)

// BenchmarkPostMkeyConfigureNewTag is BenchmarkPostMkeyConfigure with the
// wire domain's reference tag changed before every configure, as a
// target that protects each I/O with its LBA does: the signature block is
// checked and encoded every time (the general builder), and the mkey
// never copies a template.
func BenchmarkPostMkeyConfigureNewTag(b *testing.B) {
	c := &Context{devx: true}
	qp, _ := testQP(b, c, 1024)
	qp.maxWQE, qp.mkeyConf, qp.sq.maxInline = 1024, true, mainQPInline
	m := &Mkey{c: c, LKey: 0x200200, RKey: 0x200200, maxEntries: 4, sigMkey: true, psvIndex: [2]uint32{0x301, 0x302}, sentErrs: ^uint32(0),
		sigCaps: sig.Caps{BlockSize: 0x1f, BlockProt: 3, T10DIFBG: 3, CRCType: 7}, checkCaps: true}
	wire := &sig.T10DIF{Seed: 0xffff, AppTag: 0xabcd, RefTag: 0x11223344, Flags: sig.T10DIFAppEscape}
	wr := MkeyConfigureWR{Mkey: m, Flags: SendSignaled | SendInline, SetAccess: true,
		Access: AccessLocalWrite | AccessRemoteRead | AccessRemoteWrite,
		List:   []KLM{{Addr: 0x7e5a00000000, ByteCount: 4096, Mkey: 0x200100}},
		Sig: &sig.BlockAttr{
			Mem:       &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512, T10DIF: &sig.T10DIF{AppTag: 0x1234, RefTag: 0x5678}},
			Wire:      &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize520, T10DIF: wire},
			CheckMask: 0xff,
		}}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if n == 1024/6 {
			b.StopTimer()
			qp.sq.tail.Store(uint32(qp.sq.pi))
			n = 0
			b.StartTimer()
		}
		wire.RefTag += 8
		if err := qp.PostMkeyConfigure(&wr); err != nil {
			b.Fatal(err)
		}
		n++
	}
}
