package mlx5

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/wqe"

	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// recorded is a Context whose kernel is a recorder: the last call is kept,
// new handles are 779 (as the oracle's fake kernel gave) and output
// mailboxes are left as the test set them.
type recorded struct {
	*Context
	last  *uverbs.Call
	errno unix.Errno
	fill  func(*uverbs.Call)
}

func newRecorded(t *testing.T) *recorded {
	r := &recorded{}
	uctx := uverbs.NewRecordingContext(uverbs.DriverMLX5, func(c *uverbs.Call) unix.Errno {
		r.last = c
		for i, a := range c.Attrs {
			if a.Flags&uverbsabi.UVERBS_ATTR_F_MANDATORY != 0 && a.Len == 0 && a.Data == 0 {
				c.Attrs[i].Data = 779 // a new object's handle
			}
		}
		if r.fill != nil {
			r.fill(c)
		}
		return r.errno
	})
	r.Context = NewContext(&kernelDevice{ctx: uctx, devx: true})
	t.Cleanup(func() { r.Close() })
	return r
}

// got converts a recorded call for oracle.Compare.
func got(c *uverbs.Call) oracle.Got {
	if c == nil {
		return oracle.Got{}
	}
	g := oracle.Got{ObjectID: c.Hdr.ObjectID, MethodID: c.Hdr.MethodID, Length: c.Hdr.Length,
		NumAttrs: c.Hdr.NumAttrs, DriverID: uint32(c.Hdr.DriverID)}
	for i, a := range c.Attrs {
		g.Attrs = append(g.Attrs, oracle.GotAttr{ID: a.AttrID, Len: a.Len, Flags: a.Flags, Data: a.Data, Bytes: c.Data[i]})
	}
	return g
}

func devxCase(t *testing.T, kase string) oracle.Case {
	return oracle.Load(t, "testdata/devx.jsonl", kase)
}

func inputOf(t *testing.T, c oracle.Case) (in []byte, outLen int) {
	t.Helper()
	var v struct {
		InHex  string `json:"in_hex"`
		OutLen int    `json:"outlen"`
	}
	if err := jsonUnmarshal(c.Input, &v); err != nil {
		t.Fatal(err)
	}
	in, err := hex.DecodeString(v.InHex)
	if err != nil {
		t.Fatal(err)
	}
	return in, v.OutLen
}

func TestOracleDevxGeneralCmd(t *testing.T) {
	for _, opmod := range []string{"0x0", "0x1", "0x3", "0x5", "0x41"} {
		c := devxCase(t, "general_cmd/query_hca_cap/op_mod_"+opmod)
		in, outLen := inputOf(t, c)
		r := newRecorded(t)
		if err := r.GeneralCmd(in, make([]byte, outLen)); err != nil {
			t.Fatal(err)
		}
		oracle.Compare(t, c.Find(t, "MLX5_DEVX", "DEVX_OTHER"), got(r.last))
	}
}

func TestOracleDevxObjLifecycle(t *testing.T) {
	r := newRecorded(t)
	create := devxCase(t, "obj_create/create_mkey")
	in, _ := inputOf(t, create)
	obj, err := r.CreateObj(in, make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	oracle.Compare(t, create.Find(t, "MLX5_DEVX_OBJ", "DEVX_OBJ_CREATE"), got(r.last))
	if obj.handle != 779 {
		t.Errorf("handle %d, want the kernel's 779", obj.handle)
	}

	query := devxCase(t, "obj_query/query_mkey")
	in, outLen := inputOf(t, query)
	if err := obj.Query(in, make([]byte, outLen)); err != nil {
		t.Fatal(err)
	}
	oracle.Compare(t, query.Find(t, "MLX5_DEVX_OBJ", "DEVX_OBJ_QUERY"), got(r.last))

	modify := devxCase(t, "obj_modify/generic")
	in, outLen = inputOf(t, modify)
	if err := obj.Modify(in, make([]byte, outLen)); err != nil {
		t.Fatal(err)
	}
	oracle.Compare(t, modify.Find(t, "MLX5_DEVX_OBJ", "DEVX_OBJ_MODIFY"), got(r.last))

	fdCase := devxCase(t, "async/create_cmd_comp")
	q := &AsyncCmdQueue{c: r.Context, fd: fakeAsyncFD{fd: 13}}
	// The FD allocation: the recorder hands back no real descriptor, so
	// only the call is compared.
	r.dev.(*kernelDevice).NewAsyncCmdFD()
	oracle.Compare(t, fdCase.Find(t, "MLX5_DEVX_ASYNC_CMD_FD", "DEVX_ASYNC_CMD_FD_ALLOC"), got(r.last))

	async := devxCase(t, "async/obj_query_async")
	in, outLen = inputOf(t, async)
	if err := obj.QueryAsync(in, outLen, 0x1122334455667788, q); err != nil {
		t.Fatal(err)
	}
	oracle.Compare(t, async.Find(t, "MLX5_DEVX_OBJ", "DEVX_OBJ_ASYNC_QUERY"), got(r.last))

	destroy := devxCase(t, "obj_destroy")
	if err := obj.Close(); err != nil {
		t.Fatal(err)
	}
	oracle.Compare(t, destroy.Find(t, "MLX5_DEVX_OBJ", "DEVX_OBJ_DESTROY"), got(r.last))
	r.last = nil
	if err := obj.Close(); err != nil || r.last != nil {
		t.Errorf("second close: %v, call %v", err, got(r.last))
	}
}

// A verbs QP's handle goes straight to DEVX query (mlx5dv_devx_qp_query).
func TestOracleDevxQPQuery(t *testing.T) {
	r := newRecorded(t)
	c := devxCase(t, "qp_query/query_qp")
	in, outLen := inputOf(t, c)
	qp := &QP{c: r.Context, handle: seam.Handle(6), name: "QP 0x1"} // the verbs QP libmlx5 queried
	if err := qp.DevxQuery(in, make([]byte, outLen)); err != nil {
		t.Fatal(err)
	}
	oracle.Compare(t, c.Find(t, "MLX5_DEVX_OBJ", "DEVX_OBJ_QUERY"), got(r.last))
}

func TestOracleUARAlloc(t *testing.T) {
	r := newRecorded(t)
	c := oracle.Load(t, "testdata/create_cmds.jsonl", "create_qp_rc_sig_pipelining")
	want := c.Find(t, "MLX5_UAR", "UAR_OBJ_ALLOC")
	r.fill = func(call *uverbs.Call) {
		binary.LittleEndian.PutUint64(call.Data[2], 0x182000)
		binary.LittleEndian.PutUint32(call.Data[3], 4096)
		binary.LittleEndian.PutUint32(call.Data[4], 0x82)
	}
	u, err := r.dev.UARAlloc(mlx5abi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF)
	if err != nil {
		t.Fatal(err)
	}
	oracle.Compare(t, want, got(r.last))
	if u.Handle != 779 || u.MMapOffset != 0x182000 || u.MMapLength != 4096 || u.PageID != 0x82 {
		t.Errorf("UAR %+v", u)
	}
}

// GET_CONTEXT's driver data is libmlx5's for mlx5dv_open_device with
// MLX5DV_CONTEXT_FLAGS_DEVX.
func TestOracleUcontextRequest(t *testing.T) {
	c := oracle.Load(t, "testdata/create_cmds.jsonl", "open_device")
	want := c.Find(t, "DEVICE", "GET_CONTEXT")
	req, err := ucontextRequest(&Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := hex.EncodeToString(unsafe.Slice((*byte)(unsafe.Pointer(&req)), unsafe.Sizeof(req)))
	if got != want.Attrs[2].Hex {
		t.Errorf("struct mlx5_ib_alloc_ucontext_req_v2\n %s\nlibmlx5\n %s", got, want.Attrs[2].Hex)
	}
	if want.Attrs[3].Len != uint16(unsafe.Sizeof(mlx5abi.Mlx5IbAllocUcontextResp{})) {
		t.Errorf("response of %d bytes, libmlx5 reads %d", unsafe.Sizeof(mlx5abi.Mlx5IbAllocUcontextResp{}), want.Attrs[3].Len)
	}
}

func TestFirmwareErrorFromMailbox(t *testing.T) {
	r := newRecorded(t)
	in, _ := hex.DecodeString("01000000000000010000000000000000") // QUERY_HCA_CAP
	r.fill = func(call *uverbs.Call) {
		out := call.Data[1]
		out[0] = 0x3 // BAD_PARAM
		binary.BigEndian.PutUint32(out[4:], 0x1234abcd)
	}
	err := r.GeneralCmd(in, make([]byte, 4112))
	var fe *prm.CmdError
	if !errors.As(err, &fe) || fe.Status != prm.MLX5_CMD_STAT_BAD_PARAM_ERR || fe.Syndrome != 0x1234abcd || fe.Opcode != prm.MLX5_CMD_OP_QUERY_HCA_CAP || fe.OpMod != 1 {
		t.Fatalf("error %v (%+v)", err, fe)
	}
	if !errors.Is(Checked(t, err), prm.MLX5_CMD_STAT_BAD_PARAM_ERR) {
		t.Errorf("errors.Is(BAD_PARAM) false for %v", err)
	}
	t.Log(err)
	// The kernel's EREMOTEIO carries the same mailbox.
	r.errno = unix.EREMOTEIO
	err = r.GeneralCmd(in, make([]byte, 4112))
	if !errors.As(err, &fe) || !errors.Is(Checked(t, err), unix.EREMOTEIO) {
		t.Errorf("with EREMOTEIO: %v", err)
	}
	// Other errnos are the kernel's.
	r.errno = unix.EINVAL
	r.fill = nil
	if err := r.GeneralCmd(in, make([]byte, 4112)); !errors.Is(Checked(t, err), unix.EINVAL) || errors.As(err, &fe) {
		t.Errorf("with EINVAL: %v", err)
	}
}

func TestDevxRejectsBadInput(t *testing.T) {
	r := newRecorded(t)
	for name, f := range map[string]func() error{
		"short input":  func() error { return r.GeneralCmd(make([]byte, 8), make([]byte, 16)) },
		"short output": func() error { return r.GeneralCmd(make([]byte, 16), make([]byte, 8)) },
		"odd length":   func() error { return r.GeneralCmd(make([]byte, 18), make([]byte, 16)) },
		"bad uar type": func() error { _, err := r.AllocUAR(7); return err },
		"empty umem":   func() error { _, err := r.RegUMem(nil, 0); return err },
		"async out too large": func() error {
			return (&DevxObj{c: r.Context}).QueryAsync(make([]byte, 16), 2<<20, 1, &AsyncCmdQueue{c: r.Context})
		},
	} {
		r.last = nil
		if err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
		if r.last != nil {
			t.Errorf("%s: a call reached the kernel", name)
		}
	}
	noDEVX := &Context{dev: r.dev, name: "context", devx: false}
	r.last = nil
	if err := noDEVX.GeneralCmd(make([]byte, 16), make([]byte, 16)); !errors.Is(Checked(t, err), ErrNoDEVX) || r.last != nil {
		t.Errorf("without DEVX: %v (sent: %v)", err, r.last != nil)
	}
	// QUERY_HCA_CAP is the kernel's to answer without DEVX (devx_get_uid's
	// whitelist uid).
	in := make([]byte, prm.QueryHcaCapIn.Layout().Size)
	prm.QueryHcaCapIn.Opcode.Set(in, prm.MLX5_CMD_OP_QUERY_HCA_CAP)
	if err := noDEVX.GeneralCmd(in, make([]byte, 4112)); err != nil || r.last == nil {
		t.Errorf("QUERY_HCA_CAP without DEVX: %v (sent: %v)", err, r.last != nil)
	}
}

func TestAsyncBacklogError(t *testing.T) {
	r := newRecorded(t)
	r.errno = unix.EAGAIN
	q := &AsyncCmdQueue{c: r.Context, fd: fakeAsyncFD{fd: 13}, name: "async cmd queue 13"}
	err := (&DevxObj{c: r.Context, handle: 779, name: "DEVX object 779"}).QueryAsync(make([]byte, 16), 256, 1, q)
	if !errors.Is(Checked(t, err), ErrAsyncBacklog) || !errors.Is(err, unix.EAGAIN) {
		t.Errorf("EAGAIN from the kernel: %v", err)
	}
}

type fakeAsyncFD struct{ fd int }

func (f fakeAsyncFD) Next(context.Context, []byte) (int, error) { return 0, errors.New("no kernel") }
func (f fakeAsyncFD) Fd() int                                   { return f.fd }
func (f fakeAsyncFD) Close() error                              { return nil }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func TestOracleQueryEQN(t *testing.T) {
	r := newRecorded(t)
	c := oracle.Load(t, "testdata/devx_query_eqn.jsonl", "query_eqn")
	r.fill = func(call *uverbs.Call) { binary.LittleEndian.PutUint32(call.Data[1], 7) }
	eqn, err := r.QueryEQN(3)
	if err != nil {
		t.Fatal(err)
	}
	oracle.Compare(t, c.Find(t, "MLX5_DEVX", "DEVX_QUERY_EQN"), got(r.last))
	if eqn != 7 {
		t.Errorf("eqn %d, want 7", eqn)
	}
}

// struct mlx5_ib_create_cq_resp is not in the kernel's BTF; its size is
// the response libmlx5 asked the kernel for.
func TestCreateCQRespSize(t *testing.T) {
	c := oracle.Load(t, "testdata/create_cmds.jsonl", "create_cq")
	want := c.Find(t, "CQ", "CQ_CREATE")
	for _, a := range want.Attrs {
		if a.Name == "UHW_OUT" && a.Len != uint16(unsafe.Sizeof(mlx5abi.Mlx5IbCreateCqResp{})) {
			t.Errorf("struct mlx5_ib_create_cq_resp: %d bytes, libmlx5 %d", unsafe.Sizeof(mlx5abi.Mlx5IbCreateCqResp{}), a.Len)
		}
		if a.Name == "UHW_IN" && a.Len != uint16(unsafe.Sizeof(mlx5abi.Mlx5IbCreateCq{})) {
			t.Errorf("struct mlx5_ib_create_cq: %d bytes, libmlx5 %d", unsafe.Sizeof(mlx5abi.Mlx5IbCreateCq{}), a.Len)
		}
	}
}

// The UAR types are the uapi's (internal/mlx5abi's, checked against BTF).
func TestUARTypesAreTheUAPIs(t *testing.T) {
	if UARBlueFlame != mlx5abi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF || UARNonCached != mlx5abi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC {
		t.Errorf("UARBlueFlame %d, UARNonCached %d; the uapi's %d, %d", UARBlueFlame, UARNonCached,
			mlx5abi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF, mlx5abi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC)
	}
}

// The user's types share the encoders' layouts (types.go passes lists of
// them to package wqe as they are) and the send flags their values.
func TestUserTypesAreTheEncoders(t *testing.T) {
	type layout struct{ size, align uintptr }
	for name, c := range map[string][2]layout{
		"SGE":         {{unsafe.Sizeof(SGE{}), unsafe.Alignof(SGE{})}, {unsafe.Sizeof(wqe.SGE{}), unsafe.Alignof(wqe.SGE{})}},
		"KLM":         {{unsafe.Sizeof(KLM{}), unsafe.Alignof(KLM{})}, {unsafe.Sizeof(wqe.KLM{}), unsafe.Alignof(wqe.KLM{})}},
		"RepeatEntry": {{unsafe.Sizeof(RepeatEntry{}), unsafe.Alignof(RepeatEntry{})}, {unsafe.Sizeof(wqe.RepeatEntry{}), unsafe.Alignof(wqe.RepeatEntry{})}},
	} {
		if c[0] != c[1] {
			t.Errorf("%s: size and alignment %v, wqe's %v", name, c[0], c[1])
		}
	}
	for name, offs := range map[string][2]uintptr{
		"SGE.Addr":              {unsafe.Offsetof(SGE{}.Addr), unsafe.Offsetof(wqe.SGE{}.Addr)},
		"SGE.Length":            {unsafe.Offsetof(SGE{}.Length), unsafe.Offsetof(wqe.SGE{}.Length)},
		"SGE.LKey":              {unsafe.Offsetof(SGE{}.LKey), unsafe.Offsetof(wqe.SGE{}.LKey)},
		"KLM.Addr":              {unsafe.Offsetof(KLM{}.Addr), unsafe.Offsetof(wqe.KLM{}.Addr)},
		"KLM.ByteCount":         {unsafe.Offsetof(KLM{}.ByteCount), unsafe.Offsetof(wqe.KLM{}.ByteCount)},
		"KLM.Mkey":              {unsafe.Offsetof(KLM{}.Mkey), unsafe.Offsetof(wqe.KLM{}.Mkey)},
		"RepeatEntry.Addr":      {unsafe.Offsetof(RepeatEntry{}.Addr), unsafe.Offsetof(wqe.RepeatEntry{}.Addr)},
		"RepeatEntry.ByteCount": {unsafe.Offsetof(RepeatEntry{}.ByteCount), unsafe.Offsetof(wqe.RepeatEntry{}.ByteCount)},
		"RepeatEntry.Skip":      {unsafe.Offsetof(RepeatEntry{}.Skip), unsafe.Offsetof(wqe.RepeatEntry{}.Skip)},
		"RepeatEntry.Mkey":      {unsafe.Offsetof(RepeatEntry{}.Mkey), unsafe.Offsetof(wqe.RepeatEntry{}.Mkey)},
	} {
		if offs[0] != offs[1] {
			t.Errorf("%s at %d, wqe's at %d", name, offs[0], offs[1])
		}
	}
	for f, w := range map[SendFlags]wqe.SendFlags{SendFence: wqe.SendFence, SendSignaled: wqe.SendSignaled,
		SendSolicited: wqe.SendSolicited, SendInline: wqe.SendInline} {
		if wqe.SendFlags(f) != w {
			t.Errorf("send flag %#x, wqe's %#x", f, w)
		}
	}
	sgl := []SGE{{Addr: 1, Length: 2, LKey: 3}, {Addr: 4, Length: 5, LKey: 6}}
	if got := wqeSGL(sgl); len(got) != 2 || got[1] != (wqe.SGE{Addr: 4, Length: 5, LKey: 6}) || wqeSGL(nil) != nil {
		t.Errorf("wqeSGL: %+v", got)
	}
}
