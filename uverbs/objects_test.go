package uverbs

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

func oracleHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOracleRegMR(t *testing.T) {
	want := findCall(t, oracleCalls(t, "reg_mr"), "DEVICE", "INVOKE_WRITE")
	c := testContext(t)
	pd := &PD{object{ctx: c, handle: 2}}
	mem := make([]byte, 1<<20) // the encoding test only; real MRs use mmap'd memory
	hdr, attrs, data := captureData(t, func() {
		if _, err := pd.RegMR(mem, 0x7e5a00000000, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead, nil, nil); err != nil {
			t.Fatal(err)
		}
	})
	compare(t, want, hdr, attrs)
	got := data[1]
	lib := oracleHex(t, want.Attrs[1].Hex)
	// struct ib_uverbs_reg_mr: response(8) start(8) length(8) hca_va(8)
	// pd_handle(4) access_flags(4). response and start are process
	// addresses; the rest must match.
	if binary.LittleEndian.Uint64(got[8:]) != uint64(uintptr(unsafe.Pointer(&mem[0]))) {
		t.Errorf("reg mr: start %#x is not the buffer", binary.LittleEndian.Uint64(got[8:]))
	}
	if hex.EncodeToString(got[16:]) != hex.EncodeToString(lib[16:]) {
		t.Errorf("reg mr: length..access %x, libibverbs %x", got[16:], lib[16:])
	}
}

func TestOracleCreateCQ(t *testing.T) {
	want := findCall(t, oracleCalls(t, "create_cq"), "CQ", "CQ_CREATE")
	c := testContext(t)
	drvIn := oracleHex(t, want.Attrs[6].Hex) // struct mlx5_ib_create_cq as libmlx5 sent it
	drvOut := make([]byte, want.Attrs[7].Len)
	hdr, attrs := capture(t, func() {
		if _, err := c.CreateCQ(CQOptions{CQE: 511, DriverIn: drvIn, DriverOut: drvOut}); err != nil {
			t.Fatal(err)
		}
	})
	compare(t, want, hdr, attrs, drvIn)
}

func oracleQP(t *testing.T) (oracleCall, QPInit, *Context) {
	want := findCall(t, oracleCalls(t, "create_qp_rc_sig_pipelining"), "QP", "QP_CREATE")
	c := testContext(t)
	cq := &CQ{object: object{ctx: c, handle: 4}}
	init := QPInit{Type: QPTypeRC, PD: &PD{object{ctx: c, handle: 2}}, SendCQ: cq, RecvCQ: cq,
		Cap:      QPCap{MaxSendWR: 64, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 540},
		DriverIn: oracleHex(t, want.Attrs[10].Hex), DriverOut: make([]byte, want.Attrs[11].Len)}
	return want, init, c
}

func TestOracleCreateQP(t *testing.T) {
	want, init, c := oracleQP(t)
	hdr, attrs, data := captureData(t, func() {
		if _, err := c.CreateQP(init); err != nil {
			t.Fatal(err)
		}
	})
	compareData(t, want, hdr, attrs, data)
}

// The QP attributes the oracle's harness passed for each transition, read
// from its vectors.
var oracleModify = []struct {
	kase string
	attr QPAttr
	mask QPAttrMask
}{
	{"modify_qp_reset_to_init", QPAttr{State: QPStateInit, Port: 1, AccessFlags: 7},
		QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags},
	{"modify_qp_init_to_rtr", QPAttr{State: QPStateRTR, PathMTU: MTU4096, DestQPN: 0x1234, MaxDestRdAtomic: 16,
		MinRNRTimer: 12, AH: AHAttr{DLID: 2, Port: 1}},
		QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer},
	{"modify_qp_rtr_to_rts", QPAttr{State: QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
		QPAttrState | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrSQPSN | QPAttrMaxQPRdAtomic},
	{"modify_qp_rts_to_sqd", QPAttr{State: QPStateSQD}, QPAttrState},
	{"modify_qp_sqd_to_rts", QPAttr{State: QPStateRTS}, QPAttrState},
}

func TestOracleModifyQP(t *testing.T) {
	for _, m := range oracleModify {
		t.Run(m.kase, func(t *testing.T) {
			want := findCall(t, oracleCalls(t, m.kase), "DEVICE", "INVOKE_WRITE")
			c := testContext(t)
			qp := &QP{object: object{ctx: c, handle: 6}}
			hdr, attrs, data := captureData(t, func() {
				if err := qp.Modify(&m.attr, m.mask); err != nil {
					t.Fatal(err)
				}
			})
			compareData(t, want, hdr, attrs, data)
			if h := hex.EncodeToString(data[1]); h != want.Attrs[1].Hex {
				t.Errorf("struct ib_uverbs_modify_qp:\n got %s\nwant %s", h, want.Attrs[1].Hex)
			}
		})
	}
}

func TestOracleDestroys(t *testing.T) {
	calls := oracleCalls(t, "teardown")
	c := testContext(t)
	for _, d := range []struct {
		object, method string
		close          func() error
	}{
		{"QP", "QP_DESTROY", (&QP{object: object{ctx: c, handle: 6}}).Close},
		{"CQ", "CQ_DESTROY", (&CQ{object: object{ctx: c, handle: 4}}).Close},
		{"MR", "MR_DESTROY", (&MR{object: object{ctx: c, handle: 3}}).Close},
		{"PD", "PD_DESTROY", (&PD{object{ctx: c, handle: 2}}).Close},
	} {
		want := findCall(t, calls, d.object, d.method)
		hdr, attrs := capture(t, func() {
			if err := d.close(); err != nil {
				t.Fatal(err)
			}
		})
		compare(t, want, hdr, attrs)
	}
}

func TestModifyQPRejectsBadInput(t *testing.T) {
	c := testContext(t)
	qp := &QP{object: object{ctx: c, handle: 6}}
	for _, tc := range []struct {
		name string
		attr QPAttr
		mask QPAttrMask
	}{
		{"empty mask", QPAttr{}, 0},
		{"unknown bit", QPAttr{}, 1 << 22},
		{"bad state", QPAttr{State: 7}, QPAttrState},
		{"bad mtu", QPAttr{PathMTU: 6}, QPAttrPathMTU},
		{"unknown access flag", QPAttr{AccessFlags: 1 << 15}, QPAttrAccessFlags},
	} {
		_, attrs := capture(t, func() {
			if err := qp.Modify(&tc.attr, tc.mask); err == nil {
				t.Errorf("%s: no error", tc.name)
			}
		})
		if attrs != nil {
			t.Errorf("%s: a call reached the kernel", tc.name)
		}
	}
}

// fakeFallback makes the ioctl fail with errno and records write() calls.
func fakeFallback(t *testing.T, errno unix.Errno) (ioctls, writes *int, last *[]byte) {
	t.Helper()
	ioctls, writes, last = new(int), new(int), new([]byte)
	ioctlHook = func(int, *uverbsabi.IbUverbsIoctlHdr, []uverbsabi.IbUverbsAttr, []unsafe.Pointer) unix.Errno {
		*ioctls++
		return errno
	}
	writeHook = func(fd int, buf, resp []byte) unix.Errno {
		*writes++
		*last = append([]byte(nil), buf...)
		return 0
	}
	t.Cleanup(func() { ioctlHook, writeHook = nil, nil })
	return
}

func TestWriteFallback(t *testing.T) {
	for _, tc := range []struct {
		errno            unix.Errno
		fallback, sticky bool
	}{
		{unix.ENOTTY, true, true},
		{unix.EPROTONOSUPPORT, true, false},
		{unix.EINVAL, false, false},
	} {
		c := testContext(t)
		ioctls, writes, last := fakeFallback(t, tc.errno)
		pd, err := c.AllocPD(nil)
		if !tc.fallback {
			if !errors.Is(err, tc.errno) || *writes != 0 {
				t.Errorf("%v: err %v, %d writes; want the errno and no write()", tc.errno, err, *writes)
			}
			continue
		}
		if err != nil || *writes != 1 {
			t.Fatalf("%v: err %v, %d writes; want write() to carry the call", tc.errno, err, *writes)
		}
		// struct ib_uverbs_cmd_hdr: ALLOC_PD, in_words covers header and
		// the 8-byte command, out_words the 4-byte response.
		b := *last
		if cmd, in, out := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint16(b[4:]), binary.LittleEndian.Uint16(b[6:]); cmd != uverbsabi.IB_USER_VERBS_CMD_ALLOC_PD || in != 4 || out != 1 || len(b) != 16 {
			t.Errorf("%v: header cmd %d in %d out %d len %d, want 3 4 1 16", tc.errno, cmd, in, out, len(b))
		}
		if binary.LittleEndian.Uint64(b[8:]) == 0 {
			t.Errorf("%v: response pointer not set", tc.errno)
		}
		before := *ioctls
		if err := pd.Close(); err != nil {
			t.Fatal(err)
		}
		if tc.sticky && *ioctls != before {
			t.Errorf("after ENOTTY the context still tries the ioctl")
		}
		if !tc.sticky && *ioctls == before {
			t.Errorf("after EPROTONOSUPPORT the context stopped trying the ioctl")
		}
	}
}

func TestWriteExtendedHeader(t *testing.T) {
	c := testContext(t)
	c.forceWrite = true
	_, writes, last := fakeFallback(t, 0)
	qp := &QP{object: object{ctx: c, handle: 6}}
	attr := QPAttr{State: QPStateRTS, RateLimit: 1000}
	if err := qp.Modify(&attr, QPAttrState|QPAttrRateLimit); err != nil {
		t.Fatal(err)
	}
	if *writes != 1 {
		t.Fatalf("%d writes", *writes)
	}
	b := *last
	// ib_uverbs_cmd_hdr (8) + ib_uverbs_ex_cmd_hdr (16) + 120-byte
	// ib_uverbs_ex_modify_qp, sizes in 8-byte words.
	if cmd := binary.LittleEndian.Uint32(b); cmd != uverbsabi.IB_USER_VERBS_CMD_FLAG_EXTENDED|uverbsabi.IB_USER_VERBS_CMD_MODIFY_QP {
		t.Errorf("command %#x", cmd)
	}
	if in, out := binary.LittleEndian.Uint16(b[4:]), binary.LittleEndian.Uint16(b[6:]); in != 15 || out != 1 || len(b) != 24+120 {
		t.Errorf("in_words %d out_words %d len %d, want 15 1 144", in, out, len(b))
	}
	if mask := binary.LittleEndian.Uint32(b[24+68:]); mask != uint32(QPAttrState|QPAttrRateLimit) {
		t.Errorf("attr_mask %#x", mask)
	}
	if rl := binary.LittleEndian.Uint32(b[24+112:]); rl != 1000 {
		t.Errorf("rate_limit %d", rl)
	}
}

func TestAsyncEventDecode(t *testing.T) {
	qp := &QP{}
	objs := map[uint64]any{7: qp}
	lookup := func(h uint64) any { return objs[h] }
	ev := decodeAsyncEvent(uverbsabi.IbUverbsAsyncEventDesc{Element: 7, EventType: uint32(EventSQDrained)}, lookup)
	if ev.Type != EventSQDrained || ev.QP != qp || ev.Type.String() != "SQ_DRAINED" {
		t.Errorf("SQ_DRAINED: %+v", ev)
	}
	ev = decodeAsyncEvent(uverbsabi.IbUverbsAsyncEventDesc{Element: 7, EventType: uint32(EventQPFatal)}, lookup)
	if ev.QP != qp || ev.Type.String() != "QP_FATAL" {
		t.Errorf("QP_FATAL: %+v", ev)
	}
	ev = decodeAsyncEvent(uverbsabi.IbUverbsAsyncEventDesc{Element: 1, EventType: uint32(EventPortActive)}, lookup)
	if ev.Port != 1 || ev.QP != nil || ev.Type.String() != "PORT_ACTIVE" {
		t.Errorf("PORT_ACTIVE: %+v", ev)
	}
	ev = decodeAsyncEvent(uverbsabi.IbUverbsAsyncEventDesc{EventType: uint32(EventDeviceFatal)}, lookup)
	if ev.Type.Subject() != "device" || ev.Type.String() != "DEVICE_FATAL" {
		t.Errorf("DEVICE_FATAL: %+v", ev)
	}
}

// TestWriteDestroys: every object's Close on the legacy write() path
// sends its destroy command (struct ib_uverbs_cmd_hdr, then the command
// with the object's handle; a command with a response starts with the
// response pointer), as TestOracleDestroys checks the ioctl path against
// libibverbs.
func TestWriteDestroys(t *testing.T) {
	c := testContext(t)
	_, _, last := fakeFallback(t, unix.ENOTTY)
	for _, d := range []struct {
		name          string
		close         func() error
		cmd           uint32
		in, out       uint16
		handleAt, len int
	}{
		{"ah", (&AH{object{ctx: c, handle: 7}}).Close, uverbsabi.IB_USER_VERBS_CMD_DESTROY_AH, 3, 0, 8, 12},
		{"pd", (&PD{object{ctx: c, handle: 7}}).Close, uverbsabi.IB_USER_VERBS_CMD_DEALLOC_PD, 3, 0, 8, 12},
		{"mr", (&MR{object: object{ctx: c, handle: 7}}).Close, uverbsabi.IB_USER_VERBS_CMD_DEREG_MR, 3, 0, 8, 12},
		{"cq", (&CQ{object: object{ctx: c, handle: 7}}).Close, uverbsabi.IB_USER_VERBS_CMD_DESTROY_CQ, 6, 2, 16, 24},
		{"qp", (&QP{object: object{ctx: c, handle: 7}}).Close, uverbsabi.IB_USER_VERBS_CMD_DESTROY_QP, 6, 1, 16, 24},
		{"srq", (&SRQ{object: object{ctx: c, handle: 7}}).Close, uverbsabi.IB_USER_VERBS_CMD_DESTROY_SRQ, 6, 1, 16, 24},
	} {
		*last = nil
		if err := d.close(); err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		b := *last
		if len(b) != d.len {
			t.Errorf("%s: %d bytes written, want %d", d.name, len(b), d.len)
			continue
		}
		cmd, in, out := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint16(b[4:]), binary.LittleEndian.Uint16(b[6:])
		if cmd != d.cmd || in != d.in || out != d.out || binary.LittleEndian.Uint32(b[d.handleAt:]) != 7 {
			t.Errorf("%s: command %d in %d out %d handle %d; want %d %d %d 7", d.name, cmd, in, out, binary.LittleEndian.Uint32(b[d.handleAt:]), d.cmd, d.in, d.out)
		}
		if d.out != 0 && binary.LittleEndian.Uint64(b[8:]) == 0 {
			t.Errorf("%s: no response pointer", d.name)
		}
	}
}
