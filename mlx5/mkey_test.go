package mlx5

import (
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// CreateMkey sends the commands libmlx5's mlx5dv_create_mkey sends: for a
// signature mkey two CREATE_PSVs then CREATE_MKEY, byte for byte, and its
// keys come from the output's mkey index. RemoteInvalidate is libmlx5's
// MLX5DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE (testdata/invalidation.jsonl):
// mkc.en_rinval set, nothing else changed.
func TestOracleCreateMkey(t *testing.T) {
	for _, tc := range []struct {
		file, kase string
		opt        MkeyOptions
	}{
		{"create_cmds", "create_mkey_block_signature", MkeyOptions{MaxEntries: 4, BlockSignature: true}},
		{"create_cmds", "create_mkey_indirect", MkeyOptions{MaxEntries: 4}},
		{"invalidation", "create_mkey_remote_invalidate", MkeyOptions{MaxEntries: 4, RemoteInvalidate: true}},
		{"invalidation", "create_mkey_block_signature_remote_invalidate", MkeyOptions{MaxEntries: 4, BlockSignature: true, RemoteInvalidate: true}},
	} {
		t.Run(tc.kase, func(t *testing.T) {
			c := oracle.Load(t, "testdata/"+tc.file+".jsonl", tc.kase)
			var want []oracle.Call
			for _, k := range c.KernelCmds {
				if k.Method == "DEVX_OBJ_CREATE" {
					want = append(want, k)
				}
			}
			r, calls := recordedAnswering(t, want)
			seedCaps(t, r.Context)
			pd := &PD{c: r.Context, pdn: 0x11} // the fake kernel's pdn
			m, err := pd.CreateMkey(tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if len(*calls) != len(want) {
				t.Fatalf("%d DEVX creates, libmlx5 %d", len(*calls), len(want))
			}
			for i := range want {
				oracle.Compare(t, want[i], (*calls)[i])
			}
			var res struct {
				LKey string `json:"lkey"`
			}
			if err := jsonUnmarshal(c.Result, &res); err != nil {
				t.Fatal(err)
			}
			if k := fmt.Sprintf("0x%08x", m.lkey); k != res.LKey || m.rkey != m.lkey {
				t.Errorf("lkey %s rkey %#x, libmlx5 %s", k, m.rkey, res.LKey)
			}
			if mem, wire := m.PSVs(); tc.opt.BlockSignature {
				var psv []uint32
				for _, k := range want[:2] {
					out, err := hex.DecodeString(k.Attrs[2].OutHex)
					if err != nil {
						t.Fatal(err)
					}
					psv = append(psv, uint32(prm.CreatePsvOut.Psv0Index.Get(out)))
				}
				if mem != psv[0] || wire != psv[1] {
					t.Errorf("PSVs %#x %#x, want %#x %#x from the outputs", mem, wire, psv[0], psv[1])
				}
			}
			if m.RemoteInvalidate() != tc.opt.RemoteInvalidate {
				t.Errorf("RemoteInvalidate %v", m.RemoteInvalidate())
			}
			*calls = nil
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if n := 1 + 2*b2i(tc.opt.BlockSignature); len(*calls) != n {
				t.Errorf("Close made %d calls, want %d destroys", len(*calls), n)
			}
			if err := m.Close(); err != nil || len(*calls) != 1+2*b2i(tc.opt.BlockSignature) {
				t.Errorf("second Close: %v, %d calls", err, len(*calls))
			}
		})
	}
}

// seedCaps gives c the general capabilities libmlx5 read when it opened
// the oracle's device (open_device's QUERY_HCA_CAP), as if c had read them.
func seedCaps(t *testing.T, c *Context) {
	t.Helper()
	open := oracle.Load(t, "testdata/create_cmds.jsonl", "open_device")
	for _, k := range open.KernelCmds {
		if k.Method != "DEVX_OTHER" {
			continue
		}
		out, err := hex.DecodeString(k.Attrs[1].OutHex)
		if err != nil {
			t.Fatal(err)
		}
		c.capsOnce.Do(func() { c.general = prm.QueryHcaCapOut.Capability.Bytes(out) })
		return
	}
	t.Fatal("open_device has no QUERY_HCA_CAP")
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestCreateMkeyRejectsBadInput(t *testing.T) {
	r := newRecorded(t)
	pd := &PD{c: r.Context, pdn: 0x11}
	for _, n := range []int{0, -1, 1025} {
		r.last = nil
		if _, err := pd.CreateMkey(MkeyOptions{MaxEntries: n}); !errors.Is(Checked(t, err), unix.EINVAL) {
			t.Errorf("max entries %d: %v, want EINVAL", n, err)
		}
		if r.last != nil {
			t.Errorf("max entries %d: a command reached the kernel", n)
		}
	}
}

// A failed CREATE_MKEY leaves no PSV behind.
func TestCreateMkeyFailureReleasesPSVs(t *testing.T) {
	r := newRecorded(t)
	seedCaps(t, r.Context)
	pd := &PD{c: r.Context, pdn: 0x11}
	var methods []string
	r.fill = func(call *uverbs.Call) {
		methods = append(methods, fmt.Sprintf("%d", call.Hdr.MethodID))
		r.errno = 0
		if len(methods) == 3 {
			r.errno = unix.ENOMEM
		}
	}
	_, err := pd.CreateMkey(MkeyOptions{MaxEntries: 4, BlockSignature: true})
	r.errno = 0
	if !errors.Is(Checked(t, err), unix.ENOMEM) {
		t.Fatalf("create: %v, want ENOMEM", err)
	}
	if len(methods) != 5 {
		t.Errorf("calls %v: want 2 CREATE_PSV, the failed CREATE_MKEY, 2 destroys", methods)
	}
}
