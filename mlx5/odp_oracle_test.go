package mlx5

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// odpRecord is one record of testdata/odp.jsonl (mlx5/testdata/README.md
// says how it was made): an ODP registration, an advice or a teardown,
// with the kernel commands libibverbs 44.0 sent for it.
type odpRecord struct {
	Case  string `json:"case"`
	Input struct {
		Access      uint32 `json:"access"`
		AdviceValue uint32 `json:"advice_value"`
		Flags       uint32 `json:"flags"`
		SGE         []struct {
			Addr   string `json:"addr"`
			Length uint32 `json:"length"`
			LKey   string `json:"lkey"`
		} `json:"sge"`
	} `json:"input"`
	KernelCmds []json.RawMessage `json:"kernel_cmds"`
}

// odpBufAddr is where the oracle's harness mapped the memory it
// registered (ODP_BUF_ADDR), 64 KiB.
const odpBufAddr, odpBufLen = 0x7e5b00000000, 64 << 10

// TestOracleODP: PD.RegMR with AccessOnDemand, PD.RegImplicitODP, MR.Advise
// and PD.Advise (every advice, with and without FLUSH, one SGE and three,
// one of them the implicit MR's), the MRs' and the PD's destruction, on a
// recording kernel, send what libibverbs 44.0 sent for ibv_reg_mr (also
// (NULL, SIZE_MAX)), ibv_advise_mr and ibv_dereg_mr: each call paired in
// order with the recorded one and compared byte for byte (header,
// attribute ids, lengths, flags and inputs; the PD handle of the advice by
// value). Masked: the legacy response pointer heading REG_MR's CORE_IN
// (libibverbs' write path needs it, the ioctl path sends 0). The recorder
// answers with the recorded outputs, so the handles and keys are the fake
// kernel's. Not recorded, and answered without a pairing: the device
// query and ODP HCA caps RegImplicitODP reads first (libibverbs checks no
// caps and lets the kernel refuse).
func TestOracleODP(t *testing.T) {
	p, err := unix.MmapPtr(-1, 0, unsafe.Add(unsafe.Pointer(nil), uintptr(odpBufAddr)), odpBufLen, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_FIXED_NOREPLACE)
	if err != nil || uintptr(p) != odpBufAddr {
		t.Skipf("cannot map the oracle's buffer address %#x: %v", odpBufAddr, err)
	}
	defer unix.MunmapPtr(p, odpBufLen)
	mem := unsafe.Slice((*byte)(p), odpBufLen)

	var recs []odpRecord
	oracle.Lines(t, "testdata/odp.jsonl", func(line []byte) {
		var r odpRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	})
	calls := func(r odpRecord) []oracle.Call {
		var cs []oracle.Call
		for _, raw := range r.KernelCmds {
			var c oracle.Call
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
		}
		return cs
	}

	var want []oracle.Call // what the current step's calls must be
	var wantRaw []json.RawMessage
	compared := map[string]int{}
	uctx := uverbs.NewRecordingContext(uverbs.DriverMLX5, func(c *uverbs.Call) unix.Errno {
		if odpUnrecorded(c) {
			return 0
		}
		if len(want) == 0 {
			t.Errorf("a call libibverbs did not make: %+v", c.Hdr)
			return unix.EINVAL
		}
		w, raw := want[0], wantRaw[0]
		want, wantRaw = want[1:], wantRaw[1:]
		g := got(c)
		if w.Object == "DEVICE" && w.Method == "INVOKE_WRITE" {
			for i := range g.Attrs {
				if g.Attrs[i].ID == uverbsabi.UVERBS_ATTR_CORE_IN && len(g.Attrs[i].Bytes) >= 8 {
					g.Attrs[i].Bytes = append(make([]byte, 8), g.Attrs[i].Bytes[8:]...)
				}
			}
			for i := range w.Attrs {
				if w.Attrs[i].Name == "CORE_IN" && len(w.Attrs[i].Hex) >= 16 {
					w.Attrs[i].Hex = strings.Repeat("0", 16) + w.Attrs[i].Hex[16:]
				}
			}
		}
		oracle.Compare(t, w, g)
		compared[w.Object+"/"+w.Method]++
		odpAnswer(t, c, w, raw)
		return 0
	})
	c := NewContext(&kernelDevice{ctx: uctx, devx: true})
	defer c.Close()

	mrs := map[string]*MR{}
	var pd *PD
	for _, r := range recs {
		want, wantRaw = nil, nil
		for i, k := range calls(r) {
			if k.Op == "ioctl" {
				want, wantRaw = append(want, k), append(wantRaw, r.KernelCmds[i])
			}
		}
		step := r.Case
		if step == "teardown" {
			// The driver's part of it: the MRs and the PD.
			var keep []oracle.Call
			var keepRaw []json.RawMessage
			for i, k := range want {
				if k.Object == "MR" || k.Object == "PD" {
					keep, keepRaw = append(keep, k), append(keepRaw, wantRaw[i])
				}
			}
			want, wantRaw = keep, keepRaw
		}
		switch {
		case step == "setup":
			// Only ALLOC_PD is the driver's to pair; the open is uverbs'.
			var keep []oracle.Call
			var keepRaw []json.RawMessage
			for i, k := range want {
				if k.Method == "INVOKE_WRITE" && recordedWriteCmd(t, k) == uverbsabi.IB_USER_VERBS_CMD_ALLOC_PD {
					keep, keepRaw = append(keep, k), append(keepRaw, wantRaw[i])
				}
			}
			want, wantRaw = keep, keepRaw
			if pd, err = c.AllocPD(); err != nil {
				t.Fatal(err)
			}
		case step == "reg_mr/implicit":
			mrs[step], err = pd.RegImplicitODP(AccessFlags(r.Input.Access) &^ AccessOnDemand)
		case strings.HasSuffix(step, "/dereg"):
			err = mrs[strings.TrimSuffix(step, "/dereg")].Close()
		case strings.HasPrefix(step, "reg_mr/"):
			mrs[step], err = pd.RegMR(mem, AccessFlags(r.Input.Access))
		case strings.HasPrefix(step, "advise/"):
			var sgl []SGE
			for _, s := range r.Input.SGE {
				sgl = append(sgl, SGE{Addr: oracle.Num(t, s.Addr), Length: s.Length, LKey: uint32(oracle.Num(t, s.LKey))})
			}
			if len(sgl) == 1 {
				mr := mrs["reg_mr/odp_for_advice"]
				if mr.LKey() != sgl[0].LKey {
					t.Fatalf("%s: the MR's lkey is %#x, libibverbs advised %#x", step, mr.LKey(), sgl[0].LKey)
				}
				err = mr.Advise(Advice(r.Input.AdviceValue), AdviceFlags(r.Input.Flags), sgl[0].Addr, sgl[0].Length)
			} else {
				err = pd.Advise(Advice(r.Input.AdviceValue), AdviceFlags(r.Input.Flags), sgl)
			}
		case step == "teardown":
			for _, name := range []string{"reg_mr/odp_read_only", "reg_mr/odp_for_advice", "reg_mr/implicit"} {
				if err := mrs[name].Close(); err != nil {
					t.Fatalf("%s: close %s: %v", step, name, err)
				}
			}
			err = pd.Close()
		default:
			t.Fatalf("unknown case %s", step)
		}
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if len(want) != 0 {
			t.Errorf("%s: libibverbs made %d calls the driver did not: %v", step, len(want), want)
		}
	}
	t.Logf("compared with libibverbs' records: %v", compared)
	if compared["MR/ADVISE_MR"] != 12 || compared["DEVICE/INVOKE_WRITE"] != 7 || compared["MR/MR_DESTROY"] != 6 {
		t.Errorf("compared %v: want 12 advices, 7 INVOKE_WRITEs (ALLOC_PD and 6 REG_MRs) and 6 MR destroys", compared)
	}
}

// recordedWriteCmd is the legacy command an INVOKE_WRITE record carries.
func recordedWriteCmd(t *testing.T, k oracle.Call) uint32 {
	for _, a := range k.Attrs {
		if a.Name == "WRITE_CMD" {
			return uint32(binary.LittleEndian.Uint64(a.Bytes(t)))
		}
	}
	t.Fatalf("%v: no WRITE_CMD", k)
	return 0
}

// odpUnrecorded answers the calls RegImplicitODP makes that libibverbs
// does not: the extended device query (reporting ODP with implicit) and
// the ODP HCA caps (DEVX_OTHER, zero).
func odpUnrecorded(c *uverbs.Call) bool {
	switch {
	case c.Hdr.ObjectID == uverbsabi.UVERBS_OBJECT_DEVICE && c.Hdr.MethodID == uverbsabi.UVERBS_METHOD_INVOKE_WRITE:
		for _, a := range c.Attrs {
			if a.AttrID == uverbsabi.UVERBS_ATTR_WRITE_CMD && uint32(a.Data) != uverbsabi.IB_USER_VERBS_CMD_FLAG_EXTENDED|uverbsabi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE {
				return false
			}
		}
		for i, a := range c.Attrs {
			if a.AttrID == uverbsabi.UVERBS_ATTR_CORE_OUT {
				var r uverbsabi.IbUverbsExQueryDeviceResp
				r.ResponseLength = uint32(unsafe.Sizeof(r))
				r.OdpCaps.GeneralCaps = uint64(ODPSupported | ODPImplicit)
				copy(c.Data[i], unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r)))
			}
		}
		return true
	case c.Hdr.ObjectID == mlx5abi.MLX5_IB_OBJECT_DEVX && c.Hdr.MethodID == mlx5abi.MLX5_IB_METHOD_DEVX_OTHER:
		return true
	}
	return false
}

// odpAnswer writes the recorded outputs of w into the call.
func odpAnswer(t *testing.T, c *uverbs.Call, w oracle.Call, raw json.RawMessage) {
	var rec struct {
		Attrs []struct {
			AttrID uint16 `json:"attr_id"`
			Dir    string `json:"dir"`
			OutHex string `json:"out_hex"`
			Value  uint64 `json:"value"`
		} `json:"attrs"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	for _, ra := range rec.Attrs {
		for i, a := range c.Attrs {
			if a.AttrID != ra.AttrID {
				continue
			}
			switch ra.Dir {
			case "out":
				b, err := hex.DecodeString(ra.OutHex)
				if err != nil {
					t.Fatal(err)
				}
				copy(c.Data[i], b)
			case "idr_in", "idr_destroy":
				if a.Data != ra.Value {
					t.Errorf("%s attr %d: handle %d, libibverbs %d", w, ra.AttrID, a.Data, ra.Value)
				}
			}
		}
	}
}
