package wqe

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
)

// TestMkeyTemplateLenOffset: Put writes the mkey's length where PutMkc
// does.
func TestMkeyTemplateLenOffset(t *testing.T) {
	if want := prm.Mkc.Len.Off / 8; mkcLenOff != want {
		t.Fatalf("mkcLenOff is %#x, the mkey context's len is at byte %#x", mkcLenOff, want)
	}
}

// keyBases are configures a template keeps: a signature block of two
// T10-DIF domains (with caps), of two CRC domains, none, none on a
// signature mkey whose block it resets.
func keyBases() []*MkeyConfigure {
	dif := sample()
	dif.UpdateSigErr = false
	dif.Caps = &sig.Caps{BlockSize: 0x1f, BlockProt: 3, T10DIFBG: 3, CRCType: 7}
	crc := sample()
	crc.UpdateSigErr, crc.BSF, crc.SmallFence = false, BSFSet, true
	crc.Sig = &sig.BlockAttr{
		Mem:   &sig.Domain{Type: sig.SigTypeCRC, BlockSize: sig.BlockSize4096, CRC: &sig.CRC{Type: sig.CRCTypeCRC32C, Seed: 0xffffffff}},
		Wire:  &sig.Domain{Type: sig.SigTypeCRC, BlockSize: sig.BlockSize4096, CRC: &sig.CRC{Type: sig.CRCTypeCRC32C, Seed: 0xffffffff}},
		Flags: sig.BlockAttrCopyMask, CopyMask: 0xf}
	plain := sample()
	plain.Sig, plain.SigMkey, plain.UpdateSigErr, plain.List = nil, false, false, []KLM{{Addr: 1, ByteCount: 2, Mkey: 3}, {Addr: 4, ByteCount: 5, Mkey: 6}}
	reset := sample()
	reset.Sig, reset.ResetSig, reset.UpdateSigErr, reset.BSF, reset.List = nil, true, false, BSFSet, nil
	return []*MkeyConfigure{dif, crc, plain, reset}
}

// cloneConfigure is a deep copy of c: its list, block, domains and caps
// are its own.
func cloneConfigure(c *MkeyConfigure) *MkeyConfigure {
	n := *c
	if c.List != nil {
		n.List = append([]KLM{}, c.List...)
	}
	if c.Interleaved != nil {
		n.Interleaved = append([]RepeatEntry{}, c.Interleaved...)
	}
	if c.Caps != nil {
		caps := *c.Caps
		n.Caps = &caps
	}
	if c.Sig != nil {
		a := *c.Sig
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

// keyMutation is one change of one input of a configure: the input's
// path and a function that makes the change in a deep copy.
type keyMutation struct {
	path string
	do   func(*MkeyConfigure)
}

// keyMutations walks every field of MkeyConfigure and what it points to
// in c, and returns for each scalar its lowest bit and its highest bit
// flipped, for each bool its negation, for each pointer nil or a zero
// value in its place, for each slice nil, empty or one entry longer; the
// entries of a list are walked as List[].
func keyMutations(c *MkeyConfigure) []keyMutation {
	var out []keyMutation
	// A path is steps from the configure; at finds, in a copy, the
	// value at its end.
	type step struct {
		index int // field index; -1: the slice's entry 0; -2: through the pointer
	}
	var walk func(v reflect.Value, path string, steps []step)
	at := func(c *MkeyConfigure, steps []step) reflect.Value {
		v := reflect.ValueOf(c).Elem()
		for _, s := range steps {
			switch s.index {
			case -2:
				v = v.Elem()
			case -1:
				v = v.Index(0)
			default:
				v = v.Field(s.index)
			}
		}
		return v
	}
	add := func(path string, steps []step, f func(v reflect.Value)) {
		steps = append([]step{}, steps...)
		out = append(out, keyMutation{path, func(c *MkeyConfigure) { f(at(c, steps)) }})
	}
	walk = func(v reflect.Value, path string, steps []step) {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				f := v.Type().Field(i)
				walk(v.Field(i), strings.TrimPrefix(path+"."+f.Name, "."), append(steps, step{index: i}))
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
			if !v.IsNil() {
				walk(v.Elem(), path, append(steps[:len(steps):len(steps)], step{index: -2}))
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
				walk(v.Index(0), path+"[]", append(steps, step{index: -1}))
			}
		default:
			panic(fmt.Sprintf("%s: a %v: teach keyMutations to change it", path, v.Kind()))
		}
	}
	walk(reflect.ValueOf(c).Elem(), "", nil)
	return out
}

// keyExcluded are the inputs that do not change a template's key, and
// why. Every other input does (TestMkeyKeyCoversInputs).
var keyExcluded = map[string]string{
	"List[].Addr":      "the list's entries: the template rewrites them",
	"List[].ByteCount": "the list's entries: the template rewrites them",
	"List[].Mkey":      "the list's entries: the template rewrites them",
	"RepeatCount":      "read only with an interleaved layout, which a template never holds (the key says whether there is one)",
	"SigErrs":          "read only with UpdateSigErr, which a template never holds (the key has UpdateSigErr)",
	"Block.Mem":        "read only with UpdateSigErr, which a template never holds (the key has UpdateSigErr)",
	"Block.Wire":       "read only with UpdateSigErr, which a template never holds",
	"Block.MemSig":     "read only with UpdateSigErr, which a template never holds",
	"Block.WireSig":    "read only with UpdateSigErr, which a template never holds",
}

// TestMkeyKeyCoversInputs changes each input of configures a template
// keeps, one at a time, to its lowest and highest bit, through every
// pointer and slice, and requires that the change makes another key,
// unless keyExcluded says why it need not (and then that it does not);
// and, either way, that Build, given the configure after the template
// kept the unchanged one, writes and returns what BuildMkeyConfigure
// does, or fails as it does. A field added to MkeyConfigure or to the
// signature block's types is changed here too, so a key that leaves it
// out fails.
func TestMkeyKeyCoversInputs(t *testing.T) {
	seen := map[string]bool{}
	for bi, base := range keyBases() {
		for _, mu := range keyMutations(base) {
			c := cloneConfigure(base)
			mu.do(c)
			field := strings.Fields(mu.path)[0]
			seen[field] = true
			what := fmt.Sprintf("base %d, %s", bi, mu.path)

			var tm MkeyTemplate
			const pi = 5 // the WQEs cross the ring's end
			r := make(Ring, 8*WQEBB)
			for range 2 {
				if _, err := tm.Build(r, pi, 8, cloneConfigure(base)); err != nil {
					t.Fatalf("%s: the unchanged configure: %v", what, err)
				}
			}
			if !tm.ok {
				t.Fatalf("%s: two configures alike left no template", what)
			}
			var k mkeyKey
			k.update(base)
			changed := !k.update(c)
			_, excluded := keyExcluded[field]
			switch {
			case !changed && !excluded:
				t.Errorf("%s: the key does not change (add the input to mkeyKey, or to keyExcluded with the reason)", what)
			case changed && excluded:
				t.Errorf("%s: the key changes, but keyExcluded says it need not: %s", what, keyExcluded[field])
			}

			got, want := make(Ring, 8*WQEBB), make(Ring, 8*WQEBB)
			copy(got, r)
			copy(want, r)
			gres, gerr := tm.Build(got, pi, 8, c)
			wres, werr := BuildMkeyConfigure(want, pi, 8, c)
			if gerr != werr && (gerr == nil || werr == nil || gerr.Error() != werr.Error()) {
				t.Errorf("%s: Build says %v, BuildMkeyConfigure %v", what, gerr, werr)
			}
			if gres != wres {
				t.Errorf("%s: Build returns %+v, BuildMkeyConfigure %+v", what, gres, wres)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: Build wrote\n%x\nBuildMkeyConfigure\n%x", what, got, want)
			}
		}
	}
	for field := range keyExcluded {
		if !seen[field] {
			t.Errorf("keyExcluded names %s, which no configure has", field)
		}
	}
}
