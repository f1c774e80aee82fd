package mlx5

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net"
	"testing"
	"time"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/oracle"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

func findCall(t *testing.T, calls []*vcall, kase, object, method string) *vcall {
	t.Helper()
	for _, c := range calls {
		if c.kase == kase && c.want.Object == object && c.want.Method == method {
			return c
		}
	}
	t.Fatalf("no %s %s in %s", object, method, kase)
	return nil
}

// On InfiniBand libmlx5 builds an address vector in userspace: its
// ibv_create_ah makes no kernel command, so the mlx5 layer does not call
// CreateAH there either. On RoCE it does (TestOracleVerbsReplay, roce/).
func TestOracleAHOnInfiniBand(t *testing.T) {
	for _, kase := range []string{"datapath_setup/create_ah_lid_0x22_sl3_path1", "datapath_setup/create_ah_grh_dgid_fe80_b859_rate3"} {
		c := oracle.Load(t, "testdata/datapath_setup.jsonl", kase)
		if len(c.KernelCmds) != 0 {
			t.Errorf("%s: %d kernel commands, libmlx5 made none", kase, len(c.KernelCmds))
		}
	}
}

// A context opened without DEVX: libmlx5 44.0 asks for DEVX all the same
// (and asks again without it only if GET_CONTEXT fails), so its request is
// byte for byte mlx5go's default one. DriverContext is the response the
// context opened with.
func TestOracleContextWithoutDEVX(t *testing.T) {
	calls := loadCalls(t, "testdata/verbs_cases.jsonl")
	withDEVX := findCall(t, calls, "verbs/base", "DEVICE", "GET_CONTEXT")
	req, err := ucontextRequest(&Options{})
	if err != nil {
		t.Fatal(err)
	}
	reqBytes := unsafe.Slice((*byte)(unsafe.Pointer(&req)), unsafe.Sizeof(req))
	for _, kase := range []string{"open_no_devx/ibv_open_device", "open_no_devx/mlx5dv_open_device_flags_0"} {
		w := findCall(t, calls, kase, "DEVICE", "GET_CONTEXT")
		lib := w.attr(t, "UHW_IN").in(t)
		if !bytes.Equal(lib, withDEVX.attr(t, "UHW_IN").in(t)) || !bytes.Equal(lib, reqBytes) {
			t.Errorf("%s: libmlx5 asked %x; with DEVX %x; mlx5go %x", kase, lib, withDEVX.attr(t, "UHW_IN").Hex, reqBytes)
		}
		// The whole GET_CONTEXT, and the response DriverContext keeps.
		r := newReplayer(t)
		r.want = w
		out := make([]byte, unsafe.Sizeof(mlx5abi.Mlx5IbAllocUcontextResp{}))
		if err := r.k.ctx.RecordGetContext(&uverbs.Options{DriverIn: reqBytes, DriverOut: out}); err != nil {
			t.Fatal(err)
		}
		oracle.Compare(t, w.want, got(r.calls[0]))
		resp := w.attr(t, "UHW_OUT").out(t)
		if dc := r.k.DriverContext(); !bytes.Equal(dc, resp) {
			t.Errorf("%s: DriverContext %x, kernel answered %x", kase, dc, resp)
		}
		var caps mlx5abi.Mlx5IbAllocUcontextResp
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&caps)), unsafe.Sizeof(caps)), r.k.DriverContext())
		if caps.CmdsSuppUhw&mlx5abi.MLX5_USER_CMDS_SUPP_UHW_CREATE_AH == 0 || caps.MaxSrqRecvWr != 32767 || caps.CqeVersion != 1 {
			t.Errorf("%s: response decodes to %+v", kase, caps)
		}
	}
	// mlx5go's NoDEVX differs from libmlx5 in the flags alone: it does
	// not ask for DEVX at all.
	noDEVX, _ := ucontextRequest(&Options{NoDEVX: true})
	req.Flags = 0
	if noDEVX != req {
		t.Errorf("NoDEVX request %+v differs from the default in more than flags", noDEVX)
	}
}

// A recording kernel device with no expectations: calls succeed, new
// handles are 779.
func newPlainKernel(t *testing.T, errno *unix.Errno) (*kernelDevice, *[]*uverbs.Call) {
	var calls []*uverbs.Call
	uctx := uverbs.NewRecordingContext(uverbs.DriverMLX5, func(c *uverbs.Call) unix.Errno {
		calls = append(calls, c)
		for i, a := range c.Attrs {
			if a.Flags&uverbsabi.UVERBS_ATTR_F_MANDATORY != 0 && a.Len == 0 && a.Data == 0 {
				c.Attrs[i].Data = 779
			}
		}
		if errno != nil {
			return *errno
		}
		return 0
	})
	t.Cleanup(func() { uctx.Close() })
	return &kernelDevice{ctx: uctx}, &calls
}

func TestKernelVerbsErrors(t *testing.T) {
	var errno unix.Errno
	k, calls := newPlainKernel(t, &errno)
	unknown := map[string]func() error{
		"destroy cq":  func() error { return k.DestroyCQ(5) },
		"destroy qp":  func() error { return k.DestroyQP(5) },
		"destroy srq": func() error { return k.DestroySRQ(5) },
		"destroy ah":  func() error { return k.DestroyAH(5) },
		"modify qp":   func() error { return k.ModifyQP(5, &seam.QPAttr{}, 1, nil, nil) },
		"query qp":    func() error { _, err := k.QueryQP(5, 1); return err },
		"modify srq":  func() error { return k.ModifySRQ(5, 1) },
		"create qp (pd)": func() error {
			_, _, err := k.CreateQP(seam.QPCreate{Type: seam.QPTypeRC, PD: 5}, nil, nil)
			return err
		},
		"create srq (pd)": func() error { _, _, err := k.CreateSRQ(seam.SRQCreate{PD: 5, MaxWR: 1}, nil, nil); return err },
		"create ah (pd)":  func() error { _, err := k.CreateAH(5, &seam.AHAttr{Port: 1}, 0, nil); return err },
	}
	for name, f := range unknown {
		*calls = nil
		if err := f(); !errors.Is(err, unix.ENOENT) {
			t.Errorf("%s of an unknown handle: %v, want ENOENT", name, err)
		}
		if len(*calls) != 0 {
			t.Errorf("%s of an unknown handle reached the kernel", name)
		}
	}

	pd, _, err := k.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	// Refused before the kernel: EINVAL, naming the call.
	*calls = nil
	if _, _, err := k.CreateCQ(seam.CQCreate{}, nil, nil); !errors.Is(err, unix.EINVAL) || len(*calls) != 0 {
		t.Errorf("CQ of 0 entries: %v, %d calls", err, len(*calls))
	}
	if _, _, err := k.CreateQP(seam.QPCreate{Type: 9, PD: pd, SendCQ: seam.NoHandle, RecvCQ: seam.NoHandle,
		SRQ: seam.NoHandle}, nil, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QP type 9: %v", err)
	}
	if _, _, err := k.CreateCQ(seam.CQCreate{CQE: 1, Channel: fakeChannel{}}, nil, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a foreign completion channel: %v", err)
	}
	cq, _, err := k.CreateCQ(seam.CQCreate{CQE: 1}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel's answer: the uverbs CallError, the errno inside. A CQ
	// the kernel refuses to destroy stays known and can be destroyed
	// later.
	errno = unix.EBUSY
	err = k.DestroyCQ(cq)
	var ce *uverbs.CallError
	if !errors.Is(err, unix.EBUSY) || !errors.As(err, &ce) || ce.Op != "destroy cq" {
		t.Errorf("refused destroy: %v", err)
	}
	errno = 0
	if err := k.DestroyCQ(cq); err != nil {
		t.Errorf("destroy after a refusal: %v", err)
	}
	if err := k.DestroyCQ(cq); !errors.Is(err, unix.ENOENT) {
		t.Errorf("second destroy: %v", err)
	}
	if _, _, err := k.CreateQP(seam.QPCreate{Type: seam.QPTypeUC, PD: pd, SendCQ: seam.NoHandle, RecvCQ: seam.NoHandle,
		SRQ: seam.NoHandle}, nil, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("UC QP without CQs: %v", err)
	}
	if _, err := k.QueryPort(0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("port 0: %v", err)
	}
}

type fakeChannel struct{}

func (fakeChannel) Next(context.Context) (uint64, error) { return 0, errors.New("no") }
func (fakeChannel) Fd() int                              { return 3 }
func (fakeChannel) Close() error                         { return nil }

// The async event file gives the user handle the object was created with,
// as the seam gave it, or the port.
func TestKernelAsyncEvents(t *testing.T) {
	k, _ := newPlainKernel(t, nil)
	pd, _, _ := k.AllocPD()
	cq, _, err := k.CreateCQ(seam.CQCreate{CQE: 1, UserHandle: 0xc0}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := k.CreateQP(seam.QPCreate{Type: seam.QPTypeRC, PD: pd, SendCQ: cq, RecvCQ: cq, SRQ: seam.NoHandle,
		UserHandle: 0x5151}, nil, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, ev := range []seam.AsyncEvent{{Type: uint32(uverbs.EventSQDrained), Element: 0x5151},
		{Type: uint32(uverbs.EventCQErr), Element: 0xc0}, {Type: uint32(uverbs.EventPortActive), Element: 1}} {
		if err := k.ctx.RecordAsyncEvent(uverbs.EventType(ev.Type), ev.Element); err != nil {
			t.Fatal(err)
		}
		got, err := k.NextAsyncEvent(ctx)
		if err != nil || got != ev {
			t.Errorf("event %+v, %v; want %+v", got, err, ev)
		}
	}
	short, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if _, err := k.NextAsyncEvent(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no event: %v", err)
	}
}

// A completion channel's Next is the user handle of the CQ, and the CQ
// created on it names the channel's fd.
func TestKernelCompChannel(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[1])
	var calls []*uverbs.Call
	uctx := uverbs.NewRecordingContext(uverbs.DriverMLX5, func(c *uverbs.Call) unix.Errno {
		calls = append(calls, c)
		if c.Hdr.ObjectID == uverbsabi.UVERBS_OBJECT_DEVICE && c.Hdr.MethodID == uverbsabi.UVERBS_METHOD_INVOKE_WRITE {
			binary.LittleEndian.PutUint32(c.Data[2], uint32(p[0])) // struct ib_uverbs_create_comp_channel_resp
		}
		return 0
	})
	defer uctx.Close()
	k := &kernelDevice{ctx: uctx}
	ch, err := k.NewCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if ch.Fd() != p[0] {
		t.Errorf("channel fd %d, the kernel's %d", ch.Fd(), p[0])
	}
	if _, _, err := k.CreateCQ(seam.CQCreate{CQE: 1, Channel: ch, UserHandle: 0xabc}, nil, nil); err != nil {
		t.Fatal(err)
	}
	last := calls[len(calls)-1]
	found := false
	for _, a := range last.Attrs {
		if a.AttrID == uverbsabi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL {
			found = a.Data == uint64(p[0])
		}
	}
	if !found {
		t.Errorf("CQ_CREATE without the channel's fd")
	}
	var d [8]byte
	binary.NativeEndian.PutUint64(d[:], 0xabc)
	unix.Write(p[1], d[:])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if h, err := ch.Next(ctx); err != nil || h != 0xabc {
		t.Errorf("completion event %#x, %v", h, err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if _, err := ch.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no event: %v", err)
	}
}

// QueryPort is libibverbs' QUERY_PORT and reads the kernel's answer into
// the seam's fields.
func TestOracleKernelQueryPort(t *testing.T) {
	w := findCall(t, loadCalls(t, "testdata/create_cmds.jsonl"), "open_device", "DEVICE", "QUERY_PORT")
	r := newReplayer(t)
	var pa seam.PortAttr
	r.replay(w, "QUERY_PORT", false, func() error {
		var err error
		pa, err = r.k.QueryPort(1)
		return err
	})
	want := seam.PortAttr{State: 4, MaxMTU: 5, ActiveMTU: 5, GIDTableLen: 8, PortCapFlags: 0x2651e848, MaxMsgSz: 1 << 30, LID: 1, SMLID: 1,
		LinkLayer: 1}
	if pa != want {
		t.Errorf("port %+v, want %+v", pa, want)
	}
}

// QueryGIDTable gives each RoCE GID its netdev's MAC; a netdev without an
// Ethernet address fails the call, naming the GID.
func TestKernelQueryGIDTable(t *testing.T) {
	var mac net.HardwareAddr
	eth := 0
	if ifs, err := net.Interfaces(); err == nil {
		for _, ifi := range ifs {
			if len(ifi.HardwareAddr) == 6 {
				eth, mac = ifi.Index, ifi.HardwareAddr
				break
			}
		}
	}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skipf("no loopback interface: %v", err)
	}
	table := func(ifindex int) ([]seam.GIDEntry, error) {
		uctx := uverbs.NewRecordingContext(uverbs.DriverMLX5, func(c *uverbs.Call) unix.Errno {
			switch {
			case c.Hdr.ObjectID == uverbsabi.UVERBS_OBJECT_DEVICE && c.Hdr.MethodID == uverbsabi.UVERBS_METHOD_INVOKE_WRITE:
				// QUERY_DEVICE(_EX): one port
				for i, a := range c.Attrs {
					if a.AttrID == uverbsabi.UVERBS_ATTR_CORE_OUT {
						var r uverbsabi.IbUverbsExQueryDeviceResp
						r.Base.PhysPortCnt = 1
						copy(c.Data[i], unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r)))
					}
				}
			case c.Hdr.MethodID == uverbsabi.UVERBS_METHOD_QUERY_PORT:
				var r uverbsabi.IbUverbsQueryPortRespEx
				r.LegacyResp.GidTblLen = 2
				copy(c.Data[1], unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r)))
			case c.Hdr.MethodID == uverbsabi.UVERBS_METHOD_QUERY_GID_TABLE:
				es := []uverbsabi.IbUverbsGidEntry{
					{GidIndex: 0, PortNum: 1, GidType: uverbsabi.IB_UVERBS_GID_TYPE_IB},
					{GidIndex: 1, PortNum: 1, GidType: uverbsabi.IB_UVERBS_GID_TYPE_ROCE_V2, NetdevIfindex: uint32(ifindex)},
				}
				es[0].Gid[0], es[1].Gid[0] = 0xfe80, 0xffff
				for i, a := range c.Attrs {
					switch a.AttrID {
					case uverbsabi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES:
						copy(c.Data[i], unsafe.Slice((*byte)(unsafe.Pointer(&es[0])), len(es)*uverbsabi.SizeofIbUverbsGidEntry))
					case uverbsabi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES:
						binary.LittleEndian.PutUint64(c.Data[i], 2)
					}
				}
			}
			return 0
		})
		defer uctx.Close()
		return (&kernelDevice{ctx: uctx}).QueryGIDTable()
	}
	if _, err := table(lo.Index); err == nil {
		t.Errorf("a RoCE GID on lo (no Ethernet address) gave no error")
	}
	if eth == 0 {
		t.Skip("no interface with an Ethernet address here")
	}
	es, err := table(eth)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].MAC != [6]byte{} || !bytes.Equal(es[1].MAC[:], mac) || es[1].Type != 2 || es[1].Index != 1 {
		t.Errorf("table %+v, want the RoCE GID with %v", es, mac)
	}
	t.Logf("RoCE GID on %d: MAC %s", eth, hex.EncodeToString(es[1].MAC[:]))
}
