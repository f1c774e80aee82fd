package mlx5

import (
	"encoding/json"
	"strconv"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/oracle"
)

const dmabufVectors = "testdata/dmabuf.jsonl"

// TestOracleDmabuf compares the ioctls of PD.RegDmabufMR, Context.RegUMem,
// RegUMemWith and RegDmabufUMem with the ones rdma-core 44.0's
// ibv_reg_dmabuf_mr, mlx5dv_devx_umem_reg and mlx5dv_devx_umem_reg_ex sent
// (testdata/dmabuf.jsonl, from dmabuf_oracle.diff): every attribute's id,
// length, flags and inline bytes, in libibverbs' and libmlx5's order. The
// fds are numbers to the fake kernel and to the recorder alike; the
// dma-buf fd is checked against the one given, a UMEM's address against
// the memory registered. (The PD's handle is the recorder's own.)
func TestOracleDmabuf(t *testing.T) {
	r := newRecorded(t)
	pd, err := r.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	attr := func(want oracle.Call, g oracle.Got, name string) (oracle.GotAttr, bool) {
		for i, a := range want.Attrs {
			if a.Name == name {
				return g.Attrs[i], true
			}
		}
		return oracle.GotAttr{}, false
	}
	for _, kase := range []string{"mr/basic", "mr/offset_iova_rw", "mr/atomic_relaxed", "mr/large_fd_top_iova"} {
		c := oracle.Load(t, dmabufVectors, kase)
		var in struct {
			Offset, Length, Iova uint64
			FD                   int
			Access               uint32
		}
		if err := json.Unmarshal(c.Input, &in); err != nil {
			t.Fatal(err)
		}
		mr, err := pd.RegDmabufMR(in.FD, in.Offset, in.Length, in.Iova, AccessFlags(in.Access))
		if err != nil {
			t.Fatalf("%s: %v", kase, err)
		}
		want, g := c.Find(t, "MR", "REG_DMABUF_MR"), got(r.last)
		oracle.Compare(t, want, g)
		if mr.Addr() != in.Iova || mr.Len() != in.Length {
			t.Errorf("%s: Addr %#x Len %d", kase, mr.Addr(), mr.Len())
		}
		if err := mr.Close(); err != nil {
			t.Fatal(err)
		}
		oracle.Compare(t, oracle.Load(t, dmabufVectors, kase+"/dereg").Find(t, "MR", "MR_DESTROY"), got(r.last))
	}

	buf, err := AllocBuffer(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mem := buf.Bytes()
	for _, kase := range []string{"umem/legacy", "umem/ex_default_bitmap", "umem/ex_bitmap", "umem/ex_dmabuf", "umem/ex_dmabuf_64k"} {
		c := oracle.Load(t, dmabufVectors, kase)
		var in struct {
			Legacy        int    `json:"legacy"`
			AddrMinusBase int64  `json:"addr_minus_base"`
			Size          uint64 `json:"size"`
			Access        uint32 `json:"access"`
			PgszBitmap    string `json:"pgsz_bitmap"`
			CompMask      uint64 `json:"comp_mask"`
			DmabufFD      int    `json:"dmabuf_fd"`
		}
		if err := json.Unmarshal(c.Input, &in); err != nil {
			t.Fatal(err)
		}
		bitmap, err := strconv.ParseUint(in.PgszBitmap, 0, 64)
		if err != nil {
			t.Fatal(err)
		}
		if in.Legacy == 1 {
			bitmap = 0 // mlx5dv_devx_umem_reg takes none
		}
		var u *UMem
		var wantAddr uint64
		switch {
		case in.CompMask != 0:
			u, err = r.RegDmabufUMem(in.DmabufFD, uint64(in.AddrMinusBase), in.Size, UMemOptions{Access: AccessFlags(in.Access), PageSizes: bitmap})
			wantAddr = uint64(in.AddrMinusBase)
		case in.Legacy == 1:
			part := mem[in.AddrMinusBase : uint64(in.AddrMinusBase)+in.Size]
			u, err = r.RegUMem(part, AccessFlags(in.Access))
			wantAddr = uint64(uintptr(unsafe.Pointer(&part[0])))
		default:
			part := mem[in.AddrMinusBase : uint64(in.AddrMinusBase)+in.Size]
			u, err = r.RegUMemWith(part, UMemOptions{Access: AccessFlags(in.Access), PageSizes: bitmap})
			wantAddr = uint64(uintptr(unsafe.Pointer(&part[0])))
		}
		if err != nil {
			t.Fatalf("%s: %v", kase, err)
		}
		want, g := c.Find(t, "MLX5_DEVX_UMEM", "DEVX_UMEM_REG"), got(r.last)
		varying := []string{"ADDR"} // a process address
		if in.CompMask != 0 {
			varying = nil // the offset
		}
		oracle.Compare(t, want, g, varying...)
		if a, _ := attr(want, g, "ADDR"); a.Data != wantAddr {
			t.Errorf("%s: ADDR %#x, want %#x", kase, a.Data, wantAddr)
		}
		if a, ok := attr(want, g, "DMABUF_FD"); ok && a.Data != uint64(in.DmabufFD) {
			t.Errorf("%s: DMABUF_FD %d, want %d", kase, a.Data, in.DmabufFD)
		}
		if err := u.Close(); err != nil {
			t.Fatal(err)
		}
		oracle.Compare(t, oracle.Load(t, dmabufVectors, kase+"/dereg").Find(t, "MLX5_DEVX_UMEM", "DEVX_UMEM_DEREG"), got(r.last))
	}
}
