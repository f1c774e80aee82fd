package mlx5_test

import (
	"errors"
	"math"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
)

// dmabufRig is a loopback RC pair on the model with an ordinary MR and a
// dma-buf the model exported, mapped for the test to look at.
type dmabufRig struct {
	c      *mlx5.Context
	pd     *mlx5.PD
	cq     *mlx5.CQ
	a, b   *mlx5.QP
	buf    *mlx5.Buffer
	mr     *mlx5.MR
	fd     int
	dmabuf []byte // the dma-buf's bytes, as the CPU sees them
}

func newDmabufRig(t *testing.T, size int) *dmabufRig {
	t.Helper()
	c := mlx5test.New(t, "cx7")
	fd, err := mlx5test.ExportDmabuf(c, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return newDmabufRigOn(t, c, fd, fd, size)
}

// newDmabufRigOn is the rig on c for the dma-buf fd, whose bytes the test
// sees through a shared mapping of cpu (the dma-buf itself, or the memfd
// behind a udmabuf).
func newDmabufRigOn(t *testing.T, c *mlx5.Context, fd, cpu, size int) *dmabufRig {
	t.Helper()
	r := &dmabufRig{c: c, fd: fd}
	var err error
	if r.dmabuf, err = unix.Mmap(cpu, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(r.dmabuf) })
	if r.pd, err = r.c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if r.buf, err = mlx5.AllocBuffer(1 << 16); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.buf.Close() })
	if r.mr, err = r.pd.RegMR(r.buf.Bytes(), mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite|mlx5.AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	if r.cq, err = r.c.CreateCQ(mlx5.CQOptions{Entries: 64}); err != nil {
		t.Fatal(err)
	}
	opt := mlx5.QPOptions{PD: r.pd, SendCQ: r.cq, RecvCQ: r.cq, MaxSendWR: 16, MaxSendSGE: 1, MaxRecvWR: 16, MaxRecvSGE: 1}
	if r.a, err = r.c.CreateQP(opt); err != nil {
		t.Fatal(err)
	}
	if r.b, err = r.c.CreateQP(opt); err != nil {
		t.Fatal(err)
	}
	path, err := r.c.LoopbackPath(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.a.Connect(r.b.QPN(), path); err != nil {
		t.Fatal(err)
	}
	if err := r.b.Connect(r.a.QPN(), path); err != nil {
		t.Fatal(err)
	}
	return r
}

// post posts one signaled work request on A and waits for its
// completion (and B's receive, if recv).
func (r *dmabufRig) post(t *testing.T, wr *mlx5.SendWR, recv bool) {
	t.Helper()
	wr.Flags |= mlx5.SendSignaled
	b := r.a.Begin()
	b.Add(wr)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	n := 1
	if recv {
		n = 2
	}
	for _, w := range pollN(t, r.cq, n, 10*time.Second) {
		if w.Status != mlx5.WCSuccess {
			t.Fatalf("%v: %+v", wr.Opcode, w)
		}
	}
}

// TestDmabufMRDataPath: an RDMA WRITE into a dma-buf MR lands in the
// dma-buf's bytes at offset + (address - iova), an RDMA READ and a SEND
// from it carry them out.
func TestDmabufMRDataPath(t *testing.T) {
	const size, off, length = 64 << 10, 8192, 16384
	const iova = 0x7f00_0000_1000 // any address the device names it by
	newDmabufRig(t, size).dataPath(t, off, length, iova)
}

// dataPath registers [off, off+length) of the rig's dma-buf at iova and
// moves bytes through it: WRITE in, READ and SEND out, and a WRITE past
// its end fails.
func (r *dmabufRig) dataPath(t *testing.T, off, length int, iova uint64) {
	t.Helper()
	dmr, err := r.pd.RegDmabufMR(r.fd, uint64(off), uint64(length), iova, mlx5.AccessLocalWrite|mlx5.AccessRemoteWrite|mlx5.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	if dmr.Addr() != iova || dmr.Len() != uint64(length) || dmr.LKey() == 0 || dmr.RKey() == 0 {
		t.Fatalf("dma-buf MR: addr %#x len %d lkey %#x rkey %#x", dmr.Addr(), dmr.Len(), dmr.LKey(), dmr.RKey())
	}
	mem := r.buf.Bytes()
	copy(mem, "written into the GPU's memory")
	r.post(t, &mlx5.SendWR{WrID: 1, Opcode: mlx5.OpRDMAWrite, SGL: []mlx5.SGE{{Addr: r.mr.Addr(), Length: 29, LKey: r.mr.LKey()}},
		RemoteAddr: iova + 100, RKey: dmr.RKey()}, false)
	if got := string(r.dmabuf[off+100 : off+129]); got != "written into the GPU's memory" {
		t.Fatalf("the dma-buf holds %q at offset %d", got, off+100)
	}
	copy(r.dmabuf[off+length-10:], "read back!")
	r.post(t, &mlx5.SendWR{WrID: 2, Opcode: mlx5.OpRDMARead, SGL: []mlx5.SGE{{Addr: r.mr.Addr() + 4096, Length: 10, LKey: r.mr.LKey()}},
		RemoteAddr: iova + uint64(length) - 10, RKey: dmr.RKey()}, false)
	if got := string(mem[4096:4106]); got != "read back!" {
		t.Fatalf("READ from the dma-buf brought %q", got)
	}
	// A SEND gathers from the dma-buf through its lkey.
	if err := r.b.PostRecv(3, []mlx5.SGE{{Addr: r.mr.Addr() + 8192, Length: 64, LKey: r.mr.LKey()}}); err != nil {
		t.Fatal(err)
	}
	r.post(t, &mlx5.SendWR{WrID: 4, Opcode: mlx5.OpSend, SGL: []mlx5.SGE{{Addr: iova + 100, Length: 29, LKey: dmr.LKey()}}}, true)
	if got := string(mem[8192 : 8192+29]); got != "written into the GPU's memory" {
		t.Fatalf("SEND from the dma-buf brought %q", got)
	}
	// Past the registered range: the key check fails the WRITE.
	b := r.a.Begin()
	b.Add(&mlx5.SendWR{WrID: 5, Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, SGL: []mlx5.SGE{{Addr: r.mr.Addr(), Length: 16, LKey: r.mr.LKey()}},
		RemoteAddr: iova + uint64(length) - 8, RKey: dmr.RKey()})
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if w := pollN(t, r.cq, 1, 10*time.Second)[0]; w.Status == mlx5.WCSuccess {
		t.Fatalf("a WRITE past the dma-buf MR's end succeeded: %+v", w)
	}
	if err := dmr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dmr.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestDmabufUMem: UMEMs over a dma-buf and over memory with a page-size
// bitmap; the model needs 4 KiB in the bitmap, as the kernel finds no
// page size otherwise for memory of scattered 4 KiB pages.
func TestDmabufUMem(t *testing.T) {
	c := mlx5test.New(t, "cx7")
	fd, err := mlx5test.ExportDmabuf(c, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	u, err := c.RegDmabufUMem(fd, 4096, 8192, mlx5.UMemOptions{Access: mlx5.AccessLocalWrite})
	if err != nil {
		t.Fatal(err)
	}
	if u.ID() == 0 {
		t.Fatal("umem id 0")
	}
	buf, err := mlx5.AllocBuffer(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	v, err := c.RegUMemWith(buf.Bytes(), mlx5.UMemOptions{Access: mlx5.AccessLocalWrite, PageSizes: 1<<12 | 1<<21})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegUMemWith(buf.Bytes(), mlx5.UMemOptions{PageSizes: 1 << 21}); !errors.Is(err, unix.EINVAL) || errors.Is(err, mlx5.ErrInvalid) {
		t.Fatalf("2 MiB pages only: %v, want the device's EINVAL", err)
	}
	for _, x := range []*mlx5.UMem{u, v} {
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDmabufHostile: bad input is refused before anything is sent (ErrInvalid),
// and what only the device can judge (the fd's file, the dma-buf's size) with
// the kernel's errno.
func TestDmabufHostile(t *testing.T) {
	c := mlx5test.New(t, "cx7")
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := mlx5test.ExportDmabuf(c, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	const rw = mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite
	invalid := []struct {
		name              string
		fd                int
		off, length, iova uint64
		access            mlx5.AccessFlags
	}{
		{"fd -1", -1, 0, 4096, 0, rw},
		{"fd past int32", math.MaxInt32 + 1, 0, 4096, 0, rw},
		{"length 0", fd, 0, 0, 0, rw},
		{"offset+length overflows", fd, math.MaxUint64 - 4095, 4096, 0, rw},
		{"iova+length overflows", fd, 0, 4096, math.MaxUint64 - 100, rw},
		{"unknown access", fd, 0, 4096, 0, mlx5.AccessLocalWrite | 1<<6},
		{"remote write without local write", fd, 0, 4096, 0, mlx5.AccessRemoteWrite},
	}
	for _, tc := range invalid {
		if _, err := pd.RegDmabufMR(tc.fd, tc.off, tc.length, tc.iova, tc.access); !errors.Is(err, mlx5.ErrInvalid) {
			t.Errorf("MR, %s: %v, want ErrInvalid", tc.name, err)
		}
		if tc.iova != 0 || tc.access != rw {
			continue
		}
		if _, err := c.RegDmabufUMem(tc.fd, tc.off, tc.length, mlx5.UMemOptions{Access: mlx5.AccessLocalWrite}); !errors.Is(err, mlx5.ErrInvalid) {
			t.Errorf("UMEM, %s: %v, want ErrInvalid", tc.name, err)
		}
	}
	for _, opt := range []mlx5.UMemOptions{
		{PageSizes: 1},       // 1 byte
		{PageSizes: 1 << 11}, // 2 KiB
		{PageSizes: mlx5.DefaultUMemPageSizes | 1<<11},
		{Access: mlx5.AccessRemoteAtomic},
		{Access: 1 << 20},
	} {
		if _, err := c.RegDmabufUMem(fd, 0, 4096, opt); !errors.Is(err, mlx5.ErrInvalid) {
			t.Errorf("dma-buf UMEM %+v: %v, want ErrInvalid", opt, err)
		}
		if _, err := c.RegUMemWith(make([]byte, 4096), opt); !errors.Is(err, mlx5.ErrInvalid) {
			t.Errorf("UMEM %+v: %v, want ErrInvalid", opt, err)
		}
	}
	if _, err := c.RegUMemWith(nil, mlx5.UMemOptions{PageSizes: 1 << 12}); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("empty UMEM: %v", err)
	}
	// The largest page size the field takes (2^63) is a size.
	if u, err := c.RegDmabufUMem(fd, 0, 4096, mlx5.UMemOptions{PageSizes: 1<<63 | 1<<12}); err != nil {
		t.Errorf("2^63 and 4 KiB pages: %v", err)
	} else {
		u.Close()
	}

	// Files that are no dma-buf, as the kernel's dma_buf_get answers them.
	f, err := os.CreateTemp(t.TempDir(), "notdmabuf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Truncate(1 << 16)
	memfd, err := unix.MemfdCreate("notdmabuf", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(memfd)
	unix.Ftruncate(memfd, 1<<16)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	closed, err := unix.Dup(memfd)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(closed)
	for _, tc := range []struct {
		name string
		fd   int
		want unix.Errno
	}{
		{"regular file", int(f.Fd()), unix.EINVAL},
		{"memfd", memfd, unix.EINVAL},
		{"pipe", p[0], unix.EINVAL},
		{"closed fd", closed, unix.EBADF},
	} {
		if _, err := pd.RegDmabufMR(tc.fd, 0, 4096, 0, rw); !errors.Is(err, tc.want) || errors.Is(err, mlx5.ErrInvalid) {
			t.Errorf("MR on a %s: %v, want the device's %v", tc.name, err, tc.want)
		}
		if _, err := c.RegDmabufUMem(tc.fd, 0, 4096, mlx5.UMemOptions{}); !errors.Is(err, tc.want) || errors.Is(err, mlx5.ErrInvalid) {
			t.Errorf("UMEM on a %s: %v, want the device's %v", tc.name, err, tc.want)
		}
	}
	// Past the dma-buf's size (64 KiB): EINVAL from the device.
	if _, err := pd.RegDmabufMR(fd, 60<<10, 8<<10, 0, rw); !errors.Is(err, unix.EINVAL) || errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("MR past the dma-buf: %v", err)
	}
	if _, err := c.RegDmabufUMem(fd, 1<<16, 1, mlx5.UMemOptions{}); !errors.Is(err, unix.EINVAL) || errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("UMEM past the dma-buf: %v", err)
	}
	// The whole dma-buf, to its last byte, is fine.
	if m, err := pd.RegDmabufMR(fd, 0, 1<<16, math.MaxUint64-(1<<16), rw); err != nil {
		t.Errorf("the whole dma-buf at the top iova: %v", err)
	} else {
		m.Close()
	}

	// Nil and closed objects.
	var nilPD *mlx5.PD
	if _, err := nilPD.RegDmabufMR(fd, 0, 4096, 0, rw); err == nil {
		t.Error("nil PD registered")
	}
	var nilCtx *mlx5.Context
	if _, err := nilCtx.RegDmabufUMem(fd, 0, 4096, mlx5.UMemOptions{}); err == nil {
		t.Error("nil Context registered")
	}
	if _, err := nilCtx.RegUMemWith(make([]byte, 4096), mlx5.UMemOptions{}); err == nil {
		t.Error("nil Context registered")
	}
	if err := pd.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := pd.RegDmabufMR(fd, 0, 4096, 0, rw); !errors.Is(err, mlx5.ErrClosed) {
		t.Errorf("closed PD: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegDmabufUMem(fd, 0, 4096, mlx5.UMemOptions{}); !errors.Is(err, mlx5.ErrClosed) {
		t.Errorf("closed Context: %v", err)
	}
	if _, err := c.RegUMemWith(make([]byte, 4096), mlx5.UMemOptions{}); !errors.Is(err, mlx5.ErrClosed) {
		t.Errorf("closed Context: %v", err)
	}
}
