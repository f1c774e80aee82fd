package uverbs

import (
	"encoding/hex"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"golang.org/x/sys/unix"
)

// oracleCall is one RDMA_VERBS_IOCTL as ../shared/oracle recorded it.
type oracleCall = oracle.Call

func oracleCalls(t *testing.T, kase string) []oracleCall {
	t.Helper()
	return oracle.Load(t, "testdata/create_cmds.jsonl", kase).KernelCmds
}

func findCall(t *testing.T, calls []oracleCall, object, method string) oracleCall {
	t.Helper()
	for _, c := range calls {
		if c.Op == "ioctl" && c.Object == object && c.Method == method {
			return c
		}
	}
	t.Fatalf("oracle has no %s %s", object, method)
	return oracleCall{}
}

// capture runs fn with the system call replaced, recording the call.
func capture(t *testing.T, fn func()) (hdr uverbsabi.IbUverbsIoctlHdr, attrs []uverbsabi.IbUverbsAttr) {
	t.Helper()
	hdr, attrs, _ = captureData(t, fn)
	return hdr, attrs
}

// captureData is capture that also copies the memory each pointer
// attribute points to (nil for inline and handle attributes).
func captureData(t *testing.T, fn func()) (hdr uverbsabi.IbUverbsIoctlHdr, attrs []uverbsabi.IbUverbsAttr, data [][]byte) {
	t.Helper()
	ioctlHook = func(fd int, h *uverbsabi.IbUverbsIoctlHdr, a []uverbsabi.IbUverbsAttr, p []unsafe.Pointer) unix.Errno {
		hdr, attrs = *h, append([]uverbsabi.IbUverbsAttr(nil), a...)
		data = make([][]byte, len(a))
		for i := range a {
			if p[i] != nil {
				data[i] = append([]byte(nil), unsafe.Slice((*byte)(p[i]), a[i].Len)...)
			}
		}
		return 0
	}
	defer func() { ioctlHook = nil }()
	fn()
	return hdr, attrs, data
}

// skipVarying lists input attributes whose bytes the oracle marks as
// varying (process addresses): they are compared by length and flags only.
var skipVarying = map[string]bool{
	// struct ib_uverbs_alloc_pd.response: libibverbs fills in a stack
	// address the ioctl path never uses; mlx5go sends 0.
	"INVOKE_WRITE/CORE_IN": true,
	// user_handle: libibverbs sends its object's address, mlx5go a
	// per-context counter that names the object in async events.
	"CQ_CREATE/USER_HANDLE": true,
	"QP_CREATE/USER_HANDLE": true,
}

// compare checks a captured call against the oracle's. Pointer inputs are
// resolved through known, the buffers the test handed in, by address.
func compare(t *testing.T, want oracleCall, hdr uverbsabi.IbUverbsIoctlHdr, attrs []uverbsabi.IbUverbsAttr, known ...[]byte) {
	t.Helper()
	compareWith(t, want, hdr, attrs, func(i int) []byte {
		for _, k := range known {
			if len(k) > 0 && uint64(uintptr(unsafe.Pointer(&k[0]))) == attrs[i].Data {
				return k[:attrs[i].Len]
			}
		}
		return nil
	})
}

// compareData is compare with the pointed-to bytes captureData recorded.
func compareData(t *testing.T, want oracleCall, hdr uverbsabi.IbUverbsIoctlHdr, attrs []uverbsabi.IbUverbsAttr, data [][]byte) {
	t.Helper()
	compareWith(t, want, hdr, attrs, func(i int) []byte { return data[i] })
}

func compareWith(t *testing.T, want oracleCall, hdr uverbsabi.IbUverbsIoctlHdr, attrs []uverbsabi.IbUverbsAttr, pointee func(int) []byte) {
	t.Helper()
	got := oracle.Got{ObjectID: hdr.ObjectID, MethodID: hdr.MethodID, Length: hdr.Length, NumAttrs: hdr.NumAttrs, DriverID: hdr.DriverID}
	for i, a := range attrs {
		g := oracle.GotAttr{ID: a.AttrID, Len: a.Len, Flags: a.Flags, Data: a.Data}
		if a.Len > 8 {
			g.Bytes = pointee(i)
		}
		got.Attrs = append(got.Attrs, g)
	}
	var varying []string
	for _, wa := range want.Attrs {
		if skipVarying[want.Method+"/"+wa.Name] {
			varying = append(varying, wa.Name)
		}
	}
	oracle.Compare(t, want, got, varying...)
}

// testContext is a Context on no device, for encoding tests: calls go to
// ioctlHook or writeHook. Its async event file is a pipe.
func testContext(t *testing.T) *Context {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	ev, err := newEventFile(p[0], "test async events")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close(); unix.Close(p[1]) })
	return &Context{fd: 1000, driverID: DriverMLX5, children: map[closer]struct{}{},
		events: map[uint64]any{}, async: ev, NumCompVectors: 8}
}

func TestOracleGetContext(t *testing.T) {
	want := findCall(t, oracleCalls(t, "open_device"), "DEVICE", "GET_CONTEXT")
	drvIn, _ := hex.DecodeString(want.Attrs[2].Hex) // the mlx5 ucontext request libmlx5 sent
	drvOut := make([]byte, want.Attrs[3].Len)
	c := testContext(t)
	hdr, attrs := capture(t, func() {
		if err := c.getContext(drvIn, drvOut); err != nil {
			t.Fatal(err)
		}
	})
	compare(t, want, hdr, attrs, drvIn)
}

func TestOracleQueryPort(t *testing.T) {
	want := findCall(t, oracleCalls(t, "open_device"), "DEVICE", "QUERY_PORT")
	c := testContext(t)
	hdr, attrs := capture(t, func() {
		if _, err := c.QueryPort(1); err != nil {
			t.Fatal(err)
		}
	})
	compare(t, want, hdr, attrs)
}

func TestOracleAllocPD(t *testing.T) {
	want := findCall(t, oracleCalls(t, "alloc_pd"), "DEVICE", "INVOKE_WRITE")
	c := testContext(t)
	hdr, attrs := capture(t, func() {
		if _, err := c.AllocPD(make([]byte, 4)); err != nil { // mlx5_ib_alloc_pd_resp
			t.Fatal(err)
		}
	})
	compare(t, want, hdr, attrs)
	if attrs[1].Data != 0 {
		t.Errorf("alloc pd: legacy response pointer %#x, want 0", attrs[1].Data)
	}
}

func TestOracleDeallocPD(t *testing.T) {
	want := findCall(t, oracleCalls(t, "teardown"), "PD", "PD_DESTROY")
	c := testContext(t)
	p := &PD{object{ctx: c, handle: 2}}
	hdr, attrs := capture(t, func() {
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	})
	compare(t, want, hdr, attrs)
	if attrs[0].Data != 2 {
		t.Errorf("PD handle %d, want 2", attrs[0].Data)
	}
}
