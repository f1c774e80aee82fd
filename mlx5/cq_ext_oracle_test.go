package mlx5

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/model"
)

// The driver's half of libmlx5's CQ resize, moderation and timestamp
// records (testdata/cq_ext.jsonl; the kernel's half, the command bytes,
// is TestOracleVerbsReplay's): what CQ.Resize, CQ.Moderate and CreateCQ
// hand the device, and the rings Resize leaves, against what libmlx5 sent
// and left.

// cqExtRecord is a record of cq_ext.jsonl.
type cqExtRecord struct {
	Case  string `json:"case"`
	Input struct {
		Entries     int      `json:"entries"`
		Outstanding int      `json:"outstanding"`
		CI          uint32   `json:"ci"`
		OldRing     *cqeRing `json:"old_ring"`
	} `json:"input"`
	Result struct {
		Ret     int      `json:"ret"`
		CQE     int      `json:"cqe"`
		NewRing *cqeRing `json:"new_ring"`
	} `json:"result"`
}

type cqeRing struct {
	CQECnt  int    `json:"cqe_cnt"`
	CQESize int    `json:"cqe_size"`
	Hex     string `json:"hex"`
}

// cqExtDevice is the model's device, keeping what the driver sends for
// CQs. Its ResizeCQ answers as the oracle's fake kernel did: the resize
// CQE written by onResize, the entries asked for granted, nothing sent on.
type cqExtDevice struct {
	seam.Device
	creates  []cqSent
	modifies [][2]uint16
	resizes  []cqSent
	onResize func()
}

// cqSent is a create or resize the driver made: its flags, entries and
// driver data.
type cqSent struct {
	flags, cqe uint32
	drv        []byte
}

func (d *cqExtDevice) CreateCQ(c seam.CQCreate, drvIn, drvOut []byte) (seam.Handle, uint32, error) {
	d.creates = append(d.creates, cqSent{c.Flags, c.CQE, bytes.Clone(drvIn)})
	return d.Device.CreateCQ(c, drvIn, drvOut)
}

func (d *cqExtDevice) ModifyCQ(h seam.Handle, count, period uint16) error {
	d.modifies = append(d.modifies, [2]uint16{count, period})
	return d.Device.ModifyCQ(h, count, period)
}

func (d *cqExtDevice) ResizeCQ(h seam.Handle, cqe uint32, drvIn []byte) (uint32, error) {
	d.resizes = append(d.resizes, cqSent{0, cqe, bytes.Clone(drvIn)})
	if d.onResize != nil {
		d.onResize()
	}
	return cqe, nil
}

func newCQExtContext(t *testing.T, profile string) (*Context, *cqExtDevice) {
	t.Helper()
	dev, err := model.NewWithOptions(profile, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := &cqExtDevice{Device: dev}
	c := newContext(d)
	t.Cleanup(func() { c.Close(); dev.Close() })
	return c, d
}

// cqExtSetup loads the records and makes a cx7 context on a cqExtDevice
// with a verbs CQ of 16 entries, as the harness's.
func cqExtSetup(t *testing.T) (map[string]*cqExtRecord, map[string][]*vcall, *Context, *cqExtDevice, *CQ) {
	recs, calls := cqExtLoad(t)
	c, d := newCQExtContext(t, "cx7")
	cq, err := c.CreateCQ(CQOptions{Entries: 16})
	if err != nil {
		t.Fatal(err)
	}
	return recs, calls, c, d, cq
}

// cqExtLoad returns the records by case, and each case's kernel commands.
func cqExtLoad(t *testing.T) (map[string]*cqExtRecord, map[string][]*vcall) {
	const path = "testdata/cq_ext.jsonl"
	recs := map[string]*cqExtRecord{}
	oracle.Records(t, path, nil, func(r *cqExtRecord) { recs[r.Case] = r })
	calls := map[string][]*vcall{}
	for _, c := range loadCalls(t, path) {
		calls[c.kase] = append(calls[c.kase], c)
	}
	return recs, calls
}

// TestOracleCQResizeRing: with the old ring libmlx5 had (its CQEs
// outstanding, the resize CQE the fake kernel wrote after them), CQ.Resize
// sends the entries and struct mlx5_ib_resize_cq libmlx5 sent (but for
// the new ring's address, which must be the ring's), leaves the new ring
// byte for byte as libmlx5's mlx5_cq_resize_copy_cqes left it (carried
// CQEs at index + 1 with their owner bits, the rest as each library
// initialises a ring), and the consumer index where libmlx5's is, over 22
// resizes whose consumer index passes 16 and 32 (owner bits 1 and 0 in
// rings of 16 and 32); a resize to the size the ring has sends nothing,
// as in libmlx5.
func TestOracleCQResizeRing(t *testing.T) {
	recs, calls, _, d, cq := cqExtSetup(t)
	exact := 0
	names := []string{"resize_grow", "resize_shrink", "resize_same", "resize_empty"}
	for i := range 18 { // rings of 16 and 32 in turn, past consumer index 16 and 32
		names = append(names, fmt.Sprintf("resize_lap_%02d", i))
	}
	for _, name := range names {
		rec := recs[name]
		if rec == nil || rec.Input.OldRing == nil || rec.Result.NewRing == nil || rec.Result.Ret != 0 {
			t.Fatalf("%s: no record with both rings", name)
		}
		old := oracle.Unhex(t, rec.Input.OldRing.Hex)
		if len(old) != len(cq.ring) || cq.ci != rec.Input.CI {
			t.Fatalf("%s: ring of %d bytes, ci %d; libmlx5 %d bytes, ci %d", name, len(cq.ring), cq.ci, len(old), rec.Input.CI)
		}
		copy(cq.ring, old)
		at := cq.ci + uint32(rec.Input.Outstanding)
		slot, owner := cqeAt(cq.ring, cq.logSize, at), uint8(at>>cq.logSize)&1
		d.onResize = func() { clear(slot); slot[63] = 5<<4 | owner } // MLX5_CQE_RESIZE_CQ
		n := len(d.resizes)
		if err := cq.Resize(rec.Input.Entries); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var lib []*vcall
		for _, k := range calls[name] {
			if k.WriteCmd == "0x13" {
				lib = append(lib, k)
			}
		}
		sent := d.resizes[n:]
		if len(sent) != len(lib) {
			t.Fatalf("%s: %d resize commands, libmlx5 %d", name, len(sent), len(lib))
		}
		if len(sent) == 1 {
			core, drv := lib[0].attr(t, "CORE_IN").in(t), lib[0].attr(t, "UHW_IN").in(t)
			if sent[0].cqe != le32(core[12:]) {
				t.Errorf("%s: cqe %d, libmlx5 %d", name, sent[0].cqe, le32(core[12:]))
			}
			if len(sent[0].drv) != len(drv) || !bytes.Equal(sent[0].drv[8:], drv[8:]) || le64(sent[0].drv) != uint64(addrOf(cq.ring)) {
				t.Errorf("%s: struct mlx5_ib_resize_cq %x (ring at %#x), libmlx5 %x", name, sent[0].drv, addrOf(cq.ring), drv)
			}
		}
		want := oracle.Unhex(t, rec.Result.NewRing.Hex)
		if cq.Size() != rec.Result.CQE+1 || len(want) != len(cq.ring) {
			t.Fatalf("%s: %d CQEs, libmlx5 %d (%d bytes)", name, cq.Size(), rec.Result.CQE+1, len(want))
		}
		for i := 0; i < len(want); i += cqeSize {
			if !bytes.Equal(cq.ring[i:i+cqeSize], want[i:i+cqeSize]) {
				t.Errorf("%s: new ring CQE %d\n %x\nlibmlx5\n %x", name, i/cqeSize, cq.ring[i:i+cqeSize], want[i:i+cqeSize])
			}
		}
		if !t.Failed() {
			exact++
		}
	}
	if cq.ci != 21 { // 21 resizes, each past its resize CQE
		t.Errorf("consumer index %d after 21 resizes, want 21", cq.ci)
	}
	if exact != len(names) {
		t.Errorf("%d of %d resizes byte-exact", exact, len(names))
	}
	t.Logf("%d of %d resizes byte-exact (commands, driver data, new ring)", exact, len(names))
}

// TestOracleCQModerateCreate: CQ.Moderate hands the device the count and
// period ibv_modify_cq sent; CreateCQ with Timestamps or
// RealTimeTimestamps the flags, entries and struct mlx5_ib_create_cq
// (but for the addresses and the UAR page) libmlx5 sent for
// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP and, on a context with
// MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS, _WALLCLOCK alone. Where
// libmlx5 refused before any command, mlx5go does too: WALLCLOCK on a
// context without real-time timestamps (libmlx5: EOPNOTSUPP, for want of
// a clock-info page; mlx5go: ErrUnsupported on a cx5), and both flags
// (libmlx5: EOPNOTSUPP, ditto; mlx5go: ErrInvalid, one clock or the
// other).
func TestOracleCQModerateCreate(t *testing.T) {
	recs, calls, c, d, cq := cqExtSetup(t)
	for _, name := range []string{"modify_1_1", "modify_16_100", "modify_65535_4095", "modify_0_0"} {
		ks := calls[name]
		if len(ks) != 1 || ks[0].WriteCmd != "0x80000039" || recs[name].Result.Ret != 0 {
			t.Fatalf("%s: %d commands", name, len(ks))
		}
		core := ks[0].attr(t, "CORE_IN").in(t)
		count, period := binary.LittleEndian.Uint16(core[8:]), binary.LittleEndian.Uint16(core[10:])
		if err := cq.Moderate(int(count), int(period)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := d.modifies[len(d.modifies)-1]; got != [2]uint16{count, period} {
			t.Errorf("%s: sent %v, libmlx5 %d, %d", name, got, count, period)
		}
	}
	for _, tc := range []struct {
		name string
		opt  CQOptions
	}{{"create_plain", CQOptions{}}, {"create_timestamp", CQOptions{Timestamps: true}},
		{"rt/create_timestamp", CQOptions{Timestamps: true}}, {"rt/create_wallclock", CQOptions{RealTimeTimestamps: true}}} {
		ks := calls[tc.name]
		if len(ks) != 1 || ks[0].want.Method != "CQ_CREATE" {
			t.Fatalf("%s: %d commands", tc.name, len(ks))
		}
		tc.opt.Entries = 16
		n := len(d.creates)
		if _, err := c.CreateCQ(tc.opt); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(d.creates) != n+1 {
			t.Fatalf("%s: %d creates sent", tc.name, len(d.creates)-n)
		}
		got, w := d.creates[n], ks[0]
		var flags uint32
		if w.has("FLAGS") {
			flags = le32(w.attr(t, "FLAGS").in(t))
		}
		drv := w.attr(t, "UHW_IN").in(t)
		// struct mlx5_ib_create_cq: buf_addr, db_addr, cqe_size,
		// cqe_comp_en, cqe_comp_res_format, flags, uar_page_index,
		// reserved0, reserved1.
		if got.flags != flags || got.cqe != le32(w.attr(t, "CQE").in(t)) || len(got.drv) != len(drv) ||
			!bytes.Equal(got.drv[16:24], drv[16:24]) || !bytes.Equal(got.drv[26:], drv[26:]) {
			t.Errorf("%s: flags %#x, cqe %d, driver data %x; libmlx5 %#x, %d, %x", tc.name, got.flags, got.cqe, got.drv, flags,
				le32(w.attr(t, "CQE").in(t)), drv)
		}
	}
	for _, tc := range []struct {
		name, profile string
		opt           CQOptions
		want          error
	}{{"create_wallclock", "cx5", CQOptions{Entries: 16, RealTimeTimestamps: true}, ErrUnsupported},
		{"rt/create_both", "cx7", CQOptions{Entries: 16, RealTimeTimestamps: true, Timestamps: true}, ErrInvalid}} {
		if r := recs[tc.name]; r == nil || r.Result.Ret == 0 || len(calls[tc.name]) != 0 {
			t.Fatalf("%s: libmlx5 did not refuse before any command", tc.name)
		}
		c, d := newCQExtContext(t, tc.profile)
		if _, err := c.CreateCQ(tc.opt); !errors.Is(err, tc.want) || len(d.creates) != 0 {
			t.Errorf("%s: %v with %d creates sent, want %v and none", tc.name, err, len(d.creates), tc.want)
		}
	}
}
