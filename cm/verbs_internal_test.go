package cm

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// fakeRXE answers a recording uverbs context as rxe's kernel does what a
// VerbsDevice asks of it: a node GUID, a PD, creates that fail with
// EINVAL without room for rxe's driver data out, a modify it records and
// a query it answers with query.
type fakeRXE struct {
	modify []uverbsabi.IbUverbsModifyQp
	query  uverbsabi.IbUverbsQueryQpResp
	qpType []uint64
}

func (f *fakeRXE) answer(c *uverbs.Call) unix.Errno {
	sz, _ := uverbs.DriverOutSizesOf(uverbs.DriverRXE)
	need := map[uint16]int{uverbsabi.UVERBS_OBJECT_CQ: sz.CQ, uverbsabi.UVERBS_OBJECT_QP: sz.QP}
	uhwOut, cmd := 0, uint64(0)
	var coreIn, coreOut []byte
	for i, a := range c.Attrs {
		switch {
		case a.AttrID == uverbsabi.UVERBS_ATTR_UHW_OUT:
			uhwOut = int(a.Len)
		case c.Hdr.ObjectID == uverbsabi.UVERBS_OBJECT_DEVICE && a.AttrID == uverbsabi.UVERBS_ATTR_WRITE_CMD:
			cmd = a.Data
		case c.Hdr.ObjectID == uverbsabi.UVERBS_OBJECT_DEVICE && a.AttrID == uverbsabi.UVERBS_ATTR_CORE_IN:
			coreIn = c.Data[i]
		case c.Hdr.ObjectID == uverbsabi.UVERBS_OBJECT_DEVICE && a.AttrID == uverbsabi.UVERBS_ATTR_CORE_OUT:
			coreOut = c.Data[i]
		case c.Hdr.ObjectID == uverbsabi.UVERBS_OBJECT_QP && a.AttrID == uverbsabi.UVERBS_ATTR_CREATE_QP_TYPE:
			f.qpType = append(f.qpType, a.Data)
		case c.Hdr.ObjectID == uverbsabi.UVERBS_OBJECT_QP && a.AttrID == uverbsabi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM:
			binary.LittleEndian.PutUint32(c.Data[i], 0x11+uint32(len(f.qpType)))
		}
	}
	if n, ok := need[c.Hdr.ObjectID]; ok {
		if uhwOut < n {
			return unix.EINVAL
		}
		for i, a := range c.Attrs {
			if a.AttrID == 0 { // UVERBS_ATTR_CREATE_CQ_HANDLE, UVERBS_ATTR_CREATE_QP_HANDLE
				c.Attrs[i].Data = 5 // the new object's handle
			}
		}
		return 0
	}
	switch cmd {
	case uverbsabi.IB_USER_VERBS_CMD_FLAG_EXTENDED | uverbsabi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE:
		var r uverbsabi.IbUverbsExQueryDeviceResp
		binary.BigEndian.PutUint64(r.Base.NodeGuid[:], 0x0200_5eff_fe00_0001)
		r.ResponseLength = uint32(unsafe.Sizeof(r))
		copy(coreOut, unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r)))
	case uverbsabi.IB_USER_VERBS_CMD_MODIFY_QP:
		var m uverbsabi.IbUverbsModifyQp
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&m)), unsafe.Sizeof(m)), coreIn)
		f.modify = append(f.modify, m)
	case uverbsabi.IB_USER_VERBS_CMD_QUERY_QP:
		copy(coreOut, unsafe.Slice((*byte)(unsafe.Pointer(&f.query)), unsafe.Sizeof(f.query)))
	}
	return 0
}

func fakeVerbsDevice(t *testing.T, f *fakeRXE) *VerbsDevice {
	t.Helper()
	c := uverbs.NewRecordingContext(uverbs.DriverRXE, f.answer)
	sz, _ := uverbs.DriverOutSizesOf(uverbs.DriverRXE)
	d, err := newVerbsDevice("rxe0", c, sz)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestVerbsQP: a VerbsDevice makes RC and UD QPs with rxe's driver data
// (the fake refuses them without it, as rxe does), refuses other types,
// and its QPs carry cm's attributes to the kernel field for field and
// back; cm finds the QP's device by the node GUID; after Close, calls
// get mlx5.ErrClosed.
func TestVerbsQP(t *testing.T) {
	f := &fakeRXE{}
	d := fakeVerbsDevice(t, f)
	if d.Name() != "rxe0" || d.NodeGUID() != 0x0200_5eff_fe00_0001 {
		t.Errorf("device %q, node GUID %#x", d.Name(), d.NodeGUID())
	}
	rc, err := d.CreateQP(mlx5.QPTypeRC)
	if err != nil {
		t.Fatal(err)
	}
	ud, err := d.CreateQP(mlx5.QPTypeUD)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.qpType) != 2 || f.qpType[0] != uint64(uverbs.QPTypeRC) || f.qpType[1] != uint64(uverbs.QPTypeUD) {
		t.Errorf("the kernel was asked for QP types %v", f.qpType)
	}
	if rc.Type() != mlx5.QPTypeRC || ud.Type() != mlx5.QPTypeUD || rc.QPN() != 0x12 || ud.QPN() != 0x13 {
		t.Errorf("RC %v %#x, UD %v %#x", rc.Type(), rc.QPN(), ud.Type(), ud.QPN())
	}
	if _, err := d.CreateQP(mlx5.QPTypeUC); !errors.Is(err, mlx5.ErrInvalid) || !strings.Contains(err.Error(), "create qp rxe0") {
		t.Errorf("a UC QP: %v", err)
	}
	if g, ok, err := qpDevice(rc); g != d.NodeGUID() || !ok || err != nil {
		t.Errorf("qpDevice: %#x, %v, %v", g, ok, err)
	}
	var _ QP = rc

	gid := [16]byte{0: 0xfe, 15: 0x42}
	a := mlx5.QPAttr{State: mlx5.QPStateRTR, CurState: mlx5.QPStateInit, Access: mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead,
		PKeyIndex: 3, Port: 1, QKey: 0x01234567, Timeout: 14, RetryCnt: 7, RNRRetry: 6, RQPSN: 0xabcdef, SQPSN: 0x123456,
		MaxRdAtomic: 2, MaxDestRdAtomic: 4, MinRNRTimer: 12, DestQPN: 0x99, EnSQDAsyncNotify: true,
		Path: mlx5.AddressPath{Port: 1, MTU: 3, LID: 0x77, SrcPathBits: 1, SL: 2, StaticRate: 3, GRH: true, GID: gid,
			SGIDIndex: 1, HopLimit: 64, TrafficClass: 5, FlowLabel: 0x1234}}
	const all = mlx5.QPAttrState | mlx5.QPAttrCurState | mlx5.QPAttrEnSQDAsyncNotify | mlx5.QPAttrAccessFlags | mlx5.QPAttrPKeyIndex |
		mlx5.QPAttrPort | mlx5.QPAttrQKey | mlx5.QPAttrAV | mlx5.QPAttrPathMTU | mlx5.QPAttrTimeout | mlx5.QPAttrRetryCnt |
		mlx5.QPAttrRNRRetry | mlx5.QPAttrRQPSN | mlx5.QPAttrMaxQPRdAtomic | mlx5.QPAttrMinRNRTimer | mlx5.QPAttrSQPSN |
		mlx5.QPAttrMaxDestRdAtomic | mlx5.QPAttrDestQPN
	if err := rc.Modify(&a, all); err != nil {
		t.Fatal(err)
	}
	if len(f.modify) != 1 {
		t.Fatalf("%d modify commands", len(f.modify))
	}
	m := f.modify[0]
	want := uverbsabi.IbUverbsModifyQp{QpHandle: 5, AttrMask: uint32(all), Qkey: 0x01234567, RqPsn: 0xabcdef, SqPsn: 0x123456,
		DestQpNum: 0x99, QpAccessFlags: uint32(mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead), PkeyIndex: 3,
		QpState: uint8(uverbs.QPStateRTR), CurQpState: uint8(uverbs.QPStateInit), PathMtu: 3, EnSqdAsyncNotify: 1,
		MaxRdAtomic: 2, MaxDestRdAtomic: 4, MinRnrTimer: 12, PortNum: 1, Timeout: 14, RetryCnt: 7, RnrRetry: 6,
		Dest: uverbsabi.IbUverbsQpDest{Dgid: gid, FlowLabel: 0x1234, Dlid: 0x77, SgidIndex: 1, HopLimit: 64, TrafficClass: 5,
			Sl: 2, SrcPathBits: 1, StaticRate: 3, IsGlobal: 1, PortNum: 1}}
	if m != want {
		t.Errorf("modify qp sent\n%+v\nwant\n%+v", m, want)
	}
	if err := rc.Modify(nil, mlx5.QPAttrState); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("Modify(nil): %v", err)
	}

	f.query = uverbsabi.IbUverbsQueryQpResp{QpState: uint8(uverbs.QPStateRTS), CurQpState: uint8(uverbs.QPStateRTS), PathMtu: 3,
		Qkey: 0x01234567, RqPsn: 0xabcdef, SqPsn: 0x123456, DestQpNum: 0x99, QpAccessFlags: uint32(mlx5.AccessRemoteWrite),
		PkeyIndex: 3, MaxRdAtomic: 2, MaxDestRdAtomic: 4, MinRnrTimer: 12, PortNum: 1, Timeout: 14, RetryCnt: 7, RnrRetry: 6,
		MaxSendWr: 4, MaxRecvWr: 4, MaxSendSge: 1, MaxRecvSge: 1, MaxInlineData: 0,
		Dest: uverbsabi.IbUverbsQpDest{Dgid: gid, FlowLabel: 0x1234, SgidIndex: 1, HopLimit: 64, TrafficClass: 5, IsGlobal: 1, PortNum: 1}}
	got, err := rc.Query(mlx5.QPAttrDestQPN)
	if err != nil {
		t.Fatal(err)
	}
	wantQ := mlx5.QPAttr{State: mlx5.QPStateRTS, CurState: mlx5.QPStateRTS, Access: mlx5.AccessRemoteWrite, PKeyIndex: 3, Port: 1,
		QKey: 0x01234567, Timeout: 14, RetryCnt: 7, RNRRetry: 6, RQPSN: 0xabcdef, SQPSN: 0x123456, MaxRdAtomic: 2, MaxDestRdAtomic: 4,
		MinRNRTimer: 12, DestQPN: 0x99,
		Path: mlx5.AddressPath{Port: 1, MTU: 3, GRH: true, GID: gid, SGIDIndex: 1, HopLimit: 64, TrafficClass: 5, FlowLabel: 0x1234},
		Caps: mlx5.QPCaps{MaxSendWR: 4, MaxSendSGE: 1, MaxRecvWR: 4, MaxRecvSGE: 1}}
	if got != wantQ {
		t.Errorf("query\n%+v\nwant\n%+v", got, wantQ)
	}

	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateQP(mlx5.QPTypeRC); !errors.Is(err, mlx5.ErrClosed) {
		t.Errorf("CreateQP after Close: %v", err)
	}
	if err := rc.Modify(&mlx5.QPAttr{State: mlx5.QPStateErr}, mlx5.QPAttrState); !errors.Is(err, mlx5.ErrClosed) {
		t.Errorf("Modify after Close: %v", err)
	}
	if err := rc.Close(); err != nil {
		t.Errorf("QP Close after the device's: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestOpenVerbsNoDevice: a device that does not exist is an error naming
// the call and the device.
func TestOpenVerbsNoDevice(t *testing.T) {
	d, err := OpenVerbs("no-such-rdma-device")
	if err == nil {
		d.Close()
		t.Fatal("opened no-such-rdma-device")
	}
	if !strings.HasPrefix(err.Error(), "mlx5: open verbs device no-such-rdma-device: ") {
		t.Errorf("error %q", err)
	}
}

// TestVerbsDriver: OpenVerbs opens rxe with its driver data sizes, sends
// an mlx5 device to mlx5.Open and refuses a provider whose driver data it
// does not know.
func TestVerbsDriver(t *testing.T) {
	if sz, err := verbsDriver("open verbs device", "rxe0", uverbs.DriverRXE); err != nil || sz.CQ != 16 || sz.QP != 32 {
		t.Errorf("rxe: %+v, %v; want rxe_create_cq_resp's 16 and rxe_create_qp_resp's 32 bytes", sz, err)
	}
	_, err := verbsDriver("open verbs device", "mlx5_0", uverbs.DriverMLX5)
	if !errors.Is(err, mlx5.ErrInvalid) || !strings.Contains(err.Error(), "open verbs device mlx5_0: an mlx5 device: open it with mlx5.Open") {
		t.Errorf("mlx5: %v", err)
	}
	_, err = verbsDriver("open verbs device", "siw0", 16)
	if !errors.Is(err, mlx5.ErrUnsupported) || !strings.Contains(err.Error(), "open verbs device siw0: its kernel driver (rdma_driver_id 16)") {
		t.Errorf("an unknown driver: %v", err)
	}
}
