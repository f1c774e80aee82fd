package mlx5

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"golang.org/x/sys/unix"
)

// dcSizingUnexpressible are the dc sizing records whose send operations
// mlx5 has no name for (libmlx5 refuses them on a DCI with EOPNOTSUPP, and
// mlx5 cannot be asked for them).
var dcSizingUnexpressible = map[string]string{
	"sizing/refused/send_tso":                   "IBV_QP_EX_WITH_TSO: mlx5 has no TSO",
	"sizing/refused/send_atomic_write":          "IBV_QP_EX_WITH_ATOMIC_WRITE: mlx5 has no ATOMIC_WRITE",
	"sizing/refused/mlx5_mr_list":               "MLX5DV_QP_EX_WITH_MR_LIST: mlx5 has no MR list work request",
	"sizing/refused/mlx5_memcpy_no_dma_mmo_cap": "MLX5DV_QP_EX_WITH_MEMCPY: mlx5 has no DMA memcpy",
}

// dcSizingDifferences are the dc sizing records mlx5 refuses where
// libmlx5 creates the DCI, with the reason.
var dcSizingDifferences = map[string]string{
	"sizing/ops_basic/swr0_ssge0_inl0": "a DCI of no send work requests can do nothing: ErrInvalid (docs/MLX5.md, a QP with no queue)",
}

// TestOracleDriverDC: dc.jsonl's setup and sizing, the oracle's dc
// program (libmlx5 44.0 on its fake kernel), through the public API on a
// recording kernel that answers as the fake kernel answered libmlx5: the
// context (QUERY_DEVICE_EX's dci_streams caps), the PD, the CQs, the
// three InfiniBand AHs (no kernel command), the four DCIs (all RC
// operations, 4 SGEs, inline 64; seven operations; 2^3 streams; 2^6
// streams on a 32-WQEBB ring), each created (the UAR, its mmap, QP_CREATE
// with mlx5_ib_create_qp: flags, sq_wqe_count, dci_streams, uidx, ...),
// its send caps queried and moved RESET->INIT->RTR->RTS; the SRQ; the two
// DCTs on it (access keys 0x0123456789abcdef and all ones) created, moved
// to INIT and to RTR, where they get their numbers; then the 24 sizings:
// DCIs created, queried, destroyed, and those libmlx5 refuses before any
// command (too many SGEs, too much inline data, too many WRs, streams
// over the caps: ErrInvalid; MKEY_CONFIGURE on a DCI: ErrUnsupported).
// The work requests, CQE scripts and resets of the same process are
// TestOracleDCPost's, TestOracleDCCompletions' and
// TestOracleDCIStreamReset's (the resets' DCIs are not recorded).
func TestOracleDriverDC(t *testing.T) {
	const file = "testdata/dc.jsonl"
	recs, order := recordsOf(t, file)
	o := newVerbsOracle(t, file)
	c, rest := o.open("setup/base")
	var pd *PD
	o.must("setup/base: alloc_pd", callsOf(rest, "DEVICE/INVOKE_WRITE/0x3"), func() (err error) { pd, err = c.AllocPD(); return })
	if pd == nil {
		t.FailNow()
	}
	var cq, cqEx *CQ
	var srq *SRQ
	qps := map[string]*QP{}
	sizings := 0
	for _, k := range order {
		rec := recs[k]
		if !strings.HasPrefix(k, "setup/") && !strings.HasPrefix(k, "sizing/") {
			continue
		}
		switch {
		case k == "setup/base":
		case k == "setup/query_device_dci_streams":
			// libmlx5 answers from what QUERY_DEVICE_EX said at open.
			var lib struct {
				Caps struct {
					Conc int `json:"max_log_num_concurent"`
					Err  int `json:"max_log_num_errored"`
				} `json:"dci_streams_caps"`
			}
			field(t, rec, "result", &lib)
			if want := (DCIStreams{lib.Caps.Conc, lib.Caps.Err}); c.caps.MaxDCIStreams != want || len(o.of(k)) != 0 {
				t.Errorf("%s: Caps.MaxDCIStreams %+v, libmlx5 %+v", k, c.caps.MaxDCIStreams, want)
			}
		case k == "setup/create_cq":
			o.must(k, o.of(k), func() (err error) { cq, err = c.CreateCQ(CQOptions{Entries: 256}); return })
		case k == "setup/create_cq_ex":
			// ibv_create_cq_ex sends what ibv_create_cq sends for its size.
			o.must(k, o.of(k), func() (err error) { cqEx, err = c.CreateCQ(CQOptions{Entries: 64}); return })
		case strings.HasPrefix(k, "setup/create_ah_"):
			var in dcAHAttr
			field(t, rec, "input.ah_attr", &in)
			o.must(k, o.of(k), func() error { _, err := pd.CreateAH(in.path(t)); return err })
		case strings.HasPrefix(k, "setup/create_dci_"):
			name := strings.TrimPrefix(k, "setup/create_")
			opt := dciOptions(t, rec, pd, cq)
			w := o.of(k)
			o.must(k, w, func() (err error) { qps[name], err = c.CreateQP(opt); return })
			checkQPN(t, k, qps[name], w)
			checkDCIGeometry(t, k, rec, "result", qps[name])
		case strings.HasPrefix(k, "setup/query_dci_"):
			var lib sendCaps
			field(t, rec, "result.init_attr_cap", &lib)
			o.query(k, o.of(k), qps[strings.TrimSuffix(strings.TrimPrefix(k, "setup/query_"), "_cap")], lib)
		case strings.HasPrefix(k, "setup/modify_dci_"):
			q := qps[strings.TrimSuffix(strings.TrimPrefix(k, "setup/modify_"), "_reset_to_rts")]
			w := o.of(k)
			if len(w) != 4 || q == nil {
				t.Fatalf("%s: %d modifies", k, len(w))
			}
			for i, to := range []QPState{QPStateReset, QPStateInit, QPStateRTR, QPStateRTS} {
				o.modifyTo(k+" to "+to.String(), w[i:i+1], q, QPTypeDCI, to, false)
			}
		case k == "setup/create_srq":
			o.must(k, o.of(k), func() (err error) { srq, err = c.CreateSRQ(SRQOptions{PD: pd, MaxWR: 16, MaxSGE: 1}); return })
			var lib struct {
				DV struct {
					SRQN uint32 `json:"srqn"`
				} `json:"dv"`
			}
			field(t, rec, "result", &lib)
			if srq == nil || srq.SRQN() != lib.DV.SRQN {
				t.Fatalf("%s: SRQ %v, libmlx5's SRQN %#x", k, srq, lib.DV.SRQN)
			}
		case strings.HasPrefix(k, "setup/create_dct"):
			name := strings.TrimPrefix(k, "setup/create_")
			var in struct {
				Key string `json:"dct_access_key"`
			}
			field(t, rec, "input", &in)
			key, err := strconv.ParseUint(in.Key, 0, 64)
			if err != nil {
				t.Fatal(err)
			}
			dcq := cq
			if name == "dct2" {
				dcq = cqEx
			}
			o.must(k, o.of(k), func() (err error) {
				qps[name], err = c.CreateQP(QPOptions{Type: QPTypeDCT, PD: pd, SendCQ: dcq, RecvCQ: dcq, SRQ: srq, DCAccessKey: key})
				return
			})
		case strings.HasPrefix(k, "setup/modify_dct"):
			name := strings.TrimPrefix(k, "setup/modify_")
			name = name[:strings.Index(name, "_")]
			var in struct {
				Access string `json:"qp_access_flags"`
				MinRNR uint8  `json:"min_rnr_timer"`
			}
			field(t, rec, "input", &in)
			a, mask := QPAttr{State: QPStateInit, Port: 1}, QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags
			for _, r := range strings.Split(in.Access, "|") {
				a.Access |= map[string]AccessFlags{"REMOTE_WRITE": AccessRemoteWrite, "REMOTE_READ": AccessRemoteRead, "REMOTE_ATOMIC": AccessRemoteAtomic}[r]
			}
			if strings.HasSuffix(k, "_init_to_rtr") {
				a = QPAttr{State: QPStateRTR, MinRNRTimer: in.MinRNR, Path: AddressPath{MTU: 5, LID: 2, Port: 1}}
				mask = QPAttrState | QPAttrPathMTU | QPAttrAV | QPAttrMinRNRTimer
			}
			q := qps[name]
			o.must(k, o.of(k), func() error { return q.Modify(&a, mask) })
			var after struct {
				QPN *uint32 `json:"qp_num_after"`
			}
			field(t, rec, "result", &after)
			if after.QPN != nil && q.QPN() != *after.QPN {
				t.Errorf("%s: DCT number %#x, libmlx5 %#x", k, q.QPN(), *after.QPN)
			}
		case strings.HasPrefix(k, "sizing/"):
			sizings++
			w := o.of(k)
			if why, ok := dcSizingUnexpressible[k]; ok {
				if len(w) != 0 {
					t.Errorf("%s: libmlx5 made %d calls", k, len(w))
				}
				t.Logf("%s: %s", k, why)
				continue
			}
			var ret int
			field(t, rec, "result.ret", &ret)
			opt := dciOptions(t, rec, pd, cq)
			if why, ok := dcSizingDifferences[k]; ok {
				ret = int(unix.EINVAL)
				t.Logf("%s: %s", k, why)
			}
			if ret != 0 {
				var q *QP
				err := o.do(k, nil, func() (err error) { q, err = c.CreateQP(opt); return })
				want := ErrInvalid
				if ret == int(unix.EOPNOTSUPP) {
					want = ErrUnsupported
				}
				if !errors.Is(err, unix.Errno(ret)) || !errors.Is(err, want) || q != nil {
					t.Errorf("%s: %v; libmlx5 refused with errno %d before any command", k, err, ret)
				} else {
					o.n["DCI refused"]++
				}
				continue
			}
			// The create's sizing as the driver makes it, against the
			// command libmlx5 sent and the caps it granted. (Not through
			// the recording kernel: with the four DCIs of the setup alive,
			// libmlx5 gives these DCIs shared BlueFlame registers, a new
			// UAR page each time until its quota of shared ones is
			// reached; mlx5 gives every QP a register of its own, reused
			// from the QPs closed before: docs/MLX5.md.)
			lim := c.caps.limits()
			ops := opt.SendOps
			if ops == 0 {
				ops = defaultOps(QPTypeDCI)
			}
			g, err := sqSize(&lim, QPTypeDCI, ops, opt.MaxSendWR, max(opt.MaxSendSGE, 1), opt.MaxInlineData)
			if err != nil {
				t.Errorf("%s: %v; libmlx5 made it", k, err)
				continue
			}
			var lib struct {
				SQ struct {
					WQECnt int `json:"wqe_cnt"`
				} `json:"sq"`
				Query sendCaps `json:"query_init_attr_cap"`
			}
			field(t, rec, "result", &lib)
			var drv mlx5abi.Mlx5IbCreateQp
			creates := callsOf(w, "QP/QP_CREATE")
			if len(creates) != 1 {
				t.Fatalf("%s: %d creates", k, len(creates))
			}
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&drv)), unsafe.Sizeof(drv)), creates[0].attr(t, "UHW_IN").in(t))
			if g.wqeCnt != lib.SQ.WQECnt || int(drv.SqWqeCount) != g.wqeCnt || (sendCaps{g.maxPost, g.maxSGE, g.maxInline}) != lib.Query {
				t.Errorf("%s: %d WQEBBs, caps %d/%d/%d; libmlx5 %d (sq_wqe_count %d), %+v", k, g.wqeCnt, g.maxPost, g.maxSGE, g.maxInline,
					lib.SQ.WQECnt, drv.SqWqeCount, lib.Query)
			} else {
				o.n["DCI sizing"]++
			}
		default:
			t.Fatalf("%s: not replayed", k)
		}
	}
	if sizings != 24 {
		t.Errorf("%d sizing records, want 24", sizings)
	}
	o.expect(map[string]int{"GET_CONTEXT": 1, "QUERY_DEVICE_EX": 1, "QUERY_PORT": 1, "ALLOC_PD": 1, "CQ_CREATE": 2,
		"UAR_OBJ_ALLOC": 3, "mmap": 3, "QP_CREATE": 6, "QUERY_QP": 4, "MODIFY_QP": 16, "MODIFY_QP_EX": 4, "SRQ_CREATE": 1,
		"DCI refused": 7, "DCI sizing": 13})
}

// dcAHAttr is a recorded InfiniBand AH.
type dcAHAttr struct {
	DLID       uint16 `json:"dlid"`
	SL         uint8  `json:"sl"`
	PathBits   uint8  `json:"src_path_bits"`
	StaticRate uint8  `json:"static_rate"`
	Port       uint8  `json:"port_num"`
	Global     int    `json:"is_global"`
	GRH        *struct {
		DGID      string `json:"dgid"`
		FlowLabel uint32 `json:"flow_label"`
		SGIDIndex uint8  `json:"sgid_index"`
		HopLimit  uint8  `json:"hop_limit"`
		TClass    uint8  `json:"traffic_class"`
	} `json:"grh"`
}

func (in *dcAHAttr) path(t *testing.T) AddressPath {
	p := AddressPath{Port: in.Port, LID: in.DLID, SL: in.SL, SrcPathBits: in.PathBits, StaticRate: in.StaticRate, GRH: in.Global != 0}
	if g := in.GRH; g != nil {
		gid := unhex(t, g.DGID)
		copy(p.GID[:], gid)
		p.FlowLabel, p.SGIDIndex, p.HopLimit, p.TrafficClass = g.FlowLabel, g.SGIDIndex, g.HopLimit, g.TClass
	}
	return p
}

// dciOptions are the options of a recorded DCI create. BIND_MW, among
// the send operations of dci_rc, sizes as LOCAL_INV (a UMR WQE) in
// libmlx5's _sq_overhead and LOCAL_INV is there too: mlx5, which has no
// memory windows, leaves it out.
func dciOptions(t *testing.T, rec map[string]any, pd *PD, cq *CQ) QPOptions {
	var in struct {
		Ops     string `json:"send_ops_flags"`
		MLX5Ops string `json:"mlx5_send_ops_flags"`
		WR      int    `json:"max_send_wr"`
		SGE     int    `json:"max_send_sge"`
		Inline  int    `json:"max_inline_data"`
		Streams *struct {
			Conc int `json:"log_num_concurent"`
			Err  int `json:"log_num_errored"`
		} `json:"dci_streams"`
	}
	field(t, rec, "input", &in)
	o := QPOptions{Type: QPTypeDCI, PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: in.WR, MaxSendSGE: in.SGE, MaxInlineData: in.Inline}
	if !strings.HasPrefix(in.Ops, "(none") {
		o.SendOps = opsOf(t, QPTypeDCI, strings.TrimSuffix(in.Ops, "|BIND_MW"))
	}
	if s := in.Streams; s != nil {
		o.DCIStreams = &DCIStreams{LogConcurrent: s.Conc, LogErrored: s.Err}
	}
	// MLX5DV_QP_EX_WITH_RAW_WQE changes nothing of the QP; MKEY_CONFIGURE
	// is mlx5's MkeyConfigure.
	o.MkeyConfigure = in.MLX5Ops == "MKEY_CONFIGURE"
	return o
}

// checkDCIGeometry compares a DCI's send queue with libmlx5's.
func checkDCIGeometry(t *testing.T, k string, rec map[string]any, at string, q *QP) {
	t.Helper()
	var lib struct {
		SQ struct {
			WQECnt int `json:"wqe_cnt"`
		} `json:"sq"`
		BF int `json:"bf_size"`
	}
	field(t, rec, at, &lib)
	if q == nil || len(q.sq.slots) != lib.SQ.WQECnt || (q.sq.bell != nil && q.sq.bell.BlueFlameSize() != lib.BF) {
		t.Errorf("%s: send queue of %d WQEBBs; libmlx5 %d", k, len(q.sq.slots), lib.SQ.WQECnt)
	}
}
