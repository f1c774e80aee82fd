package uverbs

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/internal/rxeabi"
	"golang.org/x/sys/unix"
)

// TestLabODPTraffic moves data through an ODP MR on rxe0: an RC QP
// connected to itself over rxe0's RoCE v2 GID, posted with rxe's own
// queue format (rxeq_lab_test.go), RDMA WRITEs from a plain MR into an
// ODP MR over memory fresh from mmap and never touched (one range advised
// with PREFETCH_WRITE first, one not: the kernel faults it in), an RDMA
// READ out of the ODP MR and a SEND whose receive buffer is in it. It is
// uverbs-level, since mlx5's data path needs an mlx5 device. On Linux
// 7.2.13 rxe puts a packet that starts inside a page of an ODP MR at the
// page's start: MultiPacketUnaligned recognises that and skips. A kernel
// whose rxe has no ODP refuses the registration (EINVAL in 6.1,
// EOPNOTSUPP later, as ib_check_mr_access does), and the test skips
// saying so.
func TestLabODPTraffic(t *testing.T) {
	c := openLab(t)
	a, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	rc := a.ODPCaps.RC
	t.Logf("rxe0 odp caps: general %#x, rc %#x", a.ODPCaps.General, rc)
	pd, err := c.AllocPD(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pd.Close() })

	const page, size = 4096, 1 << 20
	odpMem := labMem(t, size) // never touched by the CPU before the device writes it
	access := AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead
	odp, err := pd.RegMR(odpMem, uint64(unsafePointer(odpMem)), access|AccessOnDemand, nil, nil)
	if err != nil {
		var errno unix.Errno
		if a.ODPCaps.General&ODPSupport == 0 && errors.As(err, &errno) && (errno == unix.EOPNOTSUPP || errno == unix.EINVAL) {
			t.Skipf("rxe0 of this kernel has no ODP (caps %#x): the kernel refuses the ODP MR with %s: %v", a.ODPCaps.General, unix.ErrnoName(errno), err)
		}
		t.Fatalf("ODP MR (caps %#x): %v", a.ODPCaps.General, err)
	}
	t.Cleanup(func() { odp.Close() })
	if a.ODPCaps.General&ODPSupport == 0 {
		t.Errorf("ODP MR registered although rxe0 reports no IB_ODP_SUPPORT (%#x)", a.ODPCaps.General)
	}
	plainMem := labMem(t, size)
	plain := regPlainMR(t, pd, plainMem)

	cq, q := newRXELoopback(t, c, pd)

	pattern := func(b []byte, seed byte) {
		for i := range b {
			b[i] = seed + byte(uint32(i)*2654435761>>13) // no period a transfer could hide in
		}
	}
	// The ranges, each in pages no one touched before the step that uses
	// it. Each message of the first four subtests is one packet (at most
	// the path MTU, 1024 bytes) starting on a page boundary, which Linux
	// 7.2.13's rxe places right; MultiPacketUnaligned is the general case
	// (see there).
	sge := func(mr *MR, mem []byte, off, n int) rxeabi.RxeSge {
		return rxeabi.RxeSge{Addr: uint64(unsafePointer(mem[off:])), Length: uint32(n), Lkey: mr.LKey}
	}
	var wrID uint64
	// rdma posts one RDMA WRITE from plainMem[off:off+n] to the ODP MR's
	// bytes at the same offset, or one RDMA READ back, and waits for it.
	rdma := func(t *testing.T, opcode uint32, off, n int) {
		t.Helper()
		wrID++
		if err := q.postSend(rxeWR{wrID: wrID, opcode: opcode, sge: sge(plain, plainMem, off, n),
			remoteAddr: uint64(unsafePointer(odpMem[off:])), rkey: odp.RKey}); err != nil {
			t.Fatal(err)
		}
		want := uint32(rxeabi.IB_WC_RDMA_WRITE)
		if opcode == rxeabi.IB_WR_RDMA_READ {
			want = rxeabi.IB_WC_RDMA_READ
		}
		if wc := cq.expect(t, wrID, want); wc.ByteLen != uint32(n) && opcode == rxeabi.IB_WR_RDMA_READ {
			t.Fatalf("RDMA READ of %d bytes: byte_len %d", n, wc.ByteLen)
		}
	}
	write := func(t *testing.T, off, n int, seed byte) {
		t.Helper()
		src := plainMem[off : off+n]
		pattern(src, seed)
		rdma(t, rxeabi.IB_WR_RDMA_WRITE, off, n)
		if !bytes.Equal(odpMem[off:off+n], src) {
			t.Fatalf("RDMA WRITE of %d bytes into the ODP MR at %#x: the bytes did not arrive", n, off)
		}
	}
	const mtu = 1024

	t.Run("WriteUntouched", func(t *testing.T) {
		// Three pages the kernel must fault in on the device's writes.
		for p := range 3 {
			write(t, p*page, mtu, byte(1+p))
		}
	})
	t.Run("AdviseThenWrite", func(t *testing.T) {
		if err := pd.AdviseMR(AdvisePrefetchWrite, AdviseFlush, []SGE{{Addr: uint64(unsafePointer(odpMem[16*page:])), Length: 6 * page, LKey: odp.LKey}}); err != nil {
			t.Fatalf("advise PREFETCH_WRITE with FLUSH: %v", err)
		}
		write(t, 16*page, mtu, 4)
		write(t, 21*page, 512, 5)
	})
	t.Run("Read", func(t *testing.T) {
		// What WriteUntouched wrote, read into plain memory that held
		// something else; then a page of the ODP MR never touched at
		// all: zeros, faulted in for the device's read.
		for _, p := range []int{1, 128} {
			var want []byte
			if p == 1 {
				want = append(want, odpMem[p*page:p*page+mtu]...)
			} else {
				want = make([]byte, mtu)
			}
			pattern(plainMem[p*page:p*page+mtu], 9)
			rdma(t, rxeabi.IB_WR_RDMA_READ, p*page, mtu)
			if !bytes.Equal(plainMem[p*page:p*page+mtu], want) {
				t.Fatalf("RDMA READ of %d bytes from the ODP MR's page %d: wrong bytes", mtu, p)
			}
		}
	})
	t.Run("SendIntoODPReceive", func(t *testing.T) {
		off, n := 160*page, mtu
		if err := q.postRecv(1000, sge(odp, odpMem, off, n)); err != nil {
			t.Fatal(err)
		}
		src := plainMem[96*page : 96*page+n]
		pattern(src, 6)
		wrID++
		if err := q.postSend(rxeWR{wrID: wrID, opcode: rxeabi.IB_WR_SEND, sge: sge(plain, plainMem, 96*page, n)}); err != nil {
			t.Fatal(err)
		}
		// One QP, one CQ: the send's and the receive's completions come
		// in either order.
		got := map[uint64]rxeabi.IbUverbsWc{}
		for range 2 {
			wc, err := cq.poll(10 * time.Second)
			if err != nil {
				t.Fatalf("SEND into an ODP receive buffer: %v (have %v)", err, got)
			}
			got[wc.WrID] = wc
		}
		s, r := got[wrID], got[1000]
		if s.Status != rxeabi.IB_WC_SUCCESS || s.Opcode != rxeabi.IB_WC_SEND {
			t.Errorf("send completion %+v", s)
		}
		if r.Status != rxeabi.IB_WC_SUCCESS || r.Opcode != rxeabi.IB_WC_RECV || r.ByteLen != uint32(n) || r.QpNum != q.qp.QPN {
			t.Errorf("receive completion %+v, want success, RECV, %d bytes on QP %#x", r, n, q.qp.QPN)
		}
		if !bytes.Equal(odpMem[off:off+n], src) {
			t.Fatal("SEND into the ODP MR's receive buffer: the bytes did not arrive")
		}
	})
	t.Run("MultiPacketUnaligned", func(t *testing.T) {
		// A WRITE of 3.5 pages from inside a page: 14 packets, each at an
		// offset inside its page. Linux 7.2.13's rxe copies every
		// packet's bytes for an ODP MR to the start of the page instead,
		// dropping the offset in the page (a plain MR gets them right, as
		// do packets that start a page): the test recognises exactly that
		// placement, names it and skips; anything else wrong fails.
		off, n := 200*page+0x808, 3*page+page/2
		src := plainMem[off : off+n]
		pattern(src, 7)
		rdma(t, rxeabi.IB_WR_RDMA_WRITE, off, n)
		got := odpMem[200*page : 205*page]
		if bytes.Equal(got[0x808:0x808+n], src) {
			return
		}
		// The message starts in page 0 and ends 8 bytes into page 4:
		// pages 0 to 3 are what the copy that drops the offset makes of
		// them, byte for byte. Those last 8 bytes (which such a copy
		// would put at page 4's start) hold other bytes of src on 7.2.13,
		// so the comparison stops at page 4.
		if model := dropPageOffset(len(got), 0x808, src, mtu, page); bytes.Equal(got[:4*page], model[:4*page]) {
			t.Skipf("rxe0 of this kernel misplaces ODP MR data: each packet of a %d-byte RDMA WRITE at page offset %#x landed at the start of its page, as if the offset in the page were 0", n, 0x808)
		}
		t.Fatalf("RDMA WRITE of %d bytes into the ODP MR at page offset %#x: the bytes did not arrive; %s", n, 0x808, placement(got, src, page))
	})
}

// dropPageOffset is where a copy that ignores the offset in the page puts
// a message src of mtu-sized packets written at off of a zeroed,
// page-aligned region of n bytes: each piece of a packet within one page
// at that page's start.
func dropPageOffset(n, off int, src []byte, mtu, page int) []byte {
	out := make([]byte, n)
	for p := 0; p < len(src); p += mtu {
		pkt := src[p:min(p+mtu, len(src))]
		for pos := off + p; len(pkt) > 0; {
			in := pos % page
			k := min(len(pkt), page-in)
			copy(out[pos-in:], pkt[:k])
			pkt, pos = pkt[k:], pos+k
		}
	}
	return out
}

// placement describes where src's bytes are in got, page by page: the
// runs of bytes that match src somewhere, by their offset in src.
func placement(got, src []byte, page int) string {
	var b strings.Builder
	for p := 0; p < len(got); p += page {
		fmt.Fprintf(&b, "page %d:", p/page)
		for i := p; i < p+page; {
			if got[i] == 0 {
				i++
				continue
			}
			j := bytes.Index(src, got[i:min(i+16, p+page)])
			k := i + 1
			for k < p+page && j >= 0 && j+k-i < len(src) && got[k] == src[j+k-i] {
				k++
			}
			fmt.Fprintf(&b, " [%#x,%#x)=src[%#x:]", i-p, k-p, j)
			i = k
		}
		b.WriteString(";")
	}
	return b.String()
}

// TestLabODPTrafficPlainMR is the control of TestLabODPTraffic on every
// kernel: the same poster and QP with the target a plain (pinned) MR, a
// multi-packet RDMA WRITE from inside a page, the READ back and a SEND,
// all placed exactly; so what TestLabODPTraffic sees is the ODP MR's.
func TestLabODPTrafficPlainMR(t *testing.T) {
	c := openLab(t)
	pd, err := c.AllocPD(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pd.Close() })
	const page, size = 4096, 1 << 18
	mem := labMem(t, size)
	mr := regPlainMR(t, pd, mem)
	cq, q := newRXELoopback(t, c, pd)
	for i := range mem[:16*page] {
		mem[i] = byte(uint32(i)*2654435761>>13) + 1
	}
	sge := func(off, n int) rxeabi.RxeSge {
		return rxeabi.RxeSge{Addr: uint64(unsafePointer(mem[off:])), Length: uint32(n), Lkey: mr.LKey}
	}
	n := 3*page + page/2
	steps := []struct {
		name          string
		wr            rxeWR
		want          uint32
		dst, src, len int
	}{
		{"RDMA WRITE", rxeWR{opcode: rxeabi.IB_WR_RDMA_WRITE, sge: sge(0x808, n), remoteAddr: uint64(unsafePointer(mem[16*page+0x808:]))}, rxeabi.IB_WC_RDMA_WRITE, 16*page + 0x808, 0x808, n},
		{"RDMA READ", rxeWR{opcode: rxeabi.IB_WR_RDMA_READ, sge: sge(32*page+0x10, n), remoteAddr: uint64(unsafePointer(mem[16*page+0x808:]))}, rxeabi.IB_WC_RDMA_READ, 32*page + 0x10, 0x808, n},
	}
	for i, s := range steps {
		s.wr.wrID, s.wr.rkey = uint64(i+1), mr.RKey
		if err := q.postSend(s.wr); err != nil {
			t.Fatal(err)
		}
		cq.expect(t, s.wr.wrID, s.want)
		if !bytes.Equal(mem[s.dst:s.dst+s.len], mem[s.src:s.src+s.len]) {
			t.Fatalf("%s of %d bytes through a plain MR: wrong bytes; %s", s.name, s.len, placement(mem[s.dst&^(page-1):s.dst&^(page-1)+5*page], mem[s.src:s.src+s.len], page))
		}
	}
	if err := q.postRecv(100, sge(48*page+8, n)); err != nil {
		t.Fatal(err)
	}
	if err := q.postSend(rxeWR{wrID: 101, opcode: rxeabi.IB_WR_SEND, sge: sge(0x808, n)}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		wc, err := cq.poll(10 * time.Second)
		if err != nil || wc.Status != rxeabi.IB_WC_SUCCESS || (wc.WrID == 100) != (wc.Opcode == rxeabi.IB_WC_RECV) {
			t.Fatalf("SEND/RECV through a plain MR: %+v, %v", wc, err)
		}
	}
	if !bytes.Equal(mem[48*page+8:48*page+8+n], mem[0x808:0x808+n]) {
		t.Fatal("SEND of 14336 bytes into a plain MR: wrong bytes")
	}
}
