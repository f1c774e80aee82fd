package mlx5

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/wqe"
)

// tmplPair is fastPair for mkey configures: two QPs alike in memory, each
// with its own mkeys alike; tmpl posts with the mkeys' WQE templates
// (mkeyTmpl), general with them forgotten before every work request, so
// that it builds every configure.
type tmplPair struct {
	tmpl, general *QP
	mkeys         [2][4]*Mkey // [tmpl, general][mkey]
	// deks are the DEKs the crypto mkey's configures name: without a
	// keytag, with one.
	deks [2]*DEK
	// hits and changes count the work requests that found their mkey's
	// template with their key (so could copy it), and those that found a
	// template of another key or signature block.
	hits, changes int
}

func newTmplPair(tb testing.TB) *tmplPair {
	tb.Helper()
	c := sbsContext()
	p := &tmplPair{}
	for i, q := range []**QP{&p.tmpl, &p.general} {
		cq := benchCQ(tb, c, 255, 0x411+uint32(i))
		// 64 WQEBBs: configures cross the ring's end and run out of room;
		// 128 bytes of inline data: lists of more than 4 entries with a
		// signature block do not fit.
		o := QPOptions{PD: &PD{}, SendCQ: cq, RecvCQ: cq, MaxSendWR: 16, MaxSendSGE: 1, MaxRecvWR: 1, MaxRecvSGE: 1,
			MaxInlineData: 128, SendOps: Opcodes(OpRDMAWrite), MkeyConfigure: true}
		*q = benchQP(tb, c, o, 0x1b2)
		// A signature mkey checking every cap, one with narrower caps,
		// one without signature support, a signature and crypto mkey
		// (multi-block engine).
		p.mkeys[i] = [4]*Mkey{
			{c: c, lkey: 0x300300, rkey: 0x300300, maxEntries: 4, sigMkey: true, psvIndex: [2]uint32{0x501, 0x502}, sentErrs: ^uint32(0),
				name: mkeyName(0x300300), sigCaps: sig.Caps{BlockSize: 0x1f, BlockProt: 3, T10DIFBG: 3, CRCType: 7}, checkCaps: true},
			{c: c, lkey: 0x300401, rkey: 0x300401, maxEntries: 8, sigMkey: true, psvIndex: [2]uint32{0x601, 0x602}, sentErrs: ^uint32(0),
				name: mkeyName(0x300401), sigCaps: sig.Caps{BlockSize: 0x3, BlockProt: 1, T10DIFBG: 1, CRCType: 1}, checkCaps: true},
			{c: c, lkey: 0x300502, rkey: 0x300502, maxEntries: 2, sentErrs: ^uint32(0), name: mkeyName(0x300502)},
			{c: c, lkey: 0x300603, rkey: 0x300603, maxEntries: 4, sigMkey: true, psvIndex: [2]uint32{0x701, 0x702}, sentErrs: ^uint32(0),
				name: mkeyName(0x300603), crypto: &mkeyCrypto{singleBlock: true, multiBlock: true}},
		}
	}
	p.deks = [2]*DEK{{c: c, id: 0x901}, {c: c, id: 0x902, keytag: true}}
	return p
}

// randomCrypto is a crypto attribute of random fields, mostly a few
// storage values, now and then one the driver refuses.
func randomCrypto(r *rand.Rand, deks *[2]*DEK) *CryptoAttr {
	d := deks[r.IntN(2)]
	a := &CryptoAttr{EncryptOnTx: r.IntN(2) == 0, DataUnitSize: sig.BlockSize512, InitialTweak: [16]byte{byte(r.IntN(3))}, DEK: d}
	if r.IntN(4) == 0 {
		a.Order = SigBeforeCryptoOnTx
	}
	if r.IntN(6) == 0 {
		a.DataUnitSize = sig.BlockSize(r.IntN(6))
	}
	if d.keytag != (r.IntN(12) == 0) {
		a.Keytag = []byte{1, 2, 3, 4, 5, 6, 7, byte(r.IntN(2))}
	}
	return a
}

// tmplSigs are the signature blocks of the random configures: valid ones
// of both domains or one, CRC and T10-DIF, one the narrower caps refuse,
// one invalid. The test changes their values in place between batches.
func tmplSigs() []*sig.BlockAttr {
	return []*sig.BlockAttr{
		{Mem: &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512, T10DIF: &sig.T10DIF{AppTag: 0x1234, RefTag: 0x5678}},
			Wire:      &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize520, T10DIF: &sig.T10DIF{Seed: 0xffff, AppTag: 0xabcd, RefTag: 0x11223344, Flags: sig.T10DIFAppEscape}},
			CheckMask: 0xff},
		{Wire: &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512, T10DIF: &sig.T10DIF{AppTag: 1, RefTag: 2}}, CheckMask: 0xc0},
		{Mem: &sig.Domain{Type: sig.SigTypeCRC, BlockSize: sig.BlockSize4096, CRC: &sig.CRC{Type: sig.CRCTypeCRC32C, Seed: 0xffffffff}}},
		{Mem: &sig.Domain{Type: sig.SigTypeCRC, BlockSize: sig.BlockSize4096, CRC: &sig.CRC{Type: sig.CRCTypeCRC64XP10, Seed: ^uint64(0)}},
			Wire: &sig.Domain{Type: sig.SigTypeCRC, BlockSize: sig.BlockSize4096, CRC: &sig.CRC{Type: sig.CRCTypeCRC64XP10, Seed: ^uint64(0)}}},
		{Mem: &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: 99, T10DIF: &sig.T10DIF{}}},
	}
}

// randomConfigureWR is a configure of every shape AddMkeyConfigure meets,
// mostly the few a storage target repeats (so that templates are found),
// now and then anything: flags, access rights valid or not, list layouts
// of 0 to 5 entries (or none) with lengths around the KLM limit,
// interleaved layouts, the signature blocks of sigs, RESET_SIG_ATTR.
func randomConfigureWR(r *rand.Rand, wrID uint64, sigs []*sig.BlockAttr, mk int, mkeys *[4]*Mkey, deks *[2]*DEK) MkeyConfigureWR {
	wr := MkeyConfigureWR{WrID: wrID, Mkey: mkeys[mk], Flags: SendSignaled, SetAccess: true, Access: AccessLocalWrite | AccessRemoteRead,
		List: []KLM{{Addr: r.Uint64(), ByteCount: uint32(r.IntN(1 << 16)), Mkey: r.Uint32()}}, Sig: sigs[0]}
	if mk == 2 {
		wr.Sig = nil
	}
	if r.IntN(8) == 0 {
		wr.Flags = SendFlags(r.IntN(16))
	}
	if r.IntN(8) == 0 {
		wr.SetAccess = r.IntN(2) == 0
		wr.Access = AccessFlags(r.IntN(16))
	}
	if r.IntN(6) == 0 {
		lengths := []uint32{0, 4096, 1<<31 - 1, 1 << 31, 1<<31 + 1, 1<<32 - 1}
		n := r.IntN(6)
		wr.List = nil
		if r.IntN(6) > 0 {
			wr.List = []KLM{}
		}
		for range n {
			l := uint32(r.IntN(1 << 20))
			if r.IntN(4) == 0 {
				l = lengths[r.IntN(len(lengths))]
			}
			wr.List = append(wr.List, KLM{Addr: r.Uint64(), ByteCount: l, Mkey: r.Uint32()})
		}
	}
	if r.IntN(12) == 0 {
		if r.IntN(3) > 0 {
			wr.List = nil
		}
		for range r.IntN(3) {
			wr.Interleaved = append(wr.Interleaved, RepeatEntry{Addr: r.Uint64(), ByteCount: uint32(r.IntN(512)), Skip: uint32(r.IntN(64)), Mkey: r.Uint32()})
		}
		wr.RepeatCount = uint32(r.IntN(4))
	}
	if r.IntN(6) == 0 {
		wr.Sig = sigs[r.IntN(len(sigs))]
		if r.IntN(4) == 0 {
			wr.Sig = nil
		}
	}
	if r.IntN(20) == 0 {
		wr.ResetSig = true
		if r.IntN(3) > 0 {
			wr.Sig = nil
		}
	}
	if mk == 3 && r.IntN(3) == 0 || r.IntN(60) == 0 {
		wr.Crypto = randomCrypto(r, deks)
	}
	return wr
}

// TestMkeyTemplateSameWQEs posts the same random batches of mkey
// configures on two QPs, one whose mkeys copy their template when a
// configure has its inputs, one whose mkeys never do (the general
// builder), and requires the same outcome: the same errors, the same
// ring, bookkeeping, producer counter, small fence and doorbells, the
// same mkey state (BSF, signature error counter, PSVs, shape); the
// comparison is fastPair's, whose "fast lane" is the QP with templates. Between
// batches the signature blocks change in place, signature errors arrive
// and batches roll back, so that templates go stale; the test counts the
// work requests that found a template of their inputs and those that
// found one of others, and requires many of both.
func TestMkeyTemplateSameWQEs(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := newTmplPair(t)
			p.run(t, rand.New(rand.NewPCG(seed, 17)), 6000)
			t.Logf("%d work requests found their template, %d another", p.hits, p.changes)
			if p.hits < 800 || p.changes < 800 {
				t.Fatalf("%d work requests found their template, %d another: the comparison means little", p.hits, p.changes)
			}
		})
	}
}

// FuzzMkeyTemplate is TestMkeyTemplateSameWQEs's comparison for batches
// drawn from the fuzzer's seeds.
func FuzzMkeyTemplate(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(17), uint64(4))
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		newTmplPair(t).run(t, rand.New(rand.NewPCG(s1, s2)), 200)
	})
}

// run posts batches of random configures on both QPs and compares them
// after each.
func (p *tmplPair) run(t *testing.T, r *rand.Rand, batches int) {
	t.Helper()
	sigs := [2][]*sig.BlockAttr{tmplSigs(), tmplSigs()}
	var wrID uint64
	for batch := range batches {
		// Change a block in place, in both copies alike.
		if r.IntN(10) == 0 {
			k, tag := r.IntN(2), uint16(r.IntN(3))
			for i := range sigs {
				if d := sigs[i][k].Wire; d != nil && d.T10DIF != nil {
					d.T10DIF.AppTag = tag
				}
			}
		}
		// A signature error on an mkey: its next configure updates the
		// counter and sets the PSVs again.
		if r.IntN(15) == 0 {
			k := r.IntN(4)
			for i := range p.mkeys {
				p.mkeys[i][k].sigErrs.Add(1)
			}
		}
		n := 1 + r.IntN(3)
		wrs := make([][2]MkeyConfigureWR, n)
		for k := range wrs {
			wrID++
			mk := r.IntN(4)
			if r.IntN(4) > 0 {
				mk = 0
			}
			s := r.Uint64()
			for i := range wrs[k] {
				wrs[k][i] = randomConfigureWR(rand.New(rand.NewPCG(s, 0)), wrID, sigs[i], mk, &p.mkeys[i], &p.deks)
			}
			if r.IntN(40) == 0 { // a bad work request: the batch rolls back
				wrs[k][0].Mkey, wrs[k][1].Mkey = nil, nil
			}
		}
		commit := r.IntN(8) > 0
		var errs [2]string
		for i, qp := range []*QP{p.tmpl, p.general} {
			b := qp.Begin()
			for k := range wrs {
				wr := &wrs[k][i]
				m := wr.Mkey
				held := m != nil && m.tmpl.ok
				if m != nil && i == 1 {
					m.tmpl.ok = false
				}
				b.AddMkeyConfigure(wr)
				// A template that was held and is held still was of the
				// work request's inputs (it copied, or found no room);
				// one that is gone was of others.
				if i == 0 && held && b.err == nil {
					if m.tmpl.ok {
						p.hits++
					} else {
						p.changes++
					}
				}
			}
			if commit {
				errs[i] = errText(b.Commit())
			} else {
				b.Abort()
			}
		}
		if errs[0] != errs[1] {
			t.Fatalf("batch %d: with templates Commit says %s, without %s", batch, errs[0], errs[1])
		}
		fastPair{p.tmpl, p.general}.compare(t, batch)
		for k := range p.mkeys[0] {
			a, b := p.mkeys[0][k], p.mkeys[1][k]
			if a.bsf != b.bsf || a.sentErrs != b.sentErrs || a.sigPSV != b.sigPSV || a.shape.Load() != b.shape.Load() {
				t.Fatalf("batch %d: mkey %d with templates: BSF %v, errors sent %d, PSVs %+v, shape %#x; without: %v, %d, %+v, %#x",
					batch, k, a.bsf, a.sentErrs, a.sigPSV, a.shape.Load(), b.bsf, b.sentErrs, b.sigPSV, b.shape.Load())
			}
			if !sameCrypto(a, b) {
				t.Fatalf("batch %d: mkey %d: crypto state with templates %+v, without %+v", batch, k, a.crypto, b.crypto)
			}
		}
		// Complete everything now and then, so that the room changes.
		if r.IntN(3) == 0 {
			for _, qp := range []*QP{p.tmpl, p.general} {
				qp.sq.tail.Store(uint32(qp.sq.pi))
			}
		}
	}
}

// TestMkeyTemplateFollowsChanges posts a storage target's configure until
// its mkey copies its template, then changes one input at a time (the
// block's reference tag in place, the flags, the access rights, the
// list's length, no block, RESET_SIG_ATTR, a signature error) and
// requires the WQEs, bookkeeping and mkey state of the general builder
// after each change and after it repeats.
func TestMkeyTemplateFollowsChanges(t *testing.T) {
	p := newTmplPair(t)
	sigs := [2][]*sig.BlockAttr{tmplSigs(), tmplSigs()}
	wrs := [2]MkeyConfigureWR{}
	for i := range wrs {
		wrs[i] = MkeyConfigureWR{Mkey: p.mkeys[i][0], Flags: SendSignaled, SetAccess: true, Access: AccessLocalWrite | AccessRemoteRead,
			List: []KLM{{Addr: 0x1000, ByteCount: 4096, Mkey: 0x77}}, Sig: sigs[i][0]}
	}
	step := 0
	post := func(what string, change func(wr *MkeyConfigureWR, i int)) {
		t.Helper()
		for i := range wrs {
			change(&wrs[i], i)
		}
		for range 3 {
			step++
			var errs [2]string
			for i, qp := range []*QP{p.tmpl, p.general} {
				wr := &wrs[i]
				wr.WrID = uint64(step)
				wr.List[0].Addr += 512 // the per-I/O buffer
				if i == 1 {
					wr.Mkey.tmpl.ok = false
				}
				errs[i] = errText(qp.PostMkeyConfigure(wr))
				qp.sq.tail.Store(uint32(qp.sq.pi))
			}
			if errs[0] != errs[1] || errs[0] != "<nil>" {
				t.Fatalf("%s: with templates %s, without %s", what, errs[0], errs[1])
			}
			fastPair{p.tmpl, p.general}.compare(t, step)
			a, b := p.mkeys[0][0], p.mkeys[1][0]
			if a.bsf != b.bsf || a.sentErrs != b.sentErrs || a.sigPSV != b.sigPSV || a.shape.Load() != b.shape.Load() {
				t.Fatalf("%s: mkey state with templates %v %d %+v %#x, without %v %d %+v %#x", what,
					a.bsf, a.sentErrs, a.sigPSV, a.shape.Load(), b.bsf, b.sentErrs, b.sigPSV, b.shape.Load())
			}
		}
		if !p.mkeys[0][0].tmpl.ok {
			t.Fatalf("%s: after three configures alike the mkey has no template of them", what)
		}
	}
	post("the first configures", func(*MkeyConfigureWR, int) {})
	post("a reference tag changed in place", func(wr *MkeyConfigureWR, _ int) { wr.Sig.Wire.T10DIF.RefTag++ })
	post("another block", func(wr *MkeyConfigureWR, i int) { wr.Sig = sigs[i][3] })
	post("other flags", func(wr *MkeyConfigureWR, _ int) { wr.Flags = SendSolicited | SendFence })
	post("other access", func(wr *MkeyConfigureWR, _ int) { wr.Access = AccessLocalWrite | AccessRemoteWrite })
	post("a longer list", func(wr *MkeyConfigureWR, _ int) {
		wr.List = append(wr.List, KLM{Addr: 0x9000, ByteCount: 8, Mkey: 0x78})
	})
	post("no block", func(wr *MkeyConfigureWR, _ int) { wr.Sig = nil })
	post("RESET_SIG_ATTR", func(wr *MkeyConfigureWR, _ int) { wr.ResetSig = true })
	post("a block again", func(wr *MkeyConfigureWR, i int) { wr.ResetSig, wr.Sig = false, sigs[i][0] })
	post("a signature error", func(wr *MkeyConfigureWR, i int) { p.mkeys[i][0].sigErrs.Add(1) })

	// A block that changes every time (a reference tag per I/O) is built
	// every time, and not copied into a template it would not use.
	m := p.mkeys[0][0]
	for range 3 {
		wrs[0].Sig.Wire.T10DIF.RefTag++
		if err := p.tmpl.PostMkeyConfigure(&wrs[0]); err != nil {
			t.Fatal(err)
		}
		p.tmpl.sq.tail.Store(uint32(p.tmpl.sq.pi))
	}
	if m.tmpl.ok {
		t.Fatal("configures of a new reference tag each left a template")
	}
}

// wrMutation is one change of one input of a configure: the input's path
// and a function that makes the change in a deep copy.
type wrMutation struct {
	path string
	do   func(*MkeyConfigureWR)
}

// wrMutations walks every field of MkeyConfigureWR and what it points to
// in wr (not into the mkey), and returns for each integer its lowest bit
// and its highest bit flipped, for each bool its negation, for each
// pointer nil or a zero value in its place, for each slice nil or not and
// one entry longer; the entries of a list are walked as List[]. A field
// of a kind it does not know fails the test.
func wrMutations(t *testing.T, wr *MkeyConfigureWR) []wrMutation {
	var out []wrMutation
	// A path is steps from the work request: a field's index, -1 for a
	// slice's entry 0, -2 through a pointer.
	at := func(wr *MkeyConfigureWR, steps []int) reflect.Value {
		v := reflect.ValueOf(wr).Elem()
		for _, s := range steps {
			switch s {
			case -2:
				v = v.Elem()
			case -1:
				v = v.Index(0)
			default:
				v = v.Field(s)
			}
		}
		return v
	}
	add := func(path string, steps []int, f func(v reflect.Value)) {
		steps = append([]int{}, steps...)
		out = append(out, wrMutation{path, func(wr *MkeyConfigureWR) { f(at(wr, steps)) }})
	}
	var walk func(v reflect.Value, path string, steps []int)
	walk = func(v reflect.Value, path string, steps []int) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				name := strings.TrimPrefix(path+"."+v.Type().Field(i).Name, ".")
				if name == "Mkey" && len(steps) == 0 {
					continue // the mkey: another has its own template
				}
				walk(v.Field(i), name, append(steps[:len(steps):len(steps)], i))
			}
		case reflect.Bool:
			add(path, steps, func(v reflect.Value) { v.SetBool(!v.Bool()) })
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			bits := v.Type().Bits()
			add(path+" (bit 0)", steps, func(v reflect.Value) { v.SetInt(v.Int() ^ 1) })
			add(path+" (top bit)", steps, func(v reflect.Value) { v.SetInt(v.Int() ^ -1<<(bits-1)) })
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			bits := v.Type().Bits()
			add(path+" (bit 0)", steps, func(v reflect.Value) { v.SetUint(v.Uint() ^ 1) })
			add(path+" (top bit)", steps, func(v reflect.Value) { v.SetUint(v.Uint() ^ 1<<(bits-1)) })
		case reflect.Pointer:
			add(path+" (nil or not)", steps, func(v reflect.Value) {
				if v.IsNil() {
					v.Set(reflect.New(v.Type().Elem()))
				} else {
					v.SetZero()
				}
			})
			if !v.IsNil() && path != "Crypto.DEK" { // a DEK, as the mkey, is an object
				walk(v.Elem(), path, append(steps[:len(steps):len(steps)], -2))
			}
		case reflect.Slice:
			add(path+" (nil or not)", steps, func(v reflect.Value) {
				if v.IsNil() {
					v.Set(reflect.MakeSlice(v.Type(), 0, 0))
				} else {
					v.SetZero()
				}
			})
			add(path+" (one more entry)", steps, func(v reflect.Value) {
				v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
			})
			if v.Len() > 0 {
				walk(v.Index(0), path+"[]", append(steps[:len(steps):len(steps)], -1))
			}
		case reflect.Array:
			walk(v.Index(0), path+"[]", append(steps[:len(steps):len(steps)], -1))
		default:
			t.Fatalf("%s: a %v: teach wrMutations to change it", path, v.Kind())
		}
	}
	walk(reflect.ValueOf(wr).Elem(), "", nil)
	return out
}

// cloneWR is a deep copy of wr: its list, layout, block and domains are
// its own (the mkey is shared).
func cloneWR(wr *MkeyConfigureWR) *MkeyConfigureWR {
	n := *wr
	if wr.List != nil {
		n.List = append([]KLM{}, wr.List...)
	}
	if wr.Interleaved != nil {
		n.Interleaved = append([]RepeatEntry{}, wr.Interleaved...)
	}
	if wr.Crypto != nil {
		a := *wr.Crypto
		if a.Keytag != nil {
			a.Keytag = append([]byte{}, a.Keytag...)
		}
		n.Crypto = &a
	}
	if wr.Sig != nil {
		a := *wr.Sig
		for _, d := range []**sig.Domain{&a.Mem, &a.Wire} {
			if *d == nil {
				continue
			}
			nd := **d
			if nd.T10DIF != nil {
				t := *nd.T10DIF
				nd.T10DIF = &t
			}
			if nd.CRC != nil {
				cr := *nd.CRC
				nd.CRC = &cr
			}
			*d = &nd
		}
		n.Sig = &a
	}
	return &n
}

// tmplKeyExcluded are the inputs of a configure that do not change its
// template's key, and why. Every other input does
// (TestMkeyTmplKeyCoversInputs).
var tmplKeyExcluded = map[string]string{
	"WrID":             "the completion's: no WQE holds it",
	"List[].Addr":      "the list's entries: the template rewrites them",
	"List[].ByteCount": "the list's entries: the template rewrites them",
	"List[].Mkey":      "the list's entries: the template rewrites them",
	"RepeatCount":      "read only with an interleaved layout, which a template never holds (the key says whether there is one)",
}

// TestMkeyTmplKeyCoversInputs changes each input of configures an mkey
// keeps a template of, one at a time: each field of the work request,
// to its lowest and highest bit, through every pointer and slice, and
// the QP's and the mkey's state a configure's WQEs depend on. It
// requires that the change makes another key, unless tmplKeyExcluded
// says why it need not (and then that it does not); and, either way,
// that the configure, posted after the template was kept, writes the
// ring, the counters and the mkey's state as the general builder does,
// or fails as it does. A field added to MkeyConfigureWR or to the
// signature block's types is changed here too, so a key that leaves it
// out fails.
func TestMkeyTmplKeyCoversInputs(t *testing.T) {
	// The configures, on mkeys of newTmplPair: a block of two T10-DIF
	// domains, of two CRC64 domains, none on an mkey without signature
	// support, RESET_SIG_ATTR.
	bases := []struct {
		mk int
		wr func(sigs []*sig.BlockAttr) MkeyConfigureWR
		// setup, when not nil, is posted once first.
		setup func(sigs []*sig.BlockAttr) MkeyConfigureWR
	}{
		{0, func(sigs []*sig.BlockAttr) MkeyConfigureWR {
			return MkeyConfigureWR{Flags: SendSignaled, SetAccess: true, Access: AccessLocalWrite | AccessRemoteRead,
				List: []KLM{{Addr: 0x1000, ByteCount: 4096, Mkey: 0x77}}, Sig: sigs[0]}
		}, nil},
		{0, func(sigs []*sig.BlockAttr) MkeyConfigureWR {
			return MkeyConfigureWR{Flags: SendSignaled | SendSolicited, List: []KLM{{Addr: 0x2000, ByteCount: 512, Mkey: 0x78}}, Sig: sigs[3]}
		}, nil},
		{2, func([]*sig.BlockAttr) MkeyConfigureWR {
			return MkeyConfigureWR{Flags: SendSignaled, SetAccess: true, Access: AccessRemoteWrite,
				List: []KLM{{Addr: 1, ByteCount: 2, Mkey: 3}, {Addr: 4, ByteCount: 5, Mkey: 6}}}
		}, nil},
		{0, func([]*sig.BlockAttr) MkeyConfigureWR { return MkeyConfigureWR{Flags: SendSignaled, ResetSig: true} }, nil},
		// On the crypto mkey (its DEK set below; no list: both BSFs fill
		// the QP's inline data): crypto with a block, crypto alone (with
		// a keytag), a block alone.
		{3, func(sigs []*sig.BlockAttr) MkeyConfigureWR {
			return MkeyConfigureWR{Flags: SendSignaled, Sig: sigs[0],
				Crypto: &CryptoAttr{EncryptOnTx: true, Order: SigBeforeCryptoOnTx, DataUnitSize: sig.BlockSize520, InitialTweak: [16]byte{7, 8}}}
		}, nil},
		{3, func([]*sig.BlockAttr) MkeyConfigureWR {
			return MkeyConfigureWR{Flags: SendSignaled, SetAccess: true, Access: AccessRemoteRead,
				Crypto: &CryptoAttr{DataUnitSize: sig.BlockSize4096, InitialTweak: [16]byte{9}, Keytag: []byte{1, 2, 3, 4, 5, 6, 7, 8}}}
		}, func(sigs []*sig.BlockAttr) MkeyConfigureWR { return MkeyConfigureWR{Flags: SendSignaled, Sig: sigs[1]} }},
		{3, func(sigs []*sig.BlockAttr) MkeyConfigureWR {
			return MkeyConfigureWR{Flags: SendSignaled, Sig: sigs[2]}
		}, nil},
	}
	type change struct {
		path string
		wr   func(*MkeyConfigureWR)
		// state changes the QP's or the mkey's state instead (on both
		// sides alike).
		state func(qp *QP, m *Mkey)
		// noKey says why the configure's WQEs do not depend on the
		// state changed: the key must not change then.
		noKey string
	}
	seen := map[string]bool{}
	for bi, base := range bases {
		var changes []change
		for _, mu := range wrMutations(t, ptr(base.wr(tmplSigs()))) {
			changes = append(changes, change{path: mu.path, wr: mu.do})
		}
		changes = append(changes,
			change{path: "the QP's small fence", state: func(qp *QP, _ *Mkey) { qp.sq.fm = !qp.sq.fm }},
			change{path: "the mkey's BSF state", state: func(_ *QP, m *Mkey) { m.bsf = (m.bsf + 1) % 3 }})
		if base.mk != 2 { // a signature error on an mkey without signature support changes nothing
			changes = append(changes, change{path: "a signature error", state: func(_ *QP, m *Mkey) { m.sigErrs.Add(1) }})
		}
		if base.mk == 3 {
			w := base.wr(tmplSigs())
			newCrypto, newBlock := "", ""
			if w.Crypto != nil {
				newCrypto = "the work request sets crypto"
			}
			if w.Sig != nil {
				newBlock = "the work request sets a block"
			}
			changes = append(changes,
				change{path: "the mkey's crypto set or not", state: func(_ *QP, m *Mkey) { m.crypto.set = !m.crypto.set }, noKey: newCrypto},
				change{path: "the mkey's crypto", state: func(_ *QP, m *Mkey) { m.crypto.set = true; m.crypto.cur.InitialTweak[15]++ }, noKey: newCrypto},
				change{path: "the mkey's length", state: func(_ *QP, m *Mkey) { m.crypto.length += 9000 }},
				change{path: "the mkey's signature BSF", state: func(_ *QP, m *Mkey) { m.crypto.blockBSF[13]++ }, noKey: newBlock})
		}
		for _, ch := range changes {
			what := fmt.Sprintf("configure %d, %s", bi, ch.path)
			field := strings.Fields(ch.path)[0]
			seen[field] = true
			p := newTmplPair(t)
			sigs := [2][]*sig.BlockAttr{tmplSigs(), tmplSigs()}
			var wrs [2]*MkeyConfigureWR
			for i, qp := range []*QP{p.tmpl, p.general} {
				w := base.wr(sigs[i])
				w.Mkey = p.mkeys[i][base.mk]
				if w.Crypto != nil {
					w.Crypto.DEK = p.deks[b2i(w.Crypto.Keytag != nil)]
				}
				if base.setup != nil {
					s := base.setup(sigs[i])
					s.Mkey = w.Mkey
					if err := qp.PostMkeyConfigure(&s); err != nil {
						t.Fatalf("%s: the setup configure: %v", what, err)
					}
				}
				for range 3 {
					if err := qp.PostMkeyConfigure(&w); err != nil {
						t.Fatalf("%s: the unchanged configure: %v", what, err)
					}
					qp.sq.tail.Store(uint32(qp.sq.pi))
				}
				wrs[i] = cloneWR(&w)
			}
			m := p.mkeys[0][base.mk]
			if !m.tmpl.ok {
				t.Fatalf("%s: three configures alike left no template", what)
			}
			key := m.tmpl.key
			for i, qp := range []*QP{p.tmpl, p.general} {
				if ch.wr != nil {
					ch.wr(wrs[i])
				} else {
					ch.state(qp, p.mkeys[i][base.mk])
				}
			}
			sigErr := m.sigMkey && m.sigErrs.Load() != m.sentErrs
			changed := !key.update(p.tmpl, m, wrs[0], sigErr)
			reason, excluded := tmplKeyExcluded[field]
			if ch.noKey != "" {
				reason, excluded = ch.noKey, true
			}
			if strings.HasPrefix(field, "Crypto") && m.crypto == nil {
				reason, excluded = "crypto on an mkey without crypto is refused before the key is looked at", true
			}
			if changed == excluded {
				t.Errorf("%s: the key changes: %v (excluded: %q)", what, changed, reason)
			}
			p.mkeys[1][base.mk].tmpl.ok = false
			var errs [2]string
			for i, qp := range []*QP{p.tmpl, p.general} {
				errs[i] = errText(qp.PostMkeyConfigure(wrs[i]))
			}
			if errs[0] != errs[1] {
				t.Fatalf("%s: with the template %s, without %s", what, errs[0], errs[1])
			}
			a, b := p.tmpl, p.general
			if a.sq.pi != b.sq.pi || a.sq.fm != b.sq.fm || !bytes.Equal(a.sq.ring, b.sq.ring) {
				t.Fatalf("%s: with the template counter %d, fence %v; without %d, %v; or other bytes", what, a.sq.pi, a.sq.fm, b.sq.pi, b.sq.fm)
			}
			ma, mb := p.mkeys[0][base.mk], p.mkeys[1][base.mk]
			if ma.bsf != mb.bsf || ma.sentErrs != mb.sentErrs || ma.sigPSV != mb.sigPSV || ma.shape.Load() != mb.shape.Load() {
				t.Fatalf("%s: mkey state with the template %v %d %+v %#x, without %v %d %+v %#x", what,
					ma.bsf, ma.sentErrs, ma.sigPSV, ma.shape.Load(), mb.bsf, mb.sentErrs, mb.sigPSV, mb.shape.Load())
			}
		}
	}
	for field := range tmplKeyExcluded {
		if !seen[field] {
			t.Errorf("tmplKeyExcluded names %s, which no configure has", field)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// sameCrypto reports whether two mkeys have the same crypto state (their
// DEKs the same one).
func sameCrypto(a, b *Mkey) bool {
	if (a.crypto == nil) != (b.crypto == nil) {
		return false
	}
	if a.crypto == nil {
		return true
	}
	x, y := *a.crypto, *b.crypto
	x.wr, y.wr = wqe.Crypto{}, wqe.Crypto{} // scratch
	return x == y
}
