package mlx5

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/uverbs"
	"github.com/mlx5go/mlx5go/wqe"
	"golang.org/x/sys/unix"
)

// The driver layer against libmlx5: the public API (NewContext on a
// device that answers GET_CONTEXT, AllocPD, CreateCQ, CreateQP, Modify,
// Query, CreateSRQ, Arm, CreateAH, Close) called in the order the
// oracle's C programs called libibverbs and libmlx5, with the options
// their records' inputs translate to, on a recording kernel that answers
// every call as the oracle's fake kernel answered libmlx5 (new handles,
// outputs, errnos). Each call the driver makes is paired, in order, with
// the one libmlx5 made at that point, and compared: object, method,
// header, attribute ids, lengths and flags, the bytes of every input
// (the driver data mlx5 builds itself: struct mlx5_ib_create_cq,
// mlx5_ib_create_qp, mlx5_ib_create_srq, mlx5_ib_modify_qp, the PRM
// command of the DEVX INIT2INIT), the handles of objects, and the UAR
// pages it maps. A call libmlx5 made that the driver does not make, or
// one it makes that libmlx5 did not, fails the step.
//
// The context's caps, BlueFlame registers, user indexes and non-cached
// UAR come from the recorded GET_CONTEXT response, as libmlx5's do, so
// sq_wqe_count, rq_wqe_count, rq_wqe_shift, bfreg_index, uidx,
// ece_options, flags, cqe_size, uar_page_index and every other field of
// the driver data are the driver's own and compare exactly. What truly
// varies is masked, each in compareMasked with its reason:
//   - buffer and doorbell record addresses (buf_addr, db_addr): process
//     addresses; where libmlx5 sent 0 (a DCT) the driver must too, and a
//     DCT's access key in the union after them compares exactly;
//   - user handles: libmlx5's are pointers, the driver's its own (non-zero);
//   - the response pointer heading a legacy command: libmlx5's write
//     path needs it, the ioctl path does not and the driver sends 0;
//   - MLX5_QP_FLAG_SCATTER_CQE in mlx5_ib_create_qp.flags: the driver does
//     not ask for scatter to CQE (qp_verbs.go says why); that bit alone is
//     masked, every other flag bit compares;
//   - fds are compared by presence (the recorder hands out pipes);
//   - of an mmap only the length and offset are seen (the recording
//     device maps anonymous memory).
// Handles of objects are the fake kernel's, answered as recorded, so the
// driver must name them exactly as libmlx5 did.
//
// Where libmlx5 makes a call at another point (QUERY_DEVICE_EX, QUERY_PORT
// and the non-cached UAR at open) the driver must make it at the same
// point;
// where it makes one the driver has no counterpart for, the step leaves
// it out by name (skipCalls says why), and the counts at the end say how
// many of each kind were compared.
//
// Differences left, each where it arises:
//   - QP.Query's receive caps are the driver's own, libmlx5's the
//     kernel's (zero from the fake kernel): only the send caps compare;
//   - a RoCE AH's address vector is pinned by no record past its
//     destination MAC (the oracle posts on InfiniBand only).

// skipCalls are the recorded calls the driver layer does not make, by
// object/method or write command, with the reason.
var skipCalls = map[string]string{
	"DEVICE/INVOKE_WRITE/0x1":        "the INVOKE_WRITE probe libibverbs makes at open (refused, ENOSPC)",
	"MLX5_DEVX/DEVX_OTHER":           "libmlx5 reads QUERY_HCA_CAP at open; mlx5go when a feature needs it (mkeys)",
	"ASYNC_EVENT/ASYNC_EVENT_ALLOC":  "uverbs.Open allocates the async event file (a recording context has a pipe)",
	"DEVICE/INVOKE_WRITE/0x9":        "REG_MR: not part of the verbs objects compared here",
	"MR/MR_DESTROY":                  "the MR of REG_MR",
	"DEVICE/INVOKE_WRITE/0x22":       "QUERY_SRQ: the driver has no SRQ query (SRQ.Caps answers what it granted)",
	"MLX5_DEVX_OBJ/DEVX_OBJ_CREATE":  "mkeys and PSVs (umr and mkey tests compare them)",
	"MLX5_DEVX_OBJ/DEVX_OBJ_DESTROY": "mkeys and PSVs (umr and mkey tests compare them)",
}

// vkey is a recorded call's key in skipCalls.
func vkey(w *vcall) string {
	if w.Op == "mmap" {
		return "mmap"
	}
	k := w.want.Object + "/" + w.want.Method
	if w.WriteCmd != "" {
		k += "/" + w.WriteCmd
	}
	return k
}

// made is one call the driver made and the recorded call it was paired
// with; an mmap has no uverbs call.
type made struct {
	want *vcall
	call *uverbs.Call
	uar  seam.UAR
}

// mmapRec is a recorded mmap.
type mmapRec struct {
	Len    uint32 `json:"len"`
	Offset string `json:"offset"`
}

// verbsOracle is a recording kernel that answers the driver as the
// oracle's fake kernel answered libmlx5, for one context.
type verbsOracle struct {
	t     *testing.T
	calls []*vcall
	mmaps map[int]mmapRec // by seq
	want  []*vcall        // what the step's driver calls must be, in order
	made  []made
	step  string
	n     map[string]int // compared, by kind
	skip  map[string]int // recorded calls left out, by kind
	pipes []int
	uctx  *uverbs.Context
	dev   *oracleDevice
	// refuse, when not 0, answers calls past the recorded ones with this
	// errno and keeps them in refused: a call libmlx5 did not make.
	refuse  unix.Errno
	refused []*uverbs.Call
}

// oracleDevice is the kernel device on the recording context; its UAR
// pages are anonymous memory (the recording context has no device to map)
// and each map is paired with libmlx5's.
type oracleDevice struct {
	*kernelDevice
	o *verbsOracle
}

func (d *oracleDevice) MapUAR(u seam.UAR) ([]byte, error) {
	o := d.o
	if len(o.want) == 0 || o.want[0].Op != "mmap" {
		o.t.Errorf("%s: the driver maps UAR page %#x; libmlx5 %s", o.step, u.PageID, o.next())
	} else {
		o.made = append(o.made, made{want: o.want[0], uar: u})
		o.want = o.want[1:]
	}
	return unix.Mmap(-1, 0, int(u.MMapLength), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
}

func (d *oracleDevice) UnmapUAR(page []byte) error { return unix.Munmap(page) }

// newVerbsOracle loads the calls of the files, which must be records of
// one process (their sequence numbers order them).
func newVerbsOracle(t *testing.T, files ...string) *verbsOracle {
	o := &verbsOracle{t: t, mmaps: map[int]mmapRec{}, n: map[string]int{}, skip: map[string]int{}}
	for _, file := range files {
		o.load(file)
	}
	sort.SliceStable(o.calls, func(i, j int) bool { return o.calls[i].Seq < o.calls[j].Seq })
	t.Cleanup(func() {
		for _, p := range o.pipes {
			unix.Close(p)
		}
	})
	return o
}

func (o *verbsOracle) load(file string) {
	t := o.t
	o.calls = append(o.calls, loadCalls(t, file)...)
	// loadCalls keeps what the comparison needs of an ioctl; an mmap's
	// length and offset are read here.
	for _, raw := range loadLines(t, file) {
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				if x["op"] == "mmap" {
					b, _ := json.Marshal(x)
					var m mmapRec
					if err := json.Unmarshal(b, &m); err != nil {
						t.Fatal(err)
					}
					o.mmaps[int(x["seq"].(float64))] = m
					return
				}
				for _, y := range x {
					walk(y)
				}
			case []any:
				for _, y := range x {
					walk(y)
				}
			}
		}
		var rec any
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		walk(rec)
	}
}

// of returns the calls libmlx5 made in the record kase that the driver
// makes too, in order (skipCalls are counted as left out).
func (o *verbsOracle) of(kase string) []*vcall {
	var out []*vcall
	for _, w := range o.calls {
		if w.kase != kase || w.Op != "ioctl" && w.Op != "mmap" {
			continue
		}
		k := vkey(w)
		if _, skip := skipCalls[k]; skip {
			o.skip[k]++
			continue
		}
		out = append(out, w)
	}
	return out
}

// next describes the next expected call.
func (o *verbsOracle) next() string {
	if len(o.want) == 0 {
		return "made no more calls"
	}
	w := o.want[0]
	if w.Op == "mmap" {
		return fmt.Sprintf("mapped (seq %d)", w.Seq)
	}
	return fmt.Sprintf("made %v (seq %d)", w, w.Seq)
}

// describe names a call the driver made.
func describe(c *uverbs.Call) string {
	s := fmt.Sprintf("object %#x method %#x", c.Hdr.ObjectID, c.Hdr.MethodID)
	if cmd, ok := writeCmd(c); ok {
		s += fmt.Sprintf(" write command %#x", cmd)
	}
	return s
}

// writeCmd is an INVOKE_WRITE's command.
func writeCmd(c *uverbs.Call) (uint64, bool) {
	if c.Hdr.ObjectID != uverbsabi.UVERBS_OBJECT_DEVICE || c.Hdr.MethodID != uverbsabi.UVERBS_METHOD_INVOKE_WRITE {
		return 0, false
	}
	for _, a := range c.Attrs {
		if a.AttrID == uverbsabi.UVERBS_ATTR_WRITE_CMD {
			return a.Data, true
		}
	}
	return 0, false
}

// answer is the recorder: the driver's call must be the next recorded one
// (object, method, write command); it gets what the fake kernel answered.
func (o *verbsOracle) answer(c *uverbs.Call) unix.Errno {
	t := o.t
	if len(o.want) == 0 && o.refuse != 0 {
		o.refused = append(o.refused, c)
		return o.refuse
	}
	if len(o.want) == 0 || o.want[0].Op != "ioctl" || c.Hdr.ObjectID != o.want[0].want.ObjectID || c.Hdr.MethodID != o.want[0].want.MethodID {
		t.Errorf("%s: the driver made %s; libmlx5 %s", o.step, describe(c), o.next())
		return unix.EPROTO
	}
	w := o.want[0]
	if cmd, ok := writeCmd(c); ok {
		if want, _ := strconv.ParseUint(w.WriteCmd, 0, 64); cmd != want {
			t.Errorf("%s: the driver made write command %#x; libmlx5 %s", o.step, cmd, o.next())
			return unix.EPROTO
		}
	}
	o.want = o.want[1:]
	for i, a := range c.Attrs {
		for _, wa := range w.Attrs {
			if wa.AttrID != a.AttrID {
				continue
			}
			switch wa.Dir {
			case "idr_new", "fd_new":
				c.Attrs[i].Data = uint64(wa.Returned)
			case "out":
				copy(c.Data[i], wa.out(t))
			}
		}
	}
	if w.WriteCmd == "0x11" { // CREATE_COMP_CHANNEL: the fd must be one
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		o.pipes = append(o.pipes, p[1])
		for i, a := range c.Attrs {
			if a.AttrID == uverbsabi.UVERBS_ATTR_CORE_OUT {
				binary.LittleEndian.PutUint32(c.Data[i], uint32(p[0]))
			}
		}
	}
	o.made = append(o.made, made{want: w, call: c})
	return unix.Errno(w.Ret)
}

// do runs fn, which must make exactly the calls want, as step name, and
// compares each; it returns fn's error.
func (o *verbsOracle) do(name string, want []*vcall, fn func() error) error {
	t := o.t
	t.Helper()
	o.step, o.want, o.made = name, want, nil
	err := fn()
	if len(o.want) > 0 {
		t.Errorf("%s: the driver stopped; libmlx5 then %s", name, o.next())
	}
	for _, m := range o.made {
		o.compare(m)
	}
	o.want, o.made = nil, nil
	return err
}

// must is do for a step that must succeed.
func (o *verbsOracle) must(name string, want []*vcall, fn func() error) {
	o.t.Helper()
	if err := o.do(name, want, fn); err != nil {
		o.t.Errorf("%s: %v", name, err)
	}
}

// kindOf names a recorded call for the counts.
func kindOf(w *vcall) string {
	if w.Op == "mmap" {
		return "mmap"
	}
	switch w.WriteCmd {
	case "":
		return w.want.Method
	case "0x3":
		return "ALLOC_PD"
	case "0x1a":
		return "MODIFY_QP"
	case "0x8000001a":
		return "MODIFY_QP_EX"
	case "0x19":
		return "QUERY_QP"
	case "0x21":
		return "MODIFY_SRQ"
	case "0x11":
		return "CREATE_COMP_CHANNEL"
	case "0x5":
		return "CREATE_AH"
	case "0x80000001":
		return "QUERY_DEVICE_EX"
	}
	return "write " + w.WriteCmd
}

// inBytes is the input an attribute of the driver's call carries: the
// memory it points to, or its inline data.
func inBytes(c *uverbs.Call, i int) []byte {
	if c.Data[i] != nil {
		return c.Data[i]
	}
	return binary.LittleEndian.AppendUint64(nil, c.Attrs[i].Data)[:min(int(c.Attrs[i].Len), 8)]
}

// compare checks one call of the driver against libmlx5's, with the
// masks the file comment lists, and counts it if it is byte-exact.
func (o *verbsOracle) compare(m made) {
	w := m.want
	kind := kindOf(w)
	e := &errCollector{TB: o.t, name: fmt.Sprintf("%s: %s (seq %d)", o.step, kind, w.Seq)}
	defer func() {
		if r := recover(); r != nil && r != errStopCompare {
			panic(r)
		}
		if e.n == 0 {
			o.n[kind]++
		}
	}()
	if m.call == nil {
		// An mmap: the page the kernel's answer named, whole.
		rec, ok := o.mmaps[w.Seq]
		off, err := strconv.ParseUint(rec.Offset, 0, 64)
		if !ok || err != nil || m.uar.MMapLength != rec.Len || m.uar.MMapOffset != off {
			e.Errorf("the driver maps %d bytes at %#x; libmlx5 %d at %s", m.uar.MMapLength, m.uar.MMapOffset, rec.Len, rec.Offset)
		}
		return
	}
	c := m.call
	var masked []string
	switch kind {
	case "CQ_CREATE", "QP_CREATE", "SRQ_CREATE":
		masked = []string{"USER_HANDLE", "UHW_IN"}
	case "ALLOC_PD", "QUERY_QP", "CREATE_COMP_CHANNEL", "CREATE_AH":
		masked = []string{"CORE_IN"}
	}
	oracle.Compare(e, w.want, got(c), masked...)
	for i, wa := range w.Attrs {
		if i >= len(c.Attrs) {
			break
		}
		switch wa.Dir {
		case "idr_in", "idr_destroy":
			// Handles are the fake kernel's, answered as recorded: the
			// driver must name the same objects.
			if c.Attrs[i].Data != uint64(wa.Value) {
				e.Errorf("%s handle %d, libmlx5 %d", wa.Name, c.Attrs[i].Data, wa.Value)
			}
		case "in":
			compareMasked(e, kind, &wa, inBytes(c, i), wa.in(o.t))
		}
	}
}

// compareMasked compares the inputs compare passed over as masked.
func compareMasked(e *errCollector, kind string, wa *vattr, ours, lib []byte) {
	masked := wa.Name == "USER_HANDLE" || wa.Name == "UHW_IN" && (kind == "CQ_CREATE" || kind == "QP_CREATE" || kind == "SRQ_CREATE") ||
		wa.Name == "CORE_IN" && (kind == "ALLOC_PD" || kind == "QUERY_QP" || kind == "CREATE_COMP_CHANNEL" || kind == "CREATE_AH")
	if !masked {
		return // oracle.Compare compared it
	}
	if len(ours) != len(lib) {
		e.Errorf("%s of %d bytes, libmlx5 %d", wa.Name, len(ours), len(lib))
		return
	}
	zero := func(b []byte) bool { return bytes.Equal(b, make([]byte, len(b))) }
	// addr masks a process address: libmlx5's buffer or doorbell record
	// (or its object, as a user handle) is its own; the driver's must be
	// non-zero where libmlx5's is, and zero where libmlx5's is (a DCT has
	// no buffers).
	addr := func(field string, a, b []byte) {
		switch {
		case zero(b) && !zero(a):
			e.Errorf("%s %x, libmlx5 sent none", field, a)
		case !zero(b) && zero(a):
			e.Errorf("%s 0, libmlx5 sent one", field)
		}
	}
	exact := func(field string, a, b []byte) {
		if !bytes.Equal(a, b) {
			e.Errorf("%s\n %x\nlibmlx5\n %x", field, a, b)
		}
	}
	switch {
	case wa.Name == "USER_HANDLE":
		// libmlx5's user handle is a pointer to its object; the driver's
		// is the handle its events name the object by.
		addr("user handle", ours, lib)
	case kind == "CQ_CREATE":
		// struct mlx5_ib_create_cq: buf_addr, db_addr, then cqe_size,
		// cqe_comp_en, cqe_comp_res_format, flags, uar_page_index.
		addr("buf_addr", ours[0:8], lib[0:8])
		addr("db_addr", ours[8:16], lib[8:16])
		exact("mlx5_ib_create_cq after the addresses", ours[16:], lib[16:])
	case kind == "SRQ_CREATE":
		// struct mlx5_ib_create_srq: buf_addr, db_addr, then flags, uidx.
		addr("buf_addr", ours[0:8], lib[0:8])
		addr("db_addr", ours[8:16], lib[8:16])
		exact("mlx5_ib_create_srq after the addresses", ours[16:], lib[16:])
	case kind == "QP_CREATE":
		// struct mlx5_ib_create_qp: buf_addr, db_addr, sq_wqe_count,
		// rq_wqe_count, rq_wqe_shift, flags, uidx, bfreg_index, the
		// sq_buf_addr/access_key union, ece_options, dci_streams.
		addr("buf_addr", ours[0:8], lib[0:8])
		addr("db_addr", ours[8:16], lib[8:16])
		exact("sq_wqe_count, rq_wqe_count, rq_wqe_shift", ours[16:28], lib[16:28])
		// mlx5go does not ask for scatter to CQE (qp_verbs.go): that bit
		// alone may differ, and only as libmlx5 setting it.
		of, lf := le32(ours[28:]), le32(lib[28:])
		if of&mlx5abi.MLX5_QP_FLAG_SCATTER_CQE != 0 || of != lf&^mlx5abi.MLX5_QP_FLAG_SCATTER_CQE {
			e.Errorf("flags %#x, libmlx5 %#x (only MLX5_QP_FLAG_SCATTER_CQE may differ, clear here)", of, lf)
		}
		exact("uidx, bfreg_index, sq_buf_addr/access_key, ece_options, dci_streams", ours[32:], lib[32:])
	default: // CORE_IN
		// A legacy command with a response: libibverbs' write path puts
		// the response's address first; on the ioctl path the kernel
		// takes CORE_OUT and ignores it, and the driver sends 0.
		if p := binary.LittleEndian.Uint64(ours); p != 0 {
			e.Errorf("response pointer %#x, want 0 on the ioctl path", p)
		}
		rest, lrest := ours[8:], lib[8:]
		if kind == "CREATE_AH" {
			// struct ib_uverbs_create_ah: the user handle follows.
			addr("user handle", rest[:8], lrest[:8])
			rest, lrest = rest[8:], lrest[8:]
		}
		exact("CORE_IN after the response pointer", rest, lrest)
	}
}

// errCollector prefixes the oracle package's messages with the step and
// counts them; its Fatalf ends the comparison of the call.
type errCollector struct {
	testing.TB
	name string
	n    int
}

func (e *errCollector) Errorf(format string, args ...any) {
	e.TB.Helper()
	e.n++
	e.TB.Errorf("%s: %s", e.name, fmt.Sprintf(format, args...))
}

func (e *errCollector) Fatalf(format string, args ...any) {
	e.TB.Helper()
	e.Errorf(format, args...)
	panic(errStopCompare)
}

var errStopCompare = errors.New("stop")

// open opens a context as Open does, on the recording kernel: GET_CONTEXT
// with Open's request (compared with libmlx5's; the context keeps the
// recorded response), then NewContext, which reads that response and
// does what a verbs context does at open (libmlx5: the device query with
// struct mlx5_ib_query_device_resp, whose recorded answer gives the DCI
// stream caps; the port queries; the non-cached UAR). It returns the
// record's calls after those.
func (o *verbsOracle) open(kase string) (*Context, []*vcall) {
	return o.openDEVX(kase, true)
}

// openDEVX is open; without devx the context is the one Open makes when
// the kernel refuses DEVX (EPERM for a process without CAP_NET_RAW).
func (o *verbsOracle) openDEVX(kase string, devx bool) (*Context, []*vcall) {
	t := o.t
	name := kase
	if !devx {
		name += " (DEVX refused)"
	}
	o.uctx = uverbs.NewRecordingContext(uverbs.DriverMLX5, o.answer)
	t.Cleanup(func() { o.uctx.Close() })
	req, err := ucontextRequest(&Options{})
	if err != nil {
		t.Fatal(err)
	}
	all := o.of(kase)
	var get, init, rest []*vcall
	for _, w := range all {
		switch k := vkey(w); {
		case k == "DEVICE/GET_CONTEXT":
			get = append(get, w)
		case rest == nil && (k == "DEVICE/INVOKE_WRITE/0x80000001" || k == "DEVICE/QUERY_PORT" || k == "MLX5_UAR/UAR_OBJ_ALLOC" || k == "mmap"):
			init = append(init, w)
		default:
			rest = append(rest, w)
		}
	}
	out := make([]byte, len(bytesOf(&mlx5abi.Mlx5IbAllocUcontextResp{})))
	o.must(name+": GET_CONTEXT", get, func() error {
		return o.uctx.RecordGetContext(&uverbs.Options{DriverIn: bytesOf(&req), DriverOut: out})
	})
	o.dev = &oracleDevice{kernelDevice: &kernelDevice{ctx: o.uctx, devx: devx}, o: o}
	var c *Context
	o.must(name+": context", init, func() error {
		c = NewContext(o.dev)
		return nil
	})
	return c, rest
}

// expect checks the counts of what was compared.
func (o *verbsOracle) expect(want map[string]int) {
	t := o.t
	t.Helper()
	for kind, n := range want {
		if o.n[kind] != n {
			t.Errorf("%s: %d byte-exact, want %d", kind, o.n[kind], n)
		}
	}
	var kinds []string
	for kind := range o.n {
		if _, ok := want[kind]; !ok {
			kinds = append(kinds, kind)
		}
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		t.Errorf("%s: %d compared, not expected", kind, o.n[kind])
	}
	t.Logf("byte-exact: %v; left out: %v", o.n, o.skip)
}

// transition is a Modify's attributes and mask.
type transition struct {
	a    QPAttr
	mask QPAttrMask
}

// harnessModify is the move to state to that the oracle's harness makes
// (src/common.c, qp_modify_state), as a user of the driver asks for it:
// pkey index 0 and port 1 at INIT, with REMOTE_WRITE|REMOTE_READ|
// LOCAL_WRITE (RC) or the Q_Key 0x11111111 (UD), no access for a DCI;
// MTU 4096, DLID 2, port 1 at RTR, and for RC the destination QP 0x1234,
// RQ PSN 0, 16 responder resources, RNR timer 12 (UD: the state alone);
// timeout 14, 7 retries, 7 RNR retries, SQ PSN 0, 16 initiator depth at
// RTS (UD: SQ PSN 0; from SQD the state alone); the state alone to SQD
// and to RESET.
func harnessModify(typ QPType, to QPState, fromSQD bool) transition {
	a := QPAttr{State: to}
	mask := QPAttrState
	switch to {
	case QPStateInit:
		a.Port = 1
		mask |= QPAttrPKeyIndex | QPAttrPort
		switch typ {
		case QPTypeUD:
			a.QKey = 0x11111111
			mask |= QPAttrQKey
		case QPTypeDCI:
		default:
			a.Access = AccessRemoteWrite | AccessRemoteRead | AccessLocalWrite
			mask |= QPAttrAccessFlags
		}
	case QPStateRTR:
		if typ == QPTypeUD {
			break
		}
		a.Path = AddressPath{MTU: 5, LID: 2, Port: 1}
		mask |= QPAttrPathMTU | QPAttrAV
		if typ != QPTypeDCI {
			a.DestQPN, a.RQPSN, a.MaxDestRdAtomic, a.MinRNRTimer = 0x1234, 0, 16, 12
			mask |= QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
		}
	case QPStateRTS:
		switch {
		case fromSQD:
		case typ == QPTypeUD:
			mask |= QPAttrSQPSN
		default:
			a.Timeout, a.RetryCnt, a.RNRRetry, a.MaxRdAtomic = 14, 7, 7, 16
			mask |= QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrSQPSN | QPAttrMaxQPRdAtomic
		}
	}
	return transition{a, mask}
}

// modifyTo runs one harness transition of qp and compares its calls.
func (o *verbsOracle) modifyTo(step string, want []*vcall, qp *QP, typ QPType, to QPState, fromSQD bool) {
	o.t.Helper()
	tr := harnessModify(typ, to, fromSQD)
	o.must(step, want, func() error { return qp.Modify(&tr.a, tr.mask) })
}

// sendCaps is the send half of a QP's caps as the records give it.
type sendCaps struct {
	MaxSendWR     int `json:"max_send_wr"`
	MaxSendSGE    int `json:"max_send_sge"`
	MaxInlineData int `json:"max_inline_data"`
}

// query runs QP.Query(QPAttrCap) and checks the send caps libmlx5
// reported (ibv_query_qp answers them from its own QP; the receive caps
// are the kernel's, zero from the fake kernel, and the driver answers its
// own: not compared).
func (o *verbsOracle) query(step string, want []*vcall, qp *QP, lib sendCaps) {
	t := o.t
	t.Helper()
	var a QPAttr
	o.must(step, want, func() error {
		var err error
		a, err = qp.Query(QPAttrCap)
		return err
	})
	got := sendCaps{a.Caps.MaxSendWR, a.Caps.MaxSendSGE, a.Caps.MaxInlineData}
	if got != lib {
		t.Errorf("%s: send caps %+v, libmlx5 %+v", step, got, lib)
	}
}

// recordsOf returns a vector file's records by case.
func recordsOf(t *testing.T, file string) (map[string]map[string]any, []string) {
	recs := map[string]map[string]any{}
	var order []string
	for _, raw := range loadLines(t, file) {
		var r map[string]any
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		k := r["case"].(string)
		recs[k] = r
		order = append(order, k)
	}
	return recs, order
}

// field decodes the JSON at path (dot separated) of a record into v.
func field(t *testing.T, rec map[string]any, path string, v any) {
	t.Helper()
	var x any = rec
	for _, p := range strings.Split(path, ".") {
		m, ok := x.(map[string]any)
		if !ok {
			t.Fatalf("%v: no %s", rec["case"], path)
		}
		x = m[p]
	}
	b, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s: %v", rec["case"], path, err)
	}
}

// mainQPOptions are the main QP of create_cmds and datapath_setup
// (create_qp_rc_sig_pipelining: RC, 64/16 WRs, 1/1 SGEs, 512 bytes inline,
// RDMA_WRITE|SEND|RDMA_READ, MLX5DV_QP_CREATE_SIG_PIPELINING,
// MLX5DV_QP_EX_WITH_MKEY_CONFIGURE).
func mainQPOptions(pd *PD, cq *CQ) QPOptions {
	return QPOptions{Type: QPTypeRC, PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 64, MaxRecvWR: 16, MaxSendSGE: 1,
		MaxRecvSGE: 1, MaxInlineData: 512, SendOps: Opcodes(OpRDMAWrite, OpSend, OpRDMARead), SigPipelining: true,
		MkeyConfigure: true}
}

// checkQPN checks the QP number the driver took from the kernel's answer.
func checkQPN(t *testing.T, step string, qp *QP, w []*vcall) {
	t.Helper()
	for _, c := range w {
		if c.Op == "ioctl" && c.want.Method == "QP_CREATE" {
			if want := le32(c.attr(t, "RESP_QP_NUM").out(t)); qp != nil && qp.QPN() != want {
				t.Errorf("%s: QPN %#x, the kernel answered %#x", step, qp.QPN(), want)
			}
		}
	}
}

// TestOracleDriverCreateCmds: create_cmds.jsonl and dci.jsonl, one
// process: the context, the PD, the CQ, the signature-pipelining RC QP and
// its transitions (the DEVX INIT2INIT drain_sigerr after INIT),
// RTS->SQD->RTS, then the DCIs with streams, then the teardown.
func TestOracleDriverCreateCmds(t *testing.T) {
	o := newVerbsOracle(t, "testdata/create_cmds.jsonl", "testdata/dci.jsonl")
	c, _ := o.open("open_device")
	var pd *PD
	o.must("alloc_pd", o.of("alloc_pd"), func() (err error) { pd, err = c.AllocPD(); return })
	o.of("reg_mr") // left out
	var cq *CQ
	o.must("create_cq", o.of("create_cq"), func() (err error) { cq, err = c.CreateCQ(CQOptions{Entries: 256}); return })
	var qp *QP
	w := o.of("create_qp_rc_sig_pipelining")
	o.must("create_qp_rc_sig_pipelining", w, func() (err error) { qp, err = c.CreateQP(mainQPOptions(pd, cq)); return })
	checkQPN(t, "create_qp_rc_sig_pipelining", qp, w)
	if qp == nil {
		t.FailNow()
	}
	o.modifyTo("modify_qp_reset_to_init", o.of("modify_qp_reset_to_init"), qp, QPTypeRC, QPStateInit, false)
	o.modifyTo("modify_qp_init_to_rtr", o.of("modify_qp_init_to_rtr"), qp, QPTypeRC, QPStateRTR, false)
	o.modifyTo("modify_qp_rtr_to_rts", o.of("modify_qp_rtr_to_rts"), qp, QPTypeRC, QPStateRTS, false)
	o.modifyTo("modify_qp_rts_to_sqd", o.of("modify_qp_rts_to_sqd"), qp, QPTypeRC, QPStateSQD, false)
	o.modifyTo("modify_qp_sqd_to_rts", o.of("modify_qp_sqd_to_rts"), qp, QPTypeRC, QPStateRTS, true)
	for _, k := range []string{"create_mkey_block_signature", "destroy_mkey_block_signature", "create_mkey_indirect", "destroy_mkey_indirect"} {
		o.of(k) // left out
	}

	// dci.jsonl, later in the same process: the main QP holds user index
	// 0 and the first BlueFlame register of its UAR page. The harness
	// (src/harness.c, dci_cases) creates each DCI with 64 send WRs of 1
	// SGE and send_ops_flags SEND|RDMA_WRITE on the main CQ, moves it to
	// RTS, resets its streams 0, 0x1234 and the last one
	// (mlx5dv_dci_stream_id_reset: a DEVX RTS2RTS_QP on the QP) and
	// destroys it. libmlx5 read the general caps at open (qpc_extension,
	// which the reset needs); mlx5 reads them when a feature needs them:
	// the context gets what the fake kernel answered libmlx5.
	c.capsOnce.Do(func() { c.general = o.openCaps("open_device") })
	recs, order := recordsOf(t, "testdata/dci.jsonl")
	for _, k := range order {
		var in struct {
			Conc int `json:"log_num_concurent"`
			Err  int `json:"log_num_errored"`
			WR   int `json:"max_send_wr"`
			SGE  int `json:"max_send_sge"`
		}
		field(t, recs[k], "input", &in)
		var ret int
		field(t, recs[k], "result.create", &ret)
		all := o.of(k)
		var create, modify, reset, destroy []*vcall
		for _, w := range all {
			switch {
			case w.want.Method == "QP_CREATE":
				create = append(create, w)
			case w.want.Method == "QP_DESTROY":
				destroy = append(destroy, w)
			case w.want.Method == "DEVX_OBJ_MODIFY":
				reset = append(reset, w)
			default:
				modify = append(modify, w)
			}
		}
		opt := QPOptions{Type: QPTypeDCI, PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: in.WR, MaxSendSGE: in.SGE,
			SendOps: Opcodes(OpSend, OpRDMAWrite), DCIStreams: &DCIStreams{LogConcurrent: in.Conc, LogErrored: in.Err}}
		var dci *QP
		if ret == 0 && (len(create) != 1 || len(modify) != 3 || len(reset) != 3 || len(destroy) != 1) {
			t.Fatalf("%s: %d creates, %d modifies, %d resets, %d destroys recorded", k, len(create), len(modify), len(reset), len(destroy))
		}
		if ret != 0 {
			// libmlx5 refuses 2^7 stream channels before any command,
			// against the dci_streams_caps QUERY_DEVICE_EX's mlx5 response
			// gave it at open (max_log_num_concurent 6); so must the
			// driver, against Caps.MaxDCIStreams from the same answer.
			if len(create)+len(modify)+len(destroy) != 0 || c.caps.MaxDCIStreams != (DCIStreams{LogConcurrent: 6, LogErrored: 4}) {
				t.Fatalf("%s: %d calls recorded, caps %+v", k, len(create)+len(modify)+len(destroy), c.caps.MaxDCIStreams)
			}
			err := o.do(k+": create", nil, func() (err error) { dci, err = c.CreateQP(opt); return })
			if !errors.Is(err, unix.Errno(ret)) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "MaxDCIStreams") || dci != nil {
				t.Errorf("%s: %v; libmlx5 refused with errno %d before any command", k, err, ret)
			} else {
				o.n["DCI refused"]++
			}
			continue
		}
		err := o.do(k+": create", create, func() (err error) { dci, err = c.CreateQP(opt); return })
		if err != nil {
			t.Errorf("%s: %v", k, err)
			continue
		}
		checkQPN(t, k, dci, create)
		for i, to := range []QPState{QPStateInit, QPStateRTR, QPStateRTS} {
			o.modifyTo(fmt.Sprintf("%s: modify to %v", k, to), modify[i:i+1], dci, QPTypeDCI, to, false)
		}
		// The resets, as libmlx5 sent them; but stream 0x1234 of a DCI of
		// fewer streams, which mlx5 refuses without sending anything
		// (docs/MLX5.md; libmlx5 sends it, and the fake kernel says OK).
		for i, id := range []uint16{0, 0x1234, uint16(1<<in.Conc - 1)} {
			want := reset[i : i+1]
			beyond := id >= 1<<in.Conc
			if beyond {
				want = nil
			}
			err := o.do(fmt.Sprintf("%s: reset stream %#x", k, id), want, func() error { return dci.ResetDCIStream(id) })
			switch {
			case beyond && (!errors.Is(err, ErrInvalid) || !errors.Is(err, unix.EINVAL)):
				t.Errorf("%s: reset stream %#x of 2^%d: %v, want ErrInvalid", k, id, in.Conc, err)
			case beyond:
				o.n["reset refused"]++
			case err != nil:
				t.Errorf("%s: reset stream %#x: %v", k, id, err)
			}
		}
		o.must(k+": destroy", destroy, dci.Close)
	}

	o.must("teardown", o.of("teardown"), c.Close)
	o.expect(map[string]int{"GET_CONTEXT": 1, "QUERY_DEVICE_EX": 1, "QUERY_PORT": 1, "UAR_OBJ_ALLOC": 2, "mmap": 2,
		"ALLOC_PD": 1, "CQ_CREATE": 1, "QP_CREATE": 4, "MODIFY_QP": 14, "DEVX_OBJ_MODIFY": 7, "QP_DESTROY": 4,
		"CQ_DESTROY": 1, "PD_DESTROY": 1, "UAR_OBJ_DESTROY": 2, "DCI refused": 1, "reset refused": 3})
}

// openCaps is the capability area of the QUERY_HCA_CAP (general, current)
// libmlx5 made when it opened the device in record kase.
func (o *verbsOracle) openCaps(kase string) []byte {
	for _, w := range o.calls {
		if w.kase != kase || vkey(w) != "MLX5_DEVX/DEVX_OTHER" {
			continue
		}
		for i := range w.Attrs {
			if a := &w.Attrs[i]; a.Dir == "out" {
				if out := a.out(o.t); len(out) >= int(prm.QueryHcaCapOut.Layout().Size) {
					return prm.QueryHcaCapOut.Capability.Bytes(out)
				}
			}
		}
	}
	o.t.Fatalf("%s: no QUERY_HCA_CAP output", kase)
	return nil
}

// TestOracleDriverDatapathSetup: datapath_setup.jsonl, the --datapath
// process: the context, PD and CQ, the main QP (as create_cmds') moved
// RESET->INIT->RTR->RTS, a second CQ, the RC QP dp_rc (all nine send
// operations) and the UD QP dp_ud, each created, its send caps queried and
// moved to RTS; the two InfiniBand AHs the UD sends use; the teardown.
func TestOracleDriverDatapathSetup(t *testing.T) {
	o := newVerbsOracle(t, "testdata/datapath_setup.jsonl")
	recs, _ := recordsOf(t, "testdata/datapath_setup.jsonl")
	c, rest := o.open("datapath_setup/base")
	byKind := func(k string) []*vcall {
		var out []*vcall
		for _, w := range rest {
			if vkey(w) == k {
				out = append(out, w)
			}
		}
		return out
	}
	var pd *PD
	o.must("base: alloc_pd", byKind("DEVICE/INVOKE_WRITE/0x3"), func() (err error) { pd, err = c.AllocPD(); return })
	var cq *CQ
	o.must("base: create_cq", byKind("CQ/CQ_CREATE"), func() (err error) { cq, err = c.CreateCQ(CQOptions{Entries: 256}); return })
	var main *QP
	create := append(append(byKind("MLX5_UAR/UAR_OBJ_ALLOC"), byKind("mmap")...), byKind("QP/QP_CREATE")...)
	o.must("base: main_rc", create, func() (err error) { main, err = c.CreateQP(mainQPOptions(pd, cq)); return })
	checkQPN(t, "base: main_rc", main, create)
	if main == nil {
		t.FailNow()
	}
	// qp_to_rts: RESET, INIT (and the drain_sigerr INIT2INIT), RTR, RTS.
	mods := append(byKind("DEVICE/INVOKE_WRITE/0x1a"), byKind("MLX5_DEVX_OBJ/DEVX_OBJ_MODIFY")...)
	sort.SliceStable(mods, func(i, j int) bool { return mods[i].Seq < mods[j].Seq })
	toRTS := func(step string, qp *QP, typ QPType, want []*vcall) {
		t.Helper()
		for _, to := range []QPState{QPStateReset, QPStateInit, QPStateRTR, QPStateRTS} {
			n := 1
			if to == QPStateInit && qp.sigPipelining {
				n = 2
			}
			if len(want) < n {
				t.Fatalf("%s: libmlx5 made fewer modifies", step)
			}
			o.modifyTo(fmt.Sprintf("%s to %v", step, to), want[:n], qp, typ, to, false)
			want = want[n:]
		}
	}
	toRTS("base: main_rc", main, QPTypeRC, mods)

	var cq2 *CQ
	o.must("create_cq", o.of("datapath_setup/create_cq"), func() (err error) { cq2, err = c.CreateCQ(CQOptions{Entries: 256}); return })
	qps := map[string]*QP{}
	for _, q := range []struct {
		name string
		typ  QPType
	}{{"dp_rc", QPTypeRC}, {"dp_ud", QPTypeUD}} {
		var in struct {
			WR     int    `json:"max_send_wr"`
			RWR    int    `json:"max_recv_wr"`
			SGE    int    `json:"max_send_sge"`
			RSGE   int    `json:"max_recv_sge"`
			Inline int    `json:"max_inline_data"`
			Ops    string `json:"send_ops_flags"`
		}
		kase := "datapath_setup/create_qp_" + q.name
		field(t, recs[kase], "input", &in)
		opt := QPOptions{Type: q.typ, PD: pd, SendCQ: cq2, RecvCQ: cq2, MaxSendWR: in.WR, MaxRecvWR: in.RWR, MaxSendSGE: in.SGE,
			MaxRecvSGE: in.RSGE, MaxInlineData: in.Inline, SendOps: opsOf(t, q.typ, in.Ops)}
		var qp *QP
		w := o.of(kase)
		o.must(kase, w, func() (err error) { qp, err = c.CreateQP(opt); return })
		checkQPN(t, kase, qp, w)
		if qp == nil {
			t.FailNow()
		}
		qps[q.name] = qp
		var lib sendCaps
		field(t, recs["datapath_setup/query_qp_"+q.name+"_cap"], "result.send_cap", &lib)
		o.query("query_qp_"+q.name+"_cap", o.of("datapath_setup/query_qp_"+q.name+"_cap"), qp, lib)
		toRTS("modify_qp_"+q.name+"_reset_to_rts", qp, q.typ, o.of("datapath_setup/modify_qp_"+q.name+"_reset_to_rts"))
	}

	// The AHs: on InfiniBand libmlx5 builds the address vector itself and
	// makes no kernel command; the driver must make none either, and its
	// address vector must be the one libmlx5's UD sends carried
	// (../wqe/testdata/datapath.jsonl, the datagram segment of the
	// first WQEBB of each UD send, its Q_Key and remote QPN the WR's).
	sends := udSendsByAH(t)
	for _, name := range []string{"lid_0x22_sl3_path1", "grh_dgid_fe80_b859_rate3"} {
		kase := "datapath_setup/create_ah_" + name
		var in struct {
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
		field(t, recs[kase], "input.ah_attr", &in)
		path := AddressPath{Port: in.Port, LID: in.DLID, SL: in.SL, SrcPathBits: in.PathBits, StaticRate: in.StaticRate, GRH: in.Global != 0}
		if g := in.GRH; g != nil {
			gid, err := hex.DecodeString(g.DGID)
			if err != nil || len(gid) != 16 {
				t.Fatalf("%s: dgid %q", kase, g.DGID)
			}
			copy(path.GID[:], gid)
			path.FlowLabel, path.SGIDIndex, path.HopLimit, path.TrafficClass = g.FlowLabel, g.SGIDIndex, g.HopLimit, g.TClass
		}
		var ah *AH
		o.must(kase, o.of(kase), func() (err error) { ah, err = pd.CreateAH(path); return })
		if ah == nil {
			continue
		}
		s, ok := sends[name]
		if !ok {
			t.Fatalf("%s: no UD send of datapath.jsonl uses AH %s", kase, name)
		}
		var seg [wqe.DatagramSegSize]byte
		if err := wqe.PutDatagram(seg[:], &wqe.UD{AV: ah.av, RemoteQPN: s.qpn, QKey: s.qkey}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(seg[:], s.seg) {
			t.Errorf("%s: datagram segment with the AH's address vector\n %x\nlibmlx5's send (%s)\n %x", kase, seg, s.kase, s.seg)
		} else {
			o.n["AV"]++
		}
	}

	o.must("datapath_teardown", o.of("datapath_teardown"), func() error {
		for _, x := range []interface{ Close() error }{qps["dp_rc"], qps["dp_ud"], cq2} {
			if err := x.Close(); err != nil {
				return err
			}
		}
		return nil
	})
	// The AHs made no kernel command and destroy none (Close closes them).
	o.must("teardown", o.of("teardown"), c.Close)
	o.expect(map[string]int{"GET_CONTEXT": 1, "QUERY_DEVICE_EX": 1, "QUERY_PORT": 1, "UAR_OBJ_ALLOC": 3, "mmap": 3, "ALLOC_PD": 1,
		"CQ_CREATE": 2, "QP_CREATE": 3, "MODIFY_QP": 12, "DEVX_OBJ_MODIFY": 1, "QUERY_QP": 2, "AV": 2,
		"QP_DESTROY": 3, "CQ_DESTROY": 2, "PD_DESTROY": 1, "UAR_OBJ_DESTROY": 3})
}

// udSend is the datagram segment of a UD send libmlx5 built, by AH.
type udSend struct {
	kase      string
	qpn, qkey uint32
	seg       []byte
}

// udSendsByAH returns, for each AH name, the first UD send of
// datapath.jsonl that used it: the datagram segment (bytes 16 to 64 of
// its first WQEBB) and the WR's remote QPN and Q_Key.
func udSendsByAH(t *testing.T) map[string]udSend {
	out := map[string]udSend{}
	for _, raw := range loadLines(t, "../wqe/testdata/datapath.jsonl") {
		var r struct {
			Case  string `json:"case"`
			Input struct {
				Posts []struct {
					WRs []struct {
						UD *struct {
							AH struct {
								Name string `json:"name"`
							} `json:"ah"`
							RemoteQPN  string `json:"remote_qpn"`
							RemoteQKey string `json:"remote_qkey"`
						} `json:"ud"`
					} `json:"wrs"`
				} `json:"posts"`
			} `json:"input"`
			SQ *struct {
				WQEBBs []struct {
					Hex string `json:"hex"`
				} `json:"wqebbs"`
			} `json:"sq"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Input.Posts) == 0 || len(r.Input.Posts[0].WRs) == 0 || r.Input.Posts[0].WRs[0].UD == nil || r.SQ == nil || len(r.SQ.WQEBBs) == 0 {
			continue
		}
		u := r.Input.Posts[0].WRs[0].UD
		if _, ok := out[u.AH.Name]; ok {
			continue
		}
		b, err := hex.DecodeString(r.SQ.WQEBBs[0].Hex)
		qpn, err1 := strconv.ParseUint(u.RemoteQPN, 0, 32)
		qkey, err2 := strconv.ParseUint(u.RemoteQKey, 0, 32)
		if err != nil || err1 != nil || err2 != nil || len(b) < wqe.CtrlSegSize+wqe.DatagramSegSize {
			t.Fatalf("%s: WQEBB %q, remote QPN %q, Q_Key %q", r.Case, r.SQ.WQEBBs[0].Hex, u.RemoteQPN, u.RemoteQKey)
		}
		out[u.AH.Name] = udSend{kase: r.Case, qpn: uint32(qpn), qkey: uint32(qkey), seg: b[wqe.CtrlSegSize : wqe.CtrlSegSize+wqe.DatagramSegSize]}
	}
	return out
}

// modifyOf translates a verbs_cases modify record's input (ibv_modify_qp's
// attr_mask names and values) into QPAttr and QPAttrMask.
func modifyOf(t *testing.T, rec map[string]any) (QPAttr, QPAttrMask) {
	t.Helper()
	var in struct {
		Mask    string `json:"attr_mask"`
		State   string `json:"qp_state"`
		PKey    uint16 `json:"pkey_index"`
		Port    uint8  `json:"port_num"`
		Access  string `json:"qp_access_flags"`
		MTU     string `json:"path_mtu"`
		MinRNR  uint8  `json:"min_rnr_timer"`
		DestQPN uint32 `json:"dest_qp_num"`
		RQPSN   uint32 `json:"rq_psn"`
		SQPSN   uint32 `json:"sq_psn"`
		AH      *struct {
			DLID uint16 `json:"dlid"`
			SL   uint8  `json:"sl"`
			Port uint8  `json:"port_num"`
		} `json:"ah_attr"`
	}
	field(t, rec, "input", &in)
	masks := map[string]QPAttrMask{"STATE": QPAttrState, "PKEY_INDEX": QPAttrPKeyIndex, "PORT": QPAttrPort,
		"ACCESS_FLAGS": QPAttrAccessFlags, "PATH_MTU": QPAttrPathMTU, "AV": QPAttrAV, "MIN_RNR_TIMER": QPAttrMinRNRTimer,
		"DEST_QPN": QPAttrDestQPN, "RQ_PSN": QPAttrRQPSN, "SQ_PSN": QPAttrSQPSN}
	states := map[string]QPState{"RESET": QPStateReset, "INIT": QPStateInit, "RTR": QPStateRTR, "RTS": QPStateRTS}
	rights := map[string]AccessFlags{"LOCAL_WRITE": AccessLocalWrite, "REMOTE_WRITE": AccessRemoteWrite,
		"REMOTE_READ": AccessRemoteRead, "REMOTE_ATOMIC": AccessRemoteAtomic}
	mtus := map[string]uint8{"256": 1, "512": 2, "1024": 3, "2048": 4, "4096": 5}
	var mask QPAttrMask
	for _, n := range strings.Split(in.Mask, "|") {
		m, ok := masks[n]
		if !ok {
			t.Fatalf("%v: attr_mask %q", rec["case"], n)
		}
		mask |= m
	}
	a := QPAttr{State: states[in.State], PKeyIndex: in.PKey, Port: in.Port, DestQPN: in.DestQPN, RQPSN: in.RQPSN,
		SQPSN: in.SQPSN, MinRNRTimer: in.MinRNR}
	if _, ok := states[in.State]; !ok {
		t.Fatalf("%v: qp_state %q", rec["case"], in.State)
	}
	if in.Access != "" {
		for _, n := range strings.Split(in.Access, "|") {
			r, ok := rights[n]
			if !ok {
				t.Fatalf("%v: access %q", rec["case"], n)
			}
			a.Access |= r
		}
	}
	if in.MTU != "" {
		a.Path.MTU = mtus[in.MTU]
	}
	if in.AH != nil {
		a.Path.LID, a.Path.SL, a.Path.Port = in.AH.DLID, in.AH.SL, in.AH.Port
	}
	return a, mask
}

// callsOf splits calls by kind (vkey).
func callsOf(ws []*vcall, kinds ...string) []*vcall {
	var out []*vcall
	for _, w := range ws {
		for _, k := range kinds {
			if vkey(w) == k {
				out = append(out, w)
			}
		}
	}
	return out
}

// srqDivergences are the SRQs of verbs_cases.jsonl that libmlx5 asked the
// (fake) kernel for and the driver refuses before any command, with the
// reason.
var srqDivergences = map[string]string{
	"srq/wr16_sge32_limit0/create": "libmlx5 tells the kernel max_sge 63, the SGEs its 1024-byte WQE holds, " +
		"and mlx5_ib_create_srq refuses more than max_wqe_sz_rq / 16 = 32 (EINVAL); the fake kernel checks nothing",
}

// TestOracleDriverVerbsCases: verbs_cases.jsonl, the oracle's verbs
// program: SRQs (created, their limit armed, destroyed; the refused
// sizes), a DCT on an SRQ and its extended modifies, a UC QP, contexts
// opened as ibv_open_device and mlx5dv_open_device without flags open
// them, 28 RC sizings (created, their send caps queried, destroyed; the
// four refused), a CQ on a completion channel, a RoCE AH on a context of
// its own, the teardown.
func TestOracleDriverVerbsCases(t *testing.T) {
	const file = "testdata/verbs_cases.jsonl"
	recs, order := recordsOf(t, file)
	o := newVerbsOracle(t, file)
	c, rest := o.open("verbs/base")
	var pd *PD
	o.must("verbs/base: alloc_pd", callsOf(rest, "DEVICE/INVOKE_WRITE/0x3"), func() (err error) { pd, err = c.AllocPD(); return })
	var cq *CQ
	o.must("verbs/base: create_cq", callsOf(rest, "CQ/CQ_CREATE"), func() (err error) { cq, err = c.CreateCQ(CQOptions{Entries: 256}); return })
	if pd == nil || cq == nil {
		t.FailNow()
	}
	srqs := map[string]*SRQ{}
	qps := map[string]*QP{}
	others := map[string]*verbsOracle{} // contexts of their own, by record prefix
	var ctxs = map[string]*Context{}
	var ccq *CQ
	var rocePD *PD
	var roceAH *AH
	for _, k := range order {
		rec := recs[k]
		var ret int
		if res, ok := rec["result"].(map[string]any); ok {
			if r, ok := res["ret"].(float64); ok {
				ret = int(r)
			}
		}
		obj, act := k, ""
		if i := strings.LastIndex(k, "/"); i >= 0 {
			obj, act = k[:i], k[i+1:]
		}
		switch {
		case k == "verbs/base" || k == "teardown":
		case strings.HasPrefix(k, "srq/"):
			switch act {
			case "create":
				var in struct {
					WR    int `json:"max_wr"`
					SGE   int `json:"max_sge"`
					Limit int `json:"srq_limit"`
				}
				field(t, rec, "input", &in)
				var s *SRQ
				w := o.of(k)
				if why, ok := srqDivergences[k]; ok {
					// Refused before the command libmlx5 sent, which the
					// fake kernel took.
					err := o.do(k, nil, func() (err error) {
						_, err = c.CreateSRQ(SRQOptions{PD: pd, MaxWR: in.WR, MaxSGE: in.SGE, Limit: in.Limit})
						return
					})
					if !errors.Is(err, ErrInvalid) || !errors.Is(err, unix.EINVAL) {
						t.Errorf("%s: %v; %s: want ErrInvalid (EINVAL)", k, err, why)
					} else {
						o.n["SRQ refused"]++
					}
					continue
				}
				err := o.do(k, w, func() (err error) {
					s, err = c.CreateSRQ(SRQOptions{PD: pd, MaxWR: in.WR, MaxSGE: in.SGE, Limit: in.Limit})
					return
				})
				if ret != 0 {
					if !errors.Is(err, unix.Errno(ret)) {
						t.Errorf("%s: %v, libmlx5 failed with errno %d before any command", k, err, ret)
					} else {
						o.n["SRQ refused"]++
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: %v", k, err)
					continue
				}
				var lib struct {
					Attr struct {
						MaxWR  int `json:"max_wr"`
						MaxSGE int `json:"max_sge"`
					} `json:"attr_after"`
					DV struct {
						SRQN uint32 `json:"srqn"`
					} `json:"dv"`
				}
				field(t, rec, "result", &lib)
				if got := (SRQCaps{MaxWR: lib.Attr.MaxWR, MaxSGE: lib.Attr.MaxSGE}); s.Caps() != got || s.SRQN() != lib.DV.SRQN {
					t.Errorf("%s: caps %+v, SRQN %#x; libmlx5 %+v, %#x", k, s.Caps(), s.SRQN(), got, lib.DV.SRQN)
				}
				srqs[obj] = s
			case "query", "query_after_modify":
				o.of(k) // QUERY_SRQ, left out
			case "destroy":
				if srqs[obj] == nil {
					if _, ok := srqDivergences[obj+"/create"]; ok {
						o.of(k) // the SRQ libmlx5 made and mlx5go refused
						break
					}
				}
				o.must(k, o.of(k), srqs[obj].Close)
			case "modify_limit_4":
				var in struct {
					Limit int `json:"srq_limit"`
				}
				field(t, rec, "input", &in)
				o.must(k, o.of(k), func() error { return srqs[obj].Arm(in.Limit) })
			default:
				t.Fatalf("%s: not replayed", k)
			}
		case strings.HasPrefix(k, "dct/") || strings.HasPrefix(k, "uc/"):
			switch {
			case k == "dct/create":
				var in struct {
					Key string `json:"dct_access_key"`
					SRQ string `json:"srq"`
				}
				field(t, rec, "input", &in)
				key, err := strconv.ParseUint(in.Key, 0, 64)
				if err != nil || srqs[in.SRQ] == nil {
					t.Fatalf("%s: access key %q, SRQ %q", k, in.Key, in.SRQ)
				}
				w := o.of(k)
				o.must(k, w, func() (err error) {
					qps[obj], err = c.CreateQP(QPOptions{Type: QPTypeDCT, PD: pd, SendCQ: cq, RecvCQ: cq, SRQ: srqs[in.SRQ], DCAccessKey: key})
					return
				})
				checkQPN(t, k, qps[obj], w)
			case k == "uc/create":
				var in struct {
					WR     int `json:"max_send_wr"`
					RWR    int `json:"max_recv_wr"`
					SGE    int `json:"max_send_sge"`
					RSGE   int `json:"max_recv_sge"`
					Inline int `json:"max_inline_data"`
				}
				field(t, rec, "input", &in)
				w := o.of(k)
				o.must(k, w, func() (err error) {
					qps[obj], err = c.CreateQP(QPOptions{Type: QPTypeUC, PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: in.WR, MaxRecvWR: in.RWR,
						MaxSendSGE: in.SGE, MaxRecvSGE: in.RSGE, MaxInlineData: in.Inline})
					return
				})
				checkQPN(t, k, qps[obj], w)
			case qps[obj] == nil:
				t.Fatalf("%s: no QP", k)
			case act == "query_cap":
				var lib sendCaps
				field(t, rec, "result.init_attr_cap", &lib)
				o.query(k, o.of(k), qps[obj], lib)
			case strings.HasPrefix(act, "modify_"):
				a, mask := modifyOf(t, rec)
				o.must(k, o.of(k), func() error { return qps[obj].Modify(&a, mask) })
				var after struct {
					QPN *uint32 `json:"qp_num_after"`
				}
				field(t, rec, "result", &after)
				if after.QPN != nil && qps[obj].QPN() != *after.QPN {
					// A DCT gets its number at RTR, in the extended
					// modify's response (modify_dct).
					t.Errorf("%s: QPN %#x, libmlx5's %#x", k, qps[obj].QPN(), *after.QPN)
				}
			case act == "destroy":
				o.must(k, o.of(k), qps[obj].Close)
			default:
				t.Fatalf("%s: not replayed", k)
			}
		case strings.HasPrefix(k, "open_no_devx/"):
			if act == "close" {
				for _, v := range []string{"", " (DEVX refused)"} {
					x := others[obj+v]
					x.must(k+v, x.of(k), ctxs[obj+v].Close)
				}
				continue
			}
			// What ibv_open_device and mlx5dv_open_device without flags
			// open: libmlx5 44.0 asks for DEVX all the same (its request
			// is Open's, TestOracleContextWithoutDEVX) and the fake kernel
			// grants it. Then the context Open makes when the kernel
			// refuses DEVX: mlx5_init_context's port queries and
			// non-cached UAR do not depend on DEVX, so it must make the
			// same calls.
			for _, v := range []string{"", " (DEVX refused)"} {
				x := newVerbsOracle(t, file)
				others[k+v] = x
				ctxs[k+v], _ = x.openDEVX(k, v == "")
				if c := ctxs[k+v]; c.DEVX() != (v == "") {
					t.Errorf("%s%s: DEVX %v", k, v, c.DEVX())
				}
			}
		case strings.HasPrefix(k, "rc_sizing/"):
			var in struct {
				API    string `json:"api"`
				WR     int    `json:"max_send_wr"`
				RWR    int    `json:"max_recv_wr"`
				SGE    int    `json:"max_send_sge"`
				RSGE   int    `json:"max_recv_sge"`
				Inline int    `json:"max_inline_data"`
				Ops    string `json:"send_ops_flags"`
			}
			field(t, rec, "input", &in)
			opt := QPOptions{Type: QPTypeRC, PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: in.WR, MaxRecvWR: in.RWR,
				MaxSendSGE: in.SGE, MaxRecvSGE: in.RSGE, MaxInlineData: in.Inline}
			if in.API == "ibv_create_qp_ex" {
				opt.SendOps = opsOf(t, QPTypeRC, in.Ops)
			}
			all := o.of(k)
			var qp *QP
			create := callsOf(all, "QP/QP_CREATE")
			err := o.do(k+": create", create, func() (err error) { qp, err = c.CreateQP(opt); return })
			if ret != 0 {
				if !errors.Is(err, unix.Errno(ret)) || len(all) != 0 {
					t.Errorf("%s: %v, libmlx5 failed with errno %d before any command", k, err, ret)
				} else {
					o.n["QP refused"]++
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", k, err)
				continue
			}
			checkQPN(t, k, qp, create)
			if in.WR == 0 {
				// A QP without a send queue refuses sends (and makes no
				// call: posting never does).
				if err := qp.PostSend(&SendWR{Opcode: OpSend}); !errors.Is(err, ErrInvalid) {
					t.Errorf("%s: a send on a QP without a send queue: %v, want ErrInvalid", k, err)
				}
			}
			var lib sendCaps
			field(t, rec, "result.query_init_attr_cap", &lib)
			o.query(k+": query", callsOf(all, "DEVICE/INVOKE_WRITE/0x19"), qp, lib)
			o.must(k+": destroy", callsOf(all, "QP/QP_DESTROY"), qp.Close)
		case k == "comp_channel/create":
			// ibv_create_comp_channel, then ibv_create_cq on it: one
			// CreateCQ with Events.
		case k == "comp_channel/create_cq":
			var in struct {
				CQE    int    `json:"cqe"`
				Vector uint32 `json:"comp_vector"`
			}
			field(t, rec, "input", &in)
			w := append(o.of("comp_channel/create"), o.of(k)...)
			o.must("comp_channel/create+create_cq", w, func() (err error) {
				ccq, err = c.CreateCQ(CQOptions{Entries: in.CQE, Vector: in.Vector, Events: true})
				return
			})
			var lib struct {
				CQE int `json:"cqe"`
			}
			field(t, rec, "result", &lib)
			if ccq != nil && ccq.Size()-1 != lib.CQE {
				t.Errorf("%s: %d CQEs, libmlx5 granted %d", k, ccq.Size()-1, lib.CQE)
			}
		case k == "comp_channel/destroy_cq":
			o.must(k, o.of(k), ccq.Close)
		case k == "comp_channel/destroy":
			// The channel went with the CQ; libmlx5 closes its fd: no
			// command either way.
			o.must(k, o.of(k), func() error { return nil })
		case strings.HasPrefix(k, "roce/"):
			x := others["roce"]
			switch act {
			case "open_device":
				x = newVerbsOracle(t, file)
				others["roce"] = x
				var rest []*vcall
				ctxs["roce"], rest = x.open(k)
				x.must(k+": alloc_pd", rest, func() (err error) { rocePD, err = ctxs["roce"].AllocPD(); return })
			case "create_ah":
				var in struct {
					DGID       string `json:"dgid"`
					FlowLabel  uint32 `json:"flow_label"`
					SGIDIndex  uint8  `json:"sgid_index"`
					HopLimit   uint8  `json:"hop_limit"`
					TClass     uint8  `json:"traffic_class"`
					SL         uint8  `json:"sl"`
					Global     int    `json:"is_global"`
					StaticRate uint8  `json:"static_rate"`
					Port       uint8  `json:"port_num"`
				}
				field(t, rec, "input.ah_attr", &in)
				path := AddressPath{Port: in.Port, SL: in.SL, StaticRate: in.StaticRate, GRH: in.Global != 0, FlowLabel: in.FlowLabel,
					SGIDIndex: in.SGIDIndex, HopLimit: in.HopLimit, TrafficClass: in.TClass}
				gid, err := hex.DecodeString(in.DGID)
				if err != nil || len(gid) != 16 {
					t.Fatalf("%s: dgid %q", k, in.DGID)
				}
				copy(path.GID[:], gid)
				w := x.of(k)
				x.must(k, w, func() (err error) { roceAH, err = rocePD.CreateAH(path); return })
				// The address vector's destination MAC is the one the
				// kernel answered (mlx5_ib_create_ah_resp.dmac).
				for _, c := range callsOf(w, "DEVICE/INVOKE_WRITE/0x5") {
					var resp mlx5abi.Mlx5IbCreateAhResp
					copy(bytesOf(&resp), c.attr(t, "UHW_OUT").out(t))
					if roceAH != nil && roceAH.av.RMAC != resp.Dmac {
						t.Errorf("%s: rmac %x, the kernel answered %x", k, roceAH.av.RMAC, resp.Dmac)
					} else if roceAH != nil {
						x.n["RMAC"]++
					}
				}
			case "destroy_ah":
				if roceAH == nil {
					t.Fatalf("%s: no AH", k)
				}
				x.must(k, x.of(k), roceAH.Close)
			case "close":
				x.must(k, x.of(k), ctxs["roce"].Close)
			default:
				t.Fatalf("%s: not replayed", k)
			}
		default:
			t.Fatalf("%s: not replayed", k)
		}
	}
	o.must("teardown", o.of("teardown"), c.Close)
	for _, x := range others {
		for kind, n := range x.n {
			o.n[kind] += n
		}
		for kind, n := range x.skip {
			o.skip[kind] += n
		}
	}
	o.expect(map[string]int{"GET_CONTEXT": 6, "QUERY_DEVICE_EX": 6, "QUERY_PORT": 6, "UAR_OBJ_ALLOC": 7, "mmap": 7, "UAR_OBJ_DESTROY": 7,
		"ALLOC_PD": 2, "PD_DESTROY": 2, "CQ_CREATE": 2, "CQ_DESTROY": 2, "CREATE_COMP_CHANNEL": 1,
		"SRQ_CREATE": 11, "SRQ_DESTROY": 11, "MODIFY_SRQ": 1, "SRQ refused": 3,
		"QP_CREATE": 26, "QP_DESTROY": 26, "QUERY_QP": 25, "MODIFY_QP": 3, "MODIFY_QP_EX": 2, "QP refused": 4,
		"QUERY_GID_ENTRY": 1, "CREATE_AH": 1, "RMAC": 1, "AH_DESTROY": 1})
}
