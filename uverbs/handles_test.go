package uverbs

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// attrByID returns the captured attribute with id, and its index.
func attrByID(attrs []uverbsabi.IbUverbsAttr, id uint16) (uverbsabi.IbUverbsAttr, int) {
	for i, a := range attrs {
		if a.AttrID == id {
			return a, i
		}
	}
	return uverbsabi.IbUverbsAttr{}, -1
}

func attrIDs(attrs []uverbsabi.IbUverbsAttr) []uint16 {
	ids := make([]uint16, len(attrs))
	for i, a := range attrs {
		ids[i] = a.AttrID
	}
	return ids
}

// A user handle the caller gives is the one the kernel gets, and events
// name the object by it; without one the context numbers its objects.
func TestCallerUserHandles(t *testing.T) {
	c := testContext(t)
	pd := &PD{object{ctx: c, handle: 2}}
	cqh, qph, srqh := uint64(0x5555_5555_3850), uint64(0x5555_5555_5018), uint64(0)
	_, attrs := capture(t, func() {
		cq, err := c.CreateCQ(CQOptions{CQE: 1, UserHandle: &cqh})
		if err != nil {
			t.Fatal(err)
		}
		if cq.UserHandle() != cqh || c.lookup(cqh) != cq {
			t.Errorf("CQ user handle %#x, lookup %v", cq.UserHandle(), c.lookup(cqh))
		}
	})
	if a, _ := attrByID(attrs, uverbsabi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE); a.Data != cqh {
		t.Errorf("CQ_CREATE USER_HANDLE %#x, want %#x", a.Data, cqh)
	}
	cq := &CQ{object: object{ctx: c, handle: 4}}
	_, attrs = capture(t, func() {
		qp, err := c.CreateQP(QPInit{Type: QPTypeRC, PD: pd, SendCQ: cq, RecvCQ: cq, UserHandle: &qph})
		if err != nil {
			t.Fatal(err)
		}
		if qp.UserHandle() != qph {
			t.Errorf("QP user handle %#x", qp.UserHandle())
		}
	})
	if a, _ := attrByID(attrs, uverbsabi.UVERBS_ATTR_CREATE_QP_USER_HANDLE); a.Data != qph {
		t.Errorf("QP_CREATE USER_HANDLE %#x, want %#x", a.Data, qph)
	}
	// 0 is a user handle like any other when the caller gives it.
	_, attrs = capture(t, func() {
		srq, err := pd.CreateSRQ(SRQOptions{MaxWR: 1, UserHandle: &srqh})
		if err != nil {
			t.Fatal(err)
		}
		if srq.UserHandle() != 0 || c.lookup(0) != srq {
			t.Errorf("SRQ user handle %#x", srq.UserHandle())
		}
	})
	if a, _ := attrByID(attrs, uverbsabi.UVERBS_ATTR_CREATE_SRQ_USER_HANDLE); a.Data != 0 {
		t.Errorf("SRQ_CREATE USER_HANDLE %#x, want 0", a.Data)
	}
	_, attrs = capture(t, func() {
		if _, err := c.CreateCQ(CQOptions{CQE: 1}); err != nil {
			t.Fatal(err)
		}
	})
	if a, _ := attrByID(attrs, uverbsabi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE); a.Data != 1 {
		t.Errorf("numbered by the context: user handle %d, want 1", a.Data)
	}
}

// CreateQP's attributes come in libibverbs' order, flags as a u32 and the
// SRQ after them; a driver QP may go without CQs.
func TestCreateQPAttributeOrder(t *testing.T) {
	c := testContext(t)
	pd := &PD{object{ctx: c, handle: 2}}
	cq := &CQ{object: object{ctx: c, handle: 4}}
	srq := &SRQ{object: object{ctx: c, handle: 9}}
	_, attrs := capture(t, func() {
		if _, err := c.CreateQP(QPInit{Type: QPTypeDriver, PD: pd, SendCQ: cq, RecvCQ: cq, SRQ: srq,
			Flags: QPCreateSQSigAll}); err != nil {
			t.Fatal(err)
		}
	})
	want := []uint16{uverbsabi.UVERBS_ATTR_CREATE_QP_PD_HANDLE, uverbsabi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE,
		uverbsabi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, uverbsabi.UVERBS_ATTR_CREATE_QP_HANDLE, uverbsabi.UVERBS_ATTR_CREATE_QP_TYPE,
		uverbsabi.UVERBS_ATTR_CREATE_QP_USER_HANDLE, uverbsabi.UVERBS_ATTR_CREATE_QP_CAP, uverbsabi.UVERBS_ATTR_CREATE_QP_EVENT_FD,
		uverbsabi.UVERBS_ATTR_CREATE_QP_FLAGS, uverbsabi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, uverbsabi.UVERBS_ATTR_CREATE_QP_RESP_CAP,
		uverbsabi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM}
	if got := attrIDs(attrs); !equalIDs(got, want) {
		t.Errorf("attribute ids %v, libibverbs' order %v", got, want)
	}
	if a, _ := attrByID(attrs, uverbsabi.UVERBS_ATTR_CREATE_QP_FLAGS); a.Len != 4 || a.Data != uverbsabi.IB_UVERBS_QP_CREATE_SQ_SIG_ALL {
		t.Errorf("FLAGS len %d data %#x", a.Len, a.Data)
	}
	if a, _ := attrByID(attrs, uverbsabi.UVERBS_ATTR_CREATE_QP_TYPE); a.Data != uverbsabi.IB_UVERBS_QPT_DRIVER {
		t.Errorf("TYPE %#x", a.Data)
	}
	_, attrs = capture(t, func() {
		if _, err := c.CreateQP(QPInit{Type: QPTypeDriver, PD: pd, SRQ: srq}); err != nil {
			t.Fatal(err)
		}
	})
	if _, i := attrByID(attrs, uverbsabi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE); i >= 0 {
		t.Error("a driver QP without CQs sent SEND_CQ_HANDLE")
	}
	if _, err := c.CreateQP(QPInit{Type: QPTypeRC, PD: pd}); err == nil {
		t.Error("an RC QP without CQs was accepted")
	}
}

func equalIDs(a, b []uint16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A basic SRQ asks for no SRQ number (the kernel writes it only for XRC
// SRQs), its attributes in libibverbs' order; Modify is the legacy
// MODIFY_SRQ without driver data.
func TestSRQEncoding(t *testing.T) {
	c := testContext(t)
	pd := &PD{object{ctx: c, handle: 2}}
	var srq *SRQ
	_, attrs := capture(t, func() {
		var err error
		if srq, err = pd.CreateSRQ(SRQOptions{MaxWR: 255, MaxSGE: 3}); err != nil {
			t.Fatal(err)
		}
	})
	want := []uint16{uverbsabi.UVERBS_ATTR_CREATE_SRQ_HANDLE, uverbsabi.UVERBS_ATTR_CREATE_SRQ_TYPE, uverbsabi.UVERBS_ATTR_CREATE_SRQ_USER_HANDLE,
		uverbsabi.UVERBS_ATTR_CREATE_SRQ_PD_HANDLE, uverbsabi.UVERBS_ATTR_CREATE_SRQ_MAX_WR, uverbsabi.UVERBS_ATTR_CREATE_SRQ_MAX_SGE,
		uverbsabi.UVERBS_ATTR_CREATE_SRQ_LIMIT, uverbsabi.UVERBS_ATTR_CREATE_SRQ_EVENT_FD, uverbsabi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR,
		uverbsabi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE}
	if got := attrIDs(attrs); !equalIDs(got, want) {
		t.Errorf("attribute ids %v, libibverbs' order %v", got, want)
	}
	srq.handle = 9
	_, attrs, data := captureData(t, func() {
		if err := srq.Modify(SRQAttrLimit, 0, 4, nil); err != nil {
			t.Fatal(err)
		}
	})
	if a, _ := attrByID(attrs, uverbsabi.UVERBS_ATTR_WRITE_CMD); a.Data != uverbsabi.IB_USER_VERBS_CMD_MODIFY_SRQ || len(attrs) != 2 {
		t.Errorf("write command %d, %d attributes", a.Data, len(attrs))
	}
	if _, i := attrByID(attrs, uverbsabi.UVERBS_ATTR_CORE_IN); i < 0 || !bytes.Equal(data[i], []byte{9, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0}) {
		t.Errorf("struct ib_uverbs_modify_srq % x", data[i])
	}
	if err := srq.Modify(0, 0, 0, nil); err == nil {
		t.Error("empty mask accepted")
	}
}

// The extended modify goes out whatever it carries when asked; the legacy
// one cannot carry a rate limit.
func TestModifyExtended(t *testing.T) {
	c := testContext(t)
	qp := &QP{object: object{ctx: c, handle: 6}}
	drvIn, drvOut := make([]byte, 16), make([]byte, 16)
	_, attrs := capture(t, func() {
		if err := qp.ModifyExtended(&QPAttr{State: QPStateInit}, QPAttrState, drvIn, drvOut); err != nil {
			t.Fatal(err)
		}
	})
	if a, _ := attrByID(attrs, uverbsabi.UVERBS_ATTR_WRITE_CMD); a.Data != uverbsabi.IB_USER_VERBS_CMD_FLAG_EXTENDED|uverbsabi.IB_USER_VERBS_EX_CMD_MODIFY_QP {
		t.Errorf("write command %#x", a.Data)
	}
	if a, _ := attrByID(attrs, uverbsabi.UVERBS_ATTR_CORE_IN); a.Len != uint16(unsafe.Sizeof(uverbsabi.IbUverbsExModifyQp{})) {
		t.Errorf("core in of %d bytes", a.Len)
	}
	if err := qp.modify(&QPAttr{RateLimit: 1}, QPAttrRateLimit, nil, nil, false); err == nil {
		t.Error("a legacy modify with a rate limit was accepted")
	}
}

func TestDriverResponseKept(t *testing.T) {
	c := testContext(t)
	out := make([]byte, 8)
	ioctlHook = func(fd int, h *uverbsabi.IbUverbsIoctlHdr, a []uverbsabi.IbUverbsAttr, p []unsafe.Pointer) unix.Errno {
		for i := range a {
			if a[i].AttrID == uverbsabi.UVERBS_ATTR_UHW_OUT {
				copy(unsafe.Slice((*byte)(p[i]), a[i].Len), "response")
			}
		}
		return 0
	}
	t.Cleanup(func() { ioctlHook = nil })
	if err := c.getContext([]byte{1, 2, 3, 4}, out); err != nil {
		t.Fatal(err)
	}
	got := c.DriverResponse()
	if string(got) != "response" {
		t.Fatalf("DriverResponse %q", got)
	}
	got[0] = 'X'
	if string(c.DriverResponse()) != "response" {
		t.Error("DriverResponse is not a copy")
	}
}

// The recording context answers GET_CONTEXT through its recorder, and its
// async event file carries what RecordAsyncEvent writes.
func TestRecordingContext(t *testing.T) {
	c := NewRecordingContext(DriverMLX5, func(call *Call) unix.Errno {
		for i, a := range call.Attrs {
			if a.AttrID == uverbsabi.UVERBS_ATTR_UHW_OUT {
				copy(call.Data[i], "answer")
			}
		}
		return 0
	})
	defer c.Close()
	if err := c.RecordGetContext(&Options{DriverIn: make([]byte, 16), DriverOut: make([]byte, 6)}); err != nil {
		t.Fatal(err)
	}
	if string(c.DriverResponse()) != "answer" {
		t.Errorf("DriverResponse %q", c.DriverResponse())
	}
	if err := c.RecordAsyncEvent(EventSRQLimitReached, 0x55); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ev, err := c.NextAsyncEvent(ctx)
	if err != nil || ev.Type != EventSRQLimitReached || ev.Element != 0x55 {
		t.Errorf("event %+v, %v", ev, err)
	}
	if err := testContext(t).RecordAsyncEvent(EventCQErr, 1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("RecordAsyncEvent on a real context: %v", err)
	}
}

// A completion event gives the CQ's user handle as the kernel reported it,
// known to the context or not.
func TestCompChannelNextUserHandle(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[1])
	ev, err := newEventFile(p[0], "test channel")
	if err != nil {
		t.Fatal(err)
	}
	ch := &CompChannel{ctx: testContext(t), ev: ev}
	defer ev.Close()
	var d [8]byte
	binary.NativeEndian.PutUint64(d[:], 0x7777)
	unix.Write(p[1], d[:])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if h, err := ch.NextUserHandle(ctx); err != nil || h != 0x7777 {
		t.Errorf("NextUserHandle %#x, %v", h, err)
	}
}

func TestCreateAHUserHandle(t *testing.T) {
	c := testContext(t)
	pd := &PD{object{ctx: c, handle: 0x2e}}
	_, attrs, data := captureData(t, func() {
		if _, err := pd.CreateAHWithUserHandle(&AHAttr{Port: 1, SL: 3}, 0x5555_5858_2610, make([]byte, 16)); err != nil {
			t.Fatal(err)
		}
	})
	_, i := attrByID(attrs, uverbsabi.UVERBS_ATTR_CORE_IN)
	if i < 0 || binary.LittleEndian.Uint64(data[i][8:]) != 0x5555_5858_2610 || binary.LittleEndian.Uint32(data[i][16:]) != 0x2e {
		t.Errorf("struct ib_uverbs_create_ah % x", data[i])
	}
}

// Only the fields the mask selects reach the command, as libibverbs'
// copy_modify_qp_fields has it: junk elsewhere changes no byte.
func TestModifyCopiesMaskedFieldsOnly(t *testing.T) {
	junk := QPAttr{State: QPStateErr, CurState: QPStateSQD, PathMTU: MTU512, PathMigState: 2, QKey: 0x11, RQPSN: 0x22,
		SQPSN: 0x33, DestQPN: 0x44, AccessFlags: AccessRemoteRead, AH: AHAttr{DLID: 9, Port: 2, SL: 3, IsGlobal: true},
		AltAH: AHAttr{DLID: 7}, PKeyIndex: 5, AltPKeyIndex: 6, EnSQDAsyncNotify: true, MaxRdAtomic: 1,
		MaxDestRdAtomic: 2, MinRNRTimer: 3, Port: 4, Timeout: 5, RetryCnt: 6, RNRRetry: 7, AltPort: 8, AltTimeout: 9}
	for _, m := range oracleModify {
		want := findCall(t, oracleCalls(t, m.kase), "DEVICE", "INVOKE_WRITE")
		c := testContext(t)
		qp := &QP{object: object{ctx: c, handle: 6}}
		a := overlay(junk, m.attr, m.mask)
		_, _, data := captureData(t, func() {
			if err := qp.Modify(&a, m.mask); err != nil {
				t.Fatal(err)
			}
		})
		if h := hexOf(data[1]); h != want.Attrs[1].Hex {
			t.Errorf("%s with junk in unselected fields:\n got %s\nwant %s", m.kase, h, want.Attrs[1].Hex)
		}
	}
}

// overlay is junk with the fields mask selects taken from sel.
func overlay(junk, sel QPAttr, mask QPAttrMask) QPAttr {
	a := junk
	set := map[QPAttrMask]func(){
		QPAttrState:            func() { a.State = sel.State },
		QPAttrCurState:         func() { a.CurState = sel.CurState },
		QPAttrEnSQDAsyncNotify: func() { a.EnSQDAsyncNotify = sel.EnSQDAsyncNotify },
		QPAttrAccessFlags:      func() { a.AccessFlags = sel.AccessFlags },
		QPAttrPKeyIndex:        func() { a.PKeyIndex = sel.PKeyIndex },
		QPAttrPort:             func() { a.Port = sel.Port },
		QPAttrQKey:             func() { a.QKey = sel.QKey },
		QPAttrAV:               func() { a.AH = sel.AH },
		QPAttrPathMTU:          func() { a.PathMTU = sel.PathMTU },
		QPAttrTimeout:          func() { a.Timeout = sel.Timeout },
		QPAttrRetryCnt:         func() { a.RetryCnt = sel.RetryCnt },
		QPAttrRNRRetry:         func() { a.RNRRetry = sel.RNRRetry },
		QPAttrRQPSN:            func() { a.RQPSN = sel.RQPSN },
		QPAttrMaxQPRdAtomic:    func() { a.MaxRdAtomic = sel.MaxRdAtomic },
		QPAttrMinRNRTimer:      func() { a.MinRNRTimer = sel.MinRNRTimer },
		QPAttrSQPSN:            func() { a.SQPSN = sel.SQPSN },
		QPAttrMaxDestRdAtomic:  func() { a.MaxDestRdAtomic = sel.MaxDestRdAtomic },
		QPAttrPathMigState:     func() { a.PathMigState = sel.PathMigState },
		QPAttrDestQPN:          func() { a.DestQPN = sel.DestQPN },
	}
	for bit, f := range set {
		if mask&bit != 0 {
			f()
		}
	}
	return a
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }
