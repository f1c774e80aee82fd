package mlx5_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// Issue 15, item 9: registered memory must stay mapped, and stay the
// registration's, while the device may use it. On a ConnectX the kernel
// pins the pages of an MR or a UMEM (ib_umem_get), so neither munmap nor
// the Go runtime can pull them from under the device; mlx5go keeps a
// Buffer's mapping while a registration covers it, and pins Go memory.

const memAccess = mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteRead

// isMapped reports whether every page of b is mapped readable and
// writable in this process (/proc/self/maps), so that a test can say the
// memory is gone instead of faulting on it.
func isMapped(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	page := uint64(unix.Getpagesize())
	start := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) &^ (page - 1)
	end := (uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) + uint64(len(b)) + page - 1) &^ (page - 1)
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() && start < end {
		fields := bytes.Fields(s.Bytes())
		lo, hi, ok := bytes.Cut(fields[0], []byte("-"))
		if !ok || len(fields) < 2 {
			continue
		}
		a, _ := strconv.ParseUint(string(lo), 16, 64)
		z, _ := strconv.ParseUint(string(hi), 16, 64)
		if z <= start {
			continue
		}
		if a > start || !bytes.HasPrefix(fields[1], []byte("rw")) {
			return false
		}
		start = z
	}
	return start >= end
}

// pattern fills b with bytes that depend on seed.
func pattern(b []byte, seed byte) {
	for i := range b {
		b[i] = seed ^ byte(i*7) ^ byte(i>>8)
	}
}

func hasPattern(b []byte, seed byte) bool {
	for i := range b {
		if b[i] != seed^byte(i*7)^byte(i>>8) {
			return false
		}
	}
	return true
}

// memRig is a rig with a self-connected RC QP that writes from the rig's
// buffer into other memory.
type memRig struct {
	*rig
	qp *mlx5.QP
}

func newMemRig(t *testing.T) *memRig {
	r := newRig(t, "cx7", model.Options{}, 64)
	return &memRig{rig: r, qp: r.qp(t, mlx5.QPOptions{MaxSendWR: 16}, true)}
}

// writeInto RDMA-writes n bytes of pattern seed from the rig's buffer to
// addr through rkey, and waits for the completion.
func (r *memRig) writeInto(t *testing.T, addr uint64, rkey uint32, n int, seed byte) {
	t.Helper()
	pattern(r.buf.Bytes()[:n], seed)
	wr := &mlx5.SendWR{WrID: uint64(seed), Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, RemoteAddr: addr, RKey: rkey,
		SGL: []mlx5.SGE{{Addr: r.mr.Addr(), Length: uint32(n), LKey: r.mr.LKey()}}}
	if err := r.qp.PostSend(wr); err != nil {
		t.Fatal(err)
	}
	got, err := r.poll(t, 1, 5*time.Second)
	if err != nil || len(got) != 1 || got[0].Status != mlx5.WCSuccess {
		t.Fatalf("RDMA WRITE into the registered memory: %v, %+v", err, got)
	}
}

// Closing a Buffer under a registration succeeds, and its memory stays
// mapped until the last registration is closed: a WRITE into the MR lands
// in it instead of faulting the process in the device.
func TestBufferClosedUnderRegistrationStaysMapped(t *testing.T) {
	r := newMemRig(t)
	const size = 3 * 4096
	for _, kase := range []struct {
		name     string
		off, len int // the registered part of the Buffer
		umem     bool
	}{
		{"MR over the whole Buffer", 0, size, false},
		{"MR over a sub-slice", 4096 + 100, 2000, false},
		{"UMEM", 0, size, true},
	} {
		t.Run(kase.name, func(t *testing.T) {
			before := mlx5.LiveBuffers()
			b, err := mlx5.AllocBuffer(size)
			if err != nil {
				t.Fatal(err)
			}
			mem := b.Bytes()
			reg := mem[kase.off : kase.off+kase.len]
			var closeReg func() error
			var mr *mlx5.MR
			if kase.umem {
				u, err := r.c.RegUMem(reg, mlx5.AccessLocalWrite)
				if err != nil {
					t.Fatal(err)
				}
				closeReg = u.Close
			} else {
				if mr, err = r.pd.RegMR(reg, memAccess); err != nil {
					t.Fatal(err)
				}
				closeReg = mr.Close
			}
			pattern(mem, 0x5a)
			if err := b.Close(); err != nil {
				t.Fatalf("Buffer.Close under a live registration: %v", err)
			}
			if b.Bytes() != nil {
				t.Error("Bytes after Close is not nil")
			}
			if !isMapped(mem) || !hasPattern(mem, 0x5a) {
				t.Fatalf("after Buffer.Close under a live %s the memory was unmapped (mapped %v): the device would write into whatever takes its addresses", kase.name, isMapped(mem))
			}
			if mr != nil {
				r.writeInto(t, mr.Addr(), mr.RKey(), kase.len, 0xc3)
				if !hasPattern(reg, 0xc3) {
					t.Error("the WRITE did not land in the registered memory")
				}
			}
			if err := closeReg(); err != nil {
				t.Fatal(err)
			}
			if got := mlx5.LiveBuffers(); got != before {
				t.Errorf("%d Buffer mappings after the last registration closed, want %d: the closed Buffer was not unmapped", got, before)
			}
		})
	}
}

// A registration of a closed Buffer's memory is refused with ErrClosed,
// even while another registration keeps it mapped.
func TestRegistrationOfClosedBufferIsRefused(t *testing.T) {
	r := newMemRig(t)
	b, err := mlx5.AllocBuffer(8192)
	if err != nil {
		t.Fatal(err)
	}
	mem := b.Bytes()
	mr, err := r.pd.RegMR(mem, memAccess)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	b.Close()
	if _, err := r.pd.RegMR(mem[:4096], memAccess); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("RegMR of a closed Buffer's memory: %v, want ErrClosed", err)
	}
	if _, err := r.c.RegUMem(mem, mlx5.AccessLocalWrite); !errors.Is(mlx5.Checked(t, err), mlx5.ErrClosed) {
		t.Errorf("RegUMem of a closed Buffer's memory: %v, want ErrClosed", err)
	}
}

// churn puts the garbage collector under pressure and maps and unmaps
// Buffers of size bytes, so that memory a Buffer's cleanup wrongly
// unmapped is soon another Buffer's.
func churn(size int, stop <-chan struct{}, wg *sync.WaitGroup, cycles *atomic.Int64) {
	defer wg.Done()
	var keep [][]byte
	for {
		select {
		case <-stop:
			return
		default:
		}
		runtime.GC()
		cycles.Add(1)
		for range 4 {
			if b, err := mlx5.AllocBuffer(size); err == nil {
				pattern(b.Bytes(), 0xee) // another owner's bytes
				runtime.KeepAlive(b)
			}
		}
		keep = append(keep, make([]byte, 1<<16))
		if len(keep) > 64 {
			keep = keep[:0]
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// The natural Go pattern: a program keeps its registration and the slice
// from Bytes, not the *Buffer. The registration keeps the Buffer, so the
// garbage collector's cleanup does not unmap the memory under it: under
// GC pressure and mapping churn, a canary stays, and WRITEs from two
// posting goroutines land where they should.
func TestRegistrationKeepsUnreachableBufferMapped(t *testing.T) {
	labenv.SkipUnderQEMUUser(t, "its /proc/self/maps, which the model reads to check user memory as ib_umem_get would, is qemu's emulation, and a read of it during this test's mapping churn misses mappings that are there (a doorbell record or CQ buffer, in every run)")
	r := newRig(t, "cx7", model.Options{}, 64)
	const size = 1 << 16
	// Two posters, each with its QP and CQ, WRITE into their own quarter
	// of the MR; the second half of the MR holds a canary.
	mr, mem := func() (*mlx5.MR, []byte) {
		b, err := mlx5.AllocBuffer(size)
		if err != nil {
			t.Fatal(err)
		}
		mr, err := r.pd.RegMR(b.Bytes(), memAccess)
		if err != nil {
			t.Fatal(err)
		}
		return mr, b.Bytes() // and not b
	}()
	um, umem := func() (*mlx5.UMem, []byte) {
		b, err := mlx5.AllocBuffer(size)
		if err != nil {
			t.Fatal(err)
		}
		u, err := r.c.RegUMem(b.Bytes(), mlx5.AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		return u, b.Bytes()
	}()
	pattern(mem[size/2:], 0x3c)
	pattern(umem, 0x4b)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var cycles atomic.Int64
	wg.Add(1)
	go churn(size, stop, &wg, &cycles)
	defer func() { close(stop); wg.Wait() }()

	errs := make(chan error, 2)
	for p := range 2 {
		cq, err := r.c.CreateCQ(mlx5.CQOptions{Entries: 16})
		if err != nil {
			t.Fatal(err)
		}
		qp, err := r.c.CreateQP(mlx5.QPOptions{PD: r.pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 8})
		if err != nil {
			t.Fatal(err)
		}
		path, err := r.c.LoopbackPath(1)
		if err != nil {
			t.Fatal(err)
		}
		if err := qp.Connect(qp.QPN(), path); err != nil {
			t.Fatal(err)
		}
		src := r.buf.Bytes()[p*8192 : (p+1)*8192]
		dst := mem[p*size/4 : p*size/4+8192]
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- poster(qp, cq, src, r.mr, dst, mr, byte(p))
		}()
	}
	// Meanwhile, and for 20 collections at least, the canaries must stay.
	for done, i := 0, 0; done < 2 || cycles.Load() < 20; i++ {
		select {
		case err := <-errs:
			done++
			if err != nil {
				t.Error(err)
			}
		default:
		}
		if !isMapped(mem) || !hasPattern(mem[size/2:], 0x3c) {
			t.Fatalf("check %d: the MR's memory was unmapped or reused under it (mapped %v)", i, isMapped(mem))
		}
		if !isMapped(umem) || !hasPattern(umem, 0x4b) {
			t.Fatalf("check %d: the UMEM's memory was unmapped or reused under it (mapped %v)", i, isMapped(umem))
		}
		time.Sleep(time.Millisecond)
	}
	if err := mr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := um.Close(); err != nil {
		t.Fatal(err)
	}
}

// poster WRITEs src into dst through mr 64 times with a new pattern each
// time, and checks after each completion that dst holds it.
func poster(qp *mlx5.QP, cq *mlx5.CQ, src []byte, smr *mlx5.MR, dst []byte, mr *mlx5.MR, id byte) error {
	wc := make([]mlx5.Completion, 4)
	for i := range 64 {
		if !isMapped(dst) {
			return fmt.Errorf("poster %d, round %d: the MR's memory is no longer mapped", id, i)
		}
		seed := id<<6 | byte(i)
		pattern(src, seed)
		wr := &mlx5.SendWR{WrID: uint64(i), Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled,
			RemoteAddr: uint64(uintptr(unsafe.Pointer(&dst[0]))), RKey: mr.RKey(),
			SGL: []mlx5.SGE{{Addr: uint64(uintptr(unsafe.Pointer(&src[0]))), Length: uint32(len(src)), LKey: smr.LKey()}}}
		if err := qp.PostSend(wr); err != nil {
			return err
		}
		n := 0
		for end := time.Now().Add(mustCome); n == 0 && time.Now().Before(end); {
			var err error
			if n, err = cq.Poll(wc); err != nil {
				return err
			}
			if n == 0 {
				time.Sleep(50 * time.Microsecond)
			}
		}
		if n != 1 || wc[0].Status != mlx5.WCSuccess {
			return fmt.Errorf("poster %d, round %d: %d completions %+v", id, i, n, wc[:n])
		}
		if !hasPattern(dst, seed) {
			return fmt.Errorf("poster %d, round %d: the WRITE did not land in the program's slice of the MR", id, i)
		}
	}
	return nil
}

// A registration may span two adjacent Buffers: it keeps both mapped.
func TestRegistrationSpanningTwoBuffers(t *testing.T) {
	r := newMemRig(t)
	page := unix.Getpagesize()
	before := mlx5.LiveBuffers()
	var lo, hi *mlx5.Buffer
	var spare []*mlx5.Buffer
	addr := func(b *mlx5.Buffer) uintptr { return uintptr(unsafe.Pointer(&b.Bytes()[0])) }
	for range 8 {
		a, err := mlx5.AllocBuffer(page)
		if err != nil {
			t.Fatal(err)
		}
		b, err := mlx5.AllocBuffer(page)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case addr(a)+uintptr(page) == addr(b):
			lo, hi = a, b
		case addr(b)+uintptr(page) == addr(a):
			lo, hi = b, a
		default:
			spare = append(spare, a, b)
			continue
		}
		break
	}
	for _, b := range spare {
		b.Close()
	}
	if lo == nil {
		t.Skip("no two adjacent Buffer mappings in 8 tries")
	}
	span := unsafe.Slice(&lo.Bytes()[page-64], 128)
	mr, err := r.pd.RegMR(span, memAccess)
	if err != nil {
		t.Fatal(err)
	}
	lo.Close()
	hi.Close()
	if !isMapped(span) {
		t.Fatal("a Buffer under a registration spanning two was unmapped")
	}
	r.writeInto(t, mr.Addr(), mr.RKey(), len(span), 0x77)
	if !hasPattern(span, 0x77) {
		t.Error("the WRITE across the two Buffers did not land")
	}
	if err := mr.Close(); err != nil {
		t.Fatal(err)
	}
	if got := mlx5.LiveBuffers(); got != before {
		t.Errorf("%d Buffer mappings after the registration closed, want %d", got, before)
	}
}

// Memory the program mapped itself, and Go memory, register and take
// WRITEs as before.
func TestRegistrationOfOtherMemory(t *testing.T) {
	r := newMemRig(t)
	own, err := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(own)
	for name, mem := range map[string][]byte{"mmap": own, "Go heap": make([]byte, 8192)} {
		mr, err := r.pd.RegMR(mem, memAccess)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		runtime.GC()
		r.writeInto(t, mr.Addr(), mr.RKey(), len(mem), 0x19)
		if !hasPattern(mem, 0x19) {
			t.Errorf("%s: the WRITE did not land", name)
		}
		if err := mr.Close(); err != nil {
			t.Fatal(err)
		}
		u, err := r.c.RegUMem(mem, mlx5.AccessLocalWrite)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := u.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Registrations of Go memory on a context that is dropped without Close
// stay pinned; the runtime does not panic over a leaked Pinner.
func TestLeakedRegistrationsOfGoMemory(t *testing.T) {
	func() {
		dev, err := model.New("cx7")
		if err != nil {
			t.Fatal(err)
		}
		c := mlx5.NewContext(dev)
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pd.RegMR(make([]byte, 4096), memAccess); err != nil {
			t.Fatal(err)
		}
		if _, err := c.RegUMem(make([]byte, 4096), mlx5.AccessLocalWrite); err != nil {
			t.Fatal(err)
		}
	}()
	for range 20 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// The also of issue 15: destroying a UMEM or a DEVX object that another
// object uses fails as the kernel fails it, names the object, and leaves
// it usable. devx_umem_cleanup and devx_obj_cleanup return the errno of
// the destroy command (mlx5_cmd_exec: cmd_status_to_err of the status),
// and uverbs_destroy_uobject keeps the handle when destroy_hw fails.
func TestDestroyInUseFailsAndKeepsTheObject(t *testing.T) {
	c, _ := onModel(t, "cx7")
	o := createAll(t, c)

	err := o.umem.Close()
	var e *mlx5.Error
	switch {
	case err == nil:
		t.Fatal("UMem.Close of a UMEM a QP uses succeeded")
	case !errors.As(err, &e):
		t.Errorf("UMem.Close: %T %v, want *mlx5.Error", err, err)
	case e.Obj != fmt.Sprintf("UMEM %#x", o.umem.ID()):
		t.Errorf("UMem.Close: %v names %q, want the UMEM", err, e.Obj)
	}
	if !errors.Is(mlx5.Checked(t, err), unix.EINVAL) || !errors.Is(err, prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR) {
		t.Errorf("UMem.Close of a UMEM in use: %v, want EINVAL from DESTROY_UMEM's BAD_RES_STATE", err)
	}
	err = o.cq.Close()
	if !errors.As(err, &e) || !errors.Is(mlx5.Checked(t, err), unix.EINVAL) || !errors.Is(err, prm.MLX5_CMD_STAT_BAD_RES_STATE_ERR) {
		t.Errorf("DevxObj.Close of a CQ a QP uses: %v, want a *mlx5.Error with EINVAL from DESTROY_CQ's BAD_RES_STATE", err)
	}

	// Both still work: the CQ answers QUERY_CQ, the UMEM takes another QP.
	in := mailbox(prm.QueryCqIn.Layout(), prm.MLX5_CMD_OP_QUERY_CQ)
	prm.QueryCqIn.Cqn.Set(in, uint64(o.cqn))
	if err := o.cq.Query(in, prm.QueryCqOut.Layout().New()); err != nil {
		t.Errorf("QUERY_CQ after a refused destroy: %v", err)
	}
	if err := o.qp.Close(); err != nil {
		t.Fatal(err)
	}
	in = mailbox(prm.CreateQpIn.Layout(), prm.MLX5_CMD_OP_CREATE_QP)
	qpc := prm.CreateQpIn.Qpc
	prm.Qpc.Pd.At(qpc).Set(in, uint64(o.pdn))
	prm.Qpc.CqnSnd.At(qpc).Set(in, uint64(o.cqn))
	prm.Qpc.CqnRcv.At(qpc).Set(in, uint64(o.cqn))
	prm.Qpc.LogSqSize.At(qpc).Set(in, 4)
	prm.Qpc.DbrUmemId.At(qpc).Set(in, uint64(o.umem.ID()))
	prm.CreateQpIn.WqUmemId.Set(in, uint64(o.umem.ID()))
	qp, _ := create(t, c, in, 16)
	for _, x := range []interface{ Close() error }{qp, o.cq, o.umem} {
		if err := x.Close(); err != nil {
			t.Errorf("%T.Close once nothing uses it: %v", x, err)
		}
	}
}
