package mlx5

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
	"golang.org/x/sys/unix"
)

// sigCapsRecord is what the oracle recorded of mlx5dv_query_device's
// sig_caps (testdata/sigcaps.jsonl; create_cmds.jsonl's open_device has
// the result only).
type sigCapsRecord struct {
	Case  string `json:"case"`
	Input struct {
		HcaCap  map[string]uint64 `json:"hca_cap"`
		OutLen  int               `json:"query_hca_cap_out_len"`
		OutHex  string            `json:"query_hca_cap_out_hex"`
		RestZro bool              `json:"query_hca_cap_out_rest_zero"`
	} `json:"input"`
	Result struct {
		CompMask uint64 `json:"comp_mask"`
		SigCaps  struct {
			BlockSize uint64 `json:"block_size"`
			BlockProt uint32 `json:"block_prot"`
			T10DIFBG  uint16 `json:"t10dif_bg"`
			CRCType   uint16 `json:"crc_type"`
		} `json:"sig_caps"`
		CreateSigMkeyErrno int `json:"create_sig_mkey_errno"`
	} `json:"result"`
}

// The derivation is libmlx5's: for each of the 32 combinations of sho,
// sigerr_domain_and_sig_type, sig_block_4048, sig_crc32c and
// sig_crc64_xp10 the oracle recorded the general caps the fake kernel
// answered and the sig_caps libmlx5 44.0 then reported, and whether
// mlx5dv_create_mkey accepted BLOCK_SIGNATURE (EOPNOTSUPP when block_prot
// is 0). sigCapsOf must give the same caps from the same bytes, and
// Offload the same answer.
func TestOracleSigCaps(t *testing.T) {
	n := 0
	oracle.Lines(t, "testdata/sigcaps.jsonl", func(line []byte) {
		var r sigCapsRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		n++
		head, err := hex.DecodeString(r.Input.OutHex)
		if err != nil || !r.Input.RestZro || r.Input.OutLen != int(prm.QueryHcaCapOut.Layout().Size) {
			t.Fatalf("%s: caps %d bytes of %d (rest zero %v): %v", r.Case, len(head), r.Input.OutLen, r.Input.RestZro, err)
		}
		out := make([]byte, r.Input.OutLen)
		copy(out, head)
		general := prm.QueryHcaCapOut.Capability.Bytes(out)
		// prm reads the bits the fake kernel set where the record says.
		for name, v := range r.Input.HcaCap {
			f, ok := prm.CmdHcaCap.Layout().Field(name)
			if !ok || f.Get(general) != v {
				t.Fatalf("%s: cmd_hca_cap.%s: prm has it %v, reads %d, want %d", r.Case, name, ok, f.Get(general), v)
			}
		}
		want := sig.Caps{BlockSize: r.Result.SigCaps.BlockSize, BlockProt: r.Result.SigCaps.BlockProt,
			T10DIFBG: r.Result.SigCaps.T10DIFBG, CRCType: r.Result.SigCaps.CRCType}
		got := sigCapsOf(general)
		if got != want {
			t.Errorf("%s %v: sig_caps %+v, libmlx5 %+v", r.Case, r.Input.HcaCap, got, want)
		}
		if refused := r.Result.CreateSigMkeyErrno == int(unix.EOPNOTSUPP); got.Offload() == refused ||
			!refused && r.Result.CreateSigMkeyErrno != 0 {
			t.Errorf("%s: Offload %v; libmlx5's mlx5dv_create_mkey(BLOCK_SIGNATURE) errno %d", r.Case, got.Offload(), r.Result.CreateSigMkeyErrno)
		}
		if r.Result.CompMask&(1<<10) == 0 {
			t.Errorf("%s: MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD not reported (comp_mask %#x)", r.Case, r.Result.CompMask)
		}
	})
	if n != 32 {
		t.Errorf("%d records, want the 32 combinations", n)
	}

	// The open_device of the original vectors: the fake ConnectX-6's caps,
	// as libmlx5 read them at open.
	c := newRecorded(t).Context
	seedCaps(t, c)
	var open struct {
		SigCaps struct {
			BlockSize uint64 `json:"block_size"`
			BlockProt uint32 `json:"block_prot"`
			T10DIFBG  uint16 `json:"t10dif_bg"`
			CRCType   uint16 `json:"crc_type"`
		} `json:"sig_caps"`
	}
	if err := json.Unmarshal(oracle.Load(t, "testdata/create_cmds.jsonl", "open_device").Result, &open); err != nil {
		t.Fatal(err)
	}
	got, err := c.SigCaps()
	if want := (sig.Caps(open.SigCaps)); err != nil || got != want {
		t.Errorf("open_device: SigCaps %+v, %v; libmlx5 %+v", got, err, want)
	}
}

// sigRig is a cx7 model context whose driver sees the general caps edit
// made of the device's: a device with signature offload that lacks some
// optional caps. The model itself does everything, so only the driver's
// checks can refuse.
type sigRig struct {
	c   *Context
	dev *model.Device
	pd  *PD
	cq  *CQ
	qp  *QP
	mr  *MR
	buf *Buffer
}

func newSigRig(t *testing.T, edit func(general []byte)) *sigRig {
	t.Helper()
	dev, err := model.New("cx7")
	if err != nil {
		t.Fatal(err)
	}
	c := NewContext(dev)
	t.Cleanup(func() { c.Close() })
	general, err := c.generalCaps()
	if err != nil {
		t.Fatal(err)
	}
	general = bytes.Clone(general)
	edit(general)
	c.general = general
	r := &sigRig{c: c, dev: dev}
	if r.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if r.cq, err = c.CreateCQ(CQOptions{Entries: 64}); err != nil {
		t.Fatal(err)
	}
	if r.buf, err = AllocBuffer(1 << 16); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.buf.Close() })
	if r.mr, err = r.pd.RegMR(r.buf.Bytes(), AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	if r.qp, err = c.CreateQP(QPOptions{PD: r.pd, SendCQ: r.cq, RecvCQ: r.cq, MaxSendWR: 8, MkeyConfigure: true, MaxMkeyEntries: 1}); err != nil {
		t.Fatal(err)
	}
	path, err := c.LoopbackPath(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.qp.Connect(r.qp.QPN(), path); err != nil {
		t.Fatal(err)
	}
	return r
}

// posted is what a refused configure must leave as it was: the device's
// objects, the send queue's producer counter, its ring and its doorbell
// record.
type posted struct {
	objects int
	pi, db  uint16
	ring    []byte
}

func (r *sigRig) posted() posted {
	return posted{r.dev.Objects(), r.qp.sq.pi, r.qp.sq.bell.Counter(), bytes.Clone(r.qp.sq.ring)}
}

func (r *sigRig) configure(wrID uint64, m *Mkey, a *sig.BlockAttr) *MkeyConfigureWR {
	return &MkeyConfigureWR{WrID: wrID, Mkey: m, Flags: SendSignaled,
		List: []KLM{{Addr: r.mr.addr, ByteCount: 8192, Mkey: r.mr.lkey}}, Sig: a}
}

func (r *sigRig) poll(t *testing.T, want int) []Completion {
	t.Helper()
	var got []Completion
	wc := make([]Completion, 8)
	for end := time.Now().Add(mustCome); len(got) < want && time.Now().Before(end); time.Sleep(50 * time.Microsecond) {
		n, err := r.cq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, wc[:n]...)
	}
	time.Sleep(10 * time.Millisecond) // anything more is too much
	n, err := r.cq.Poll(wc)
	if err != nil {
		t.Fatal(err)
	}
	return append(got, wc[:n]...)
}

func t10difDomain(g sig.T10DIFGuard, bs sig.BlockSize) *sig.Domain {
	return &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: bs, T10DIF: &sig.T10DIF{Guard: g, Seed: 0xffff, AppTag: 1, RefTag: 2}}
}

func crcDomain(typ sig.CRCType, bs sig.BlockSize) *sig.Domain {
	return &sig.Domain{Type: sig.SigTypeCRC, BlockSize: bs, CRC: &sig.CRC{Type: typ}}
}

// A device with signature offload but without 4048-byte blocks, CRC32C
// or CRC64_XP10: a configure asking for one is refused with
// ErrUnsupported (EOPNOTSUPP, and the *sig.AttrError naming the field)
// before anything is written or rung; an invalid one is still ErrInvalid;
// what the caps cover is posted and completes.
func TestMkeyConfigureRefusesWhatTheCapsLack(t *testing.T) {
	r := newSigRig(t, func(g []byte) {
		prm.CmdHcaCap.SigBlock4048.Set(g, 0)
		prm.CmdHcaCap.SigCrc32c.Set(g, 0)
		prm.CmdHcaCap.SigCrc64Xp10.Set(g, 0)
	})
	caps, err := r.c.SigCaps()
	if want := (sig.Caps{BlockSize: 0x1b, BlockProt: 3, T10DIFBG: 3, CRCType: 1}); err != nil || caps != want {
		t.Fatalf("SigCaps %+v, %v; want %+v", caps, err, want)
	}
	m, err := r.pd.CreateMkey(MkeyOptions{MaxEntries: 1, BlockSignature: true})
	if err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name  string
		attr  *sig.BlockAttr
		field string
	}{
		{"4048 in memory", &sig.BlockAttr{Mem: t10difDomain(sig.T10DIFGuardCRC, sig.BlockSize4048)}, "mem.block_size"},
		{"4048 on the wire", &sig.BlockAttr{Wire: t10difDomain(sig.T10DIFGuardCsum, sig.BlockSize4048)}, "wire.block_size"},
		{"CRC32C", &sig.BlockAttr{Wire: crcDomain(sig.CRCTypeCRC32C, sig.BlockSize512)}, "wire.crc.type"},
		{"CRC64_XP10", &sig.BlockAttr{Mem: crcDomain(sig.CRCTypeCRC64XP10, sig.BlockSize4096)}, "mem.crc.type"},
		{"wire lacks, memory fine", &sig.BlockAttr{Mem: t10difDomain(sig.T10DIFGuardCRC, sig.BlockSize512),
			Wire: crcDomain(sig.CRCTypeCRC64XP10, sig.BlockSize512)}, "wire.crc.type"},
	}
	before := r.posted()
	for _, tt := range refused {
		err := r.qp.PostMkeyConfigure(r.configure(7, m, tt.attr))
		var ae *sig.AttrError
		if !errors.Is(Checked(t, err), ErrUnsupported) || !errors.Is(err, unix.EOPNOTSUPP) || !errors.Is(err, sig.ErrUnsupported) ||
			errors.Is(err, ErrInvalid) || !errors.As(err, &ae) || ae.Field != tt.field {
			t.Errorf("%s: %v; want ErrUnsupported, EOPNOTSUPP and sig's error for %s", tt.name, err, tt.field)
		}
		t.Logf("%s: %v", tt.name, err)
		if now := r.posted(); now.objects != before.objects || now.pi != before.pi || now.db != before.db || !bytes.Equal(now.ring, before.ring) {
			t.Fatalf("%s: the refused configure changed the device or the queue: objects %d→%d, producer %d→%d, doorbell %d→%d",
				tt.name, before.objects, now.objects, before.pi, now.pi, before.db, now.db)
		}
	}
	// Invalid and unsupported: libmlx5's EINVAL comes first.
	bad := crcDomain(sig.CRCTypeCRC64XP10, sig.BlockSize4048)
	bad.CRC.Seed = 5
	if err := r.qp.PostMkeyConfigure(r.configure(8, m, &sig.BlockAttr{Mem: bad})); !errors.Is(Checked(t, err), ErrInvalid) || !errors.Is(err, sig.ErrCRCSeed) || errors.Is(err, ErrUnsupported) {
		t.Errorf("an invalid seed with an unsupported CRC: %v, want ErrInvalid (the seed)", err)
	}
	if err := r.qp.PostMkeyConfigure(r.configure(8, m, &sig.BlockAttr{Mem: t10difDomain(9, sig.BlockSize512)})); !errors.Is(Checked(t, err), ErrInvalid) || errors.Is(err, ErrUnsupported) {
		t.Errorf("an unknown guard type: %v, want ErrInvalid", err)
	}
	// Both RESET_SIG_ATTR and a block: EINVAL whatever the block.
	wr := r.configure(8, m, &sig.BlockAttr{Mem: crcDomain(sig.CRCTypeCRC64XP10, sig.BlockSize512)})
	wr.ResetSig = true
	if err := r.qp.PostMkeyConfigure(wr); !errors.Is(Checked(t, err), ErrInvalid) || errors.Is(err, ErrUnsupported) {
		t.Errorf("RESET_SIG_ATTR with an unsupported block: %v, want ErrInvalid", err)
	}
	if now := r.posted(); now.pi != before.pi || !bytes.Equal(now.ring, before.ring) {
		t.Fatal("an invalid configure wrote into the queue")
	}

	// In a batch: the work requests before it are undone too.
	b := r.qp.Begin()
	b.AddMkeyConfigure(r.configure(20, m, &sig.BlockAttr{Mem: t10difDomain(sig.T10DIFGuardCRC, sig.BlockSize512)}))
	b.AddMkeyConfigure(r.configure(21, m, &sig.BlockAttr{Mem: crcDomain(sig.CRCTypeCRC32C, sig.BlockSize512)}))
	if err := b.Commit(); !errors.Is(Checked(t, err), ErrUnsupported) || !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("batch: %v, want ErrUnsupported", err)
	}
	if now := r.posted(); now.objects != before.objects || now.pi != before.pi || now.db != before.db || !bytes.Equal(now.ring, before.ring) {
		t.Fatal("the refused batch left something posted")
	}
	if got := r.poll(t, 0); len(got) != 0 {
		t.Fatalf("completions of refused configures: %+v", got)
	}

	// What the caps cover: 512, 520, 4096 and 4160-byte blocks, T10-DIF
	// with either guard, CRC32.
	for i, a := range []*sig.BlockAttr{
		{Mem: t10difDomain(sig.T10DIFGuardCRC, sig.BlockSize4096), Wire: t10difDomain(sig.T10DIFGuardCsum, sig.BlockSize4160)},
		{Wire: crcDomain(sig.CRCTypeCRC32, sig.BlockSize520)},
	} {
		if err := r.qp.PostMkeyConfigure(r.configure(uint64(30+i), m, a)); err != nil {
			t.Fatalf("configure %d: %v", i, err)
		}
	}
	got := r.poll(t, 2)
	want := []Completion{{WrID: 30, Status: WCSuccess, Opcode: WCUMR, QPN: r.qp.QPN()}, {WrID: 31, Status: WCSuccess, Opcode: WCUMR, QPN: r.qp.QPN()}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("completions\n got %+v\nwant %+v", got, want)
	}
	if f := r.dev.WQEErrors(); len(f) != 0 {
		t.Errorf("the device's WQE errors: %v", f)
	}
}

// libmlx5 offers signature mkeys only with both sho and
// sigerr_domain_and_sig_type: without either, CreateMkey(BlockSignature)
// is EOPNOTSUPP before any command and the caps are zero.
func TestCreateMkeyNeedsShoAndSigerrDomain(t *testing.T) {
	for name, f := range map[string]prm.Field{"sho": prm.CmdHcaCap.Sho, "sigerr_domain_and_sig_type": prm.CmdHcaCap.SigerrDomainAndSigType} {
		r := newSigRig(t, func(g []byte) { f.Set(g, 0) })
		if caps, err := r.c.SigCaps(); err != nil || caps != (sig.Caps{}) {
			t.Errorf("without %s: SigCaps %+v, %v; want none", name, caps, err)
		}
		before := r.dev.Objects()
		_, err := r.pd.CreateMkey(MkeyOptions{MaxEntries: 1, BlockSignature: true})
		if !errors.Is(Checked(t, err), ErrUnsupported) || !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("without %s: CreateMkey %v, want ErrUnsupported", name, err)
		}
		if n := r.dev.Objects(); n != before {
			t.Errorf("without %s: the refused create left %d objects", name, n-before)
		}
		m, err := r.pd.CreateMkey(MkeyOptions{MaxEntries: 1})
		if err != nil {
			t.Errorf("without %s: an mkey without signature: %v", name, err)
		} else {
			m.Close()
		}
	}
}
