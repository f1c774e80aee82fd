package uverbs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/internal/rxeabi"
	"golang.org/x/sys/unix"
)

// rxe's driver data sizes (internal/rxeabi, <rdma/rdma_user_rxe.h>): rxe
// requires room for its responses, which describe the queues it lets the
// provider mmap.
const (
	rxeCreateCQResp  = int(unsafe.Sizeof(rxeabi.RxeCreateCqResp{}))
	rxeCreateQPResp  = int(unsafe.Sizeof(rxeabi.RxeCreateQpResp{}))
	rxeCreateSRQResp = int(unsafe.Sizeof(rxeabi.RxeCreateSrqResp{}))
)

// labMem maps n bytes of anonymous memory outside the Go heap.
func labMem(t testing.TB, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// labRoCEv2GID finds rxe0's RoCE v2 GID for dummy0's IPv4 address in
// sysfs: its table index and value.
func labRoCEv2GID(t testing.TB) (uint8, [16]byte) {
	t.Helper()
	i, g, ok := findRoCEv2GID()
	if !ok {
		t.Fatal("rxe0 has no IPv4-mapped RoCE v2 GID")
	}
	return i, g
}

// labRoCEv2GIDWait waits for the GID to (re)appear.
func labRoCEv2GIDWait(t testing.TB, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, _, ok := findRoCEv2GID(); ok {
			return
		}
	}
	t.Fatalf("rxe0's RoCE v2 GID did not come back in %v", d)
}

func findRoCEv2GID() (uint8, [16]byte, bool) {
	port := filepath.Join("/sys/class/infiniband", labenv.RXEDevice, "ports/1")
	for i := 0; i < 16; i++ {
		typ, err := os.ReadFile(filepath.Join(port, "gid_attrs/types", fmt.Sprint(i)))
		if err != nil || strings.TrimSpace(string(typ)) != "RoCE v2" {
			continue
		}
		g, err := os.ReadFile(filepath.Join(port, "gids", fmt.Sprint(i)))
		if err != nil {
			continue
		}
		a, err := netip.ParseAddr(strings.TrimSpace(string(g)))
		if err != nil || !a.Is4In6() {
			continue
		}
		return uint8(i), a.As16(), true
	}
	return 0, [16]byte{}, false
}

type labQPs struct {
	c      *Context
	pd     *PD
	cq     *CQ
	gidIdx uint8
	gid    [16]byte
}

func newLabQPs(t testing.TB, c *Context) *labQPs {
	t.Helper()
	pd, err := c.AllocPD(nil)
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(CQOptions{CQE: 64, DriverOut: make([]byte, rxeCreateCQResp)})
	if err != nil {
		t.Fatal(err)
	}
	l := &labQPs{c: c, pd: pd, cq: cq}
	l.gidIdx, l.gid = labRoCEv2GID(t)
	return l
}

func (l *labQPs) qp(t testing.TB, typ QPType) *QP {
	t.Helper()
	qp, err := l.c.CreateQP(QPInit{Type: typ, PD: l.pd, SendCQ: l.cq, RecvCQ: l.cq,
		Cap:       QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1},
		DriverOut: make([]byte, rxeCreateQPResp)})
	if err != nil {
		t.Fatal(err)
	}
	return qp
}

func (l *labQPs) av() AHAttr {
	return AHAttr{IsGlobal: true, Port: 1, GRH: GlobalRoute{DGID: l.gid, SGIDIndex: l.gidIdx, HopLimit: 64}}
}

func modifyAndCheck(t testing.TB, qp *QP, attr QPAttr, mask QPAttrMask) {
	t.Helper()
	if err := qp.Modify(&attr, mask); err != nil {
		t.Fatalf("QP %#x to %v: %v", qp.QPN, attr.State, err)
	}
	got, err := qp.Query(QPAttrState)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != attr.State {
		t.Fatalf("QP %#x: state %v after modify to %v", qp.QPN, got.State, attr.State)
	}
}

// connectRC takes a to RTS, connected to b's QPN over the RoCE v2 GID.
func (l *labQPs) connectRC(t testing.TB, a, b *QP) {
	t.Helper()
	modifyAndCheck(t, a, QPAttr{State: QPStateInit, Port: 1, AccessFlags: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead},
		QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrAccessFlags)
	modifyAndCheck(t, a, QPAttr{State: QPStateRTR, PathMTU: MTU1024, DestQPN: b.QPN, RQPSN: 100, MaxDestRdAtomic: 1,
		MinRNRTimer: 12, AH: l.av()},
		QPAttrState|QPAttrAV|QPAttrPathMTU|QPAttrDestQPN|QPAttrRQPSN|QPAttrMaxDestRdAtomic|QPAttrMinRNRTimer)
	modifyAndCheck(t, a, QPAttr{State: QPStateRTS, SQPSN: 100, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
		QPAttrState|QPAttrTimeout|QPAttrRetryCnt|QPAttrRNRRetry|QPAttrSQPSN|QPAttrMaxQPRdAtomic)
}

// awaitEvent reads async events until one of type want for which ok
// holds, for at most 10 s.
func awaitEvent(t testing.TB, c *Context, want EventType, ok func(AsyncEvent) bool) AsyncEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := c.NextAsyncEvent(ctx)
		if err != nil {
			t.Fatalf("waiting for %v: %v", want, err)
		}
		t.Logf("event: %v", ev)
		if ev.Type == want && ok(ev) {
			return ev
		}
	}
}

// Two RC QPs through RESET -> INIT -> RTR -> RTS with real GIDs; RTS ->
// SQD brings SQ_DRAINED on the async event file; SQD -> RTS; -> ERR.
func TestLabRCQPFlow(t *testing.T) {
	for _, forceWrite := range []bool{false, true} {
		t.Run(fmt.Sprintf("write=%v", forceWrite), func(t *testing.T) {
			labenv.Require(t)
			c, err := Open(labenv.RXEDevice, &Options{DriverID: DriverRXE, ForceWrite: forceWrite})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			l := newLabQPs(t, c)
			a, b := l.qp(t, QPTypeRC), l.qp(t, QPTypeRC)
			l.connectRC(t, a, b)
			l.connectRC(t, b, a)
			got, err := a.Query(QPAttrState | QPAttrAV | QPAttrDestQPN | QPAttrPathMTU)
			if err != nil {
				t.Fatal(err)
			}
			if got.DestQPN != b.QPN || got.AH.GRH.DGID != l.gid || got.PathMTU != MTU1024 || !got.AH.IsGlobal {
				t.Errorf("query: dest QPN %#x (want %#x), DGID %x, MTU %v, global %v", got.DestQPN, b.QPN, got.AH.GRH.DGID, got.PathMTU, got.AH.IsGlobal)
			}
			modifyAndCheck(t, a, QPAttr{State: QPStateSQD, EnSQDAsyncNotify: true}, QPAttrState|QPAttrEnSQDAsyncNotify)
			awaitEvent(t, c, EventSQDrained, func(ev AsyncEvent) bool { return ev.QP == a })
			// SQD -> RTS by the extended command (it has a response): by
			// write() this also proves IB_USER_VERBS_CMD_FLAG_EXTENDED and
			// struct ib_uverbs_ex_cmd_hdr, which BTF cannot check.
			if err := a.ModifyDriver(&QPAttr{State: QPStateRTS}, QPAttrState, nil, make([]byte, 8)); err != nil {
				t.Fatalf("SQD -> RTS (extended modify): %v", err)
			}
			if got, err := a.Query(QPAttrState); err != nil || got.State != QPStateRTS {
				t.Fatalf("after SQD -> RTS: %v, %v", got.State, err)
			}
			modifyAndCheck(t, a, QPAttr{State: QPStateErr}, QPAttrState)
			modifyAndCheck(t, b, QPAttr{State: QPStateErr}, QPAttrState)
			for _, o := range []interface{ Close() error }{a, b, l.cq, l.pd} {
				if err := o.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// Every object type is created and destroyed, by ioctl and by write().
func TestLabObjects(t *testing.T) {
	for _, forceWrite := range []bool{false, true} {
		t.Run(fmt.Sprintf("write=%v", forceWrite), func(t *testing.T) {
			labenv.Require(t)
			c, err := Open(labenv.RXEDevice, &Options{DriverID: DriverRXE, ForceWrite: forceWrite})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			l := newLabQPs(t, c)
			mem := labMem(t, 1<<20)
			mr, err := l.pd.RegMR(mem, uint64(unsafePointer(mem)), AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if mr.LKey == 0 || mr.RKey == 0 {
				t.Errorf("MR keys %#x %#x", mr.LKey, mr.RKey)
			}
			ch, err := c.CreateCompChannel()
			if err != nil {
				t.Fatal(err)
			}
			cq2, err := c.CreateCQ(CQOptions{CQE: 16, Channel: ch, DriverOut: make([]byte, rxeCreateCQResp)})
			if err != nil {
				t.Fatal(err)
			}
			if err := cq2.ReqNotify(false); err != nil {
				t.Fatal(err)
			}
			// No completion comes: the wait ends with the context.
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			start := time.Now()
			if _, err := ch.NextCQ(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("NextCQ on an idle channel: %v, want deadline exceeded", err)
			}
			cancel()
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("NextCQ returned %v after its deadline", d)
			}
			srq, err := l.pd.CreateSRQ(SRQOptions{MaxWR: 32, MaxSGE: 1, DriverOut: make([]byte, rxeCreateSRQResp)})
			if err != nil {
				t.Fatal(err)
			}
			if srq.MaxWR < 32 {
				t.Errorf("SRQ max WR %d", srq.MaxWR)
			}
			// Arm the limit (rxe wants struct rxe_modify_srq_cmd, 8
			// bytes, whose address it reads only to resize).
			if err := srq.Modify(SRQAttrLimit, 0, 4, make([]byte, 8)); err != nil {
				t.Errorf("arm the SRQ limit: %v", err)
			}
			onSRQ, err := c.CreateQP(QPInit{Type: QPTypeRC, PD: l.pd, SendCQ: l.cq, RecvCQ: cq2, SRQ: srq,
				Cap: QPCap{MaxSendWR: 4, MaxSendSGE: 1}, DriverOut: make([]byte, rxeCreateQPResp)})
			if err != nil {
				t.Fatal(err)
			}
			ud := l.qp(t, QPTypeUD)
			modifyAndCheck(t, ud, QPAttr{State: QPStateInit, Port: 1, QKey: 0x11111111}, QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrQKey)
			modifyAndCheck(t, ud, QPAttr{State: QPStateRTR}, QPAttrState)
			modifyAndCheck(t, ud, QPAttr{State: QPStateRTS, SQPSN: 1}, QPAttrState|QPAttrSQPSN)
			av := l.av()
			ah, err := l.pd.CreateAH(&av, nil)
			if err != nil {
				t.Fatal(err)
			}
			// A CQ in use cannot go: the kernel answers EBUSY.
			if err := cq2.Close(); !errors.Is(err, unix.EBUSY) {
				t.Errorf("closing a CQ a QP uses: %v, want EBUSY", err)
			}
			for _, o := range []interface{ Close() error }{ah, ud, onSRQ, srq, cq2, ch, mr, l.cq, l.pd} {
				if err := o.Close(); err != nil {
					t.Fatalf("%T: %v", o, err)
				}
				if err := o.Close(); err != nil {
					t.Fatalf("%T closed twice: %v", o, err)
				}
			}
		})
	}
}

func unsafePointer(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// Open with no options finds the driver id the kernel wants in RDMA
// netlink.
func TestLabOpenWithoutDriverID(t *testing.T) {
	labenv.Require(t)
	c, err := Open(labenv.RXEDevice, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.driverID != DriverRXE {
		t.Errorf("driver id %d, want %d", c.driverID, DriverRXE)
	}
	if _, err := c.QueryPort(1); err != nil {
		t.Error(err)
	}
}
