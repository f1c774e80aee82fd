package flows

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/mlx5"
)

// rdma-core's DC scenarios (tests/test_mlx5_dc.py of v44.0, and of master
// for test_dc_atomic, test_dc_stream_ids_recovery and
// test_dc_stream_qp_recovery), on its resources (tests/mlx5_base.py
// Mlx5DcResources and Mlx5DcStreamsRes): a client and a server, each with
// two DCIs, an SRQ and a DCT on it, one CQ for all three, and an MR; every
// work request names the peer's DCT through a global AH, its number and
// rdma-core's access key. Where rdma-core gives every work request wr_id
// 0x123 and polls one completion, these flows give each its own wr_id and
// check every completion exactly once (status, wr_id, opcode, QP, and the
// byte length of receives and RDMA READs), on both sides, and that no
// other comes.

// dcKey is the access key of rdma-core's DCTs (tests/base.py DCT_KEY).
const dcKey = 0xbadc0de

// dcMsg is rdma-core's message size (tests/base.py BaseResources
// msg_size).
const dcMsg = 1024

// Where each side's buffer holds what: the message it sends or writes,
// what it receives, what the peer's RDMA WRITEs land on, what the peer
// reads, what its own RDMA READs bring back, the peer's atomic targets and
// its own atomics' old values.
const (
	dcOffSend   = 0
	dcOffRecv   = 1 * dcMsg
	dcOffWrite  = 2 * dcMsg
	dcOffRead   = 3 * dcMsg
	dcOffBack   = 4 * dcMsg
	dcOffAtomic = 5 * dcMsg // 8-byte aligned
	dcOffOld    = 6 * dcMsg // one 8-byte slot per atomic
	dcBufSize   = 8 * dcMsg
)

// dcSide is one side of rdma-core's Mlx5DcResources: its PD, one CQ for
// its DCIs and its DCT, an SRQ for the DCT, two DCIs (QPCap: 100 send WRs,
// no receives, 1 SGE), a DCT of key dcKey in RTR, a global AH to the port
// and an MR.
type dcSide struct {
	name string
	c    *mlx5.Context
	path mlx5.AddressPath
	pd   *mlx5.PD
	cq   *mlx5.CQ
	srq  *mlx5.SRQ
	dcis []*mlx5.QP
	dct  *mlx5.QP
	ah   *mlx5.AH
	buf  []byte
	mr   *mlx5.MR
	// Each DCI's streams and errored streams (2^LogConcurrent and
	// 2^LogErrored; 1 and 1 without streams), and the stream id of its
	// last work request (the stream flows rotate them).
	streams, errored []int
	stream           []uint16
	// id is the last wr_id given on this side.
	id uint64
}

// dcStreamLogs are the DCI streams of rdma-core's Mlx5DcStreamsRes
// (generate_dci_attr): DCI 0 has more concurrent streams than errored
// ones, DCI 1 the other way round, each bounded by the device's caps.
var dcStreamLogs = [2]mlx5.DCIStreams{{LogConcurrent: 3, LogErrored: 2}, {LogConcurrent: 2, LogErrored: 3}}

// newDCSide makes one side on c: DCIs with streams if withStreams (the
// test skips, as rdma-core's, on a device without them), an MR of the
// access given. t's cleanup closes it all.
func newDCSide(t testing.TB, c *mlx5.Context, name string, withStreams bool, access mlx5.AccessFlags) *dcSide {
	t.Helper()
	s := &dcSide{name: name, c: c}
	var err error
	if s.path, err = c.LoopbackPath(1); err != nil {
		t.Fatalf("%s: loopback path: %v", name, err)
	}
	s.path.MTU = 3 // rdma-core's PATH_MTU, IBV_MTU_1024
	var closers []interface{ Close() error }
	t.Cleanup(func() {
		slices.Reverse(closers)
		closeAll(t, closers...)
	})
	keep := func(x interface{ Close() error }, err error, what string) {
		t.Helper()
		if errors.Is(err, mlx5.ErrUnsupported) {
			t.Skipf("%s: %s: %v (rdma-core skips: 'Create DC QP is not supported')", name, what, err)
		}
		if err != nil {
			t.Fatalf("%s: %s: %v", name, what, err)
		}
		closers = append(closers, x)
	}
	s.pd, err = c.AllocPD()
	keep(s.pd, err, "alloc pd")
	s.cq, err = c.CreateCQ(mlx5.CQOptions{Entries: 512})
	keep(s.cq, err, "create cq")
	s.srq, err = c.CreateSRQ(mlx5.SRQOptions{PD: s.pd, MaxWR: 64, MaxSGE: 1})
	keep(s.srq, err, "create srq")
	s.ah, err = s.pd.CreateAH(s.path)
	keep(s.ah, err, "create ah")

	var caps mlx5.DCIStreams
	if withStreams {
		caps = c.Caps().MaxDCIStreams
		if caps.LogConcurrent == 0 {
			t.Skipf("%s: the device has no DCI streams (mlx5dv_query_device's dci_streams: max_log_num_concurent 0); rdma-core skips: 'DCI caps is not supported by HW'", name)
		}
	}
	for i := range 2 {
		o := mlx5.QPOptions{Type: mlx5.QPTypeDCI, PD: s.pd, SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: 100, MaxSendSGE: 1}
		n, e := 1, 1
		if withStreams {
			want := dcStreamLogs[i]
			o.DCIStreams = &mlx5.DCIStreams{LogConcurrent: min(want.LogConcurrent, caps.LogConcurrent), LogErrored: min(want.LogErrored, caps.LogErrored)}
			n, e = 1<<o.DCIStreams.LogConcurrent, 1<<o.DCIStreams.LogErrored
		}
		q, err := c.CreateQP(o)
		keep(q, err, fmt.Sprintf("create DCI %d", i))
		s.dcis = append(s.dcis, q)
		s.streams, s.errored = append(s.streams, n), append(s.errored, e)
		// rdma-core's start: stream id qp_idx, incremented before each
		// work request.
		s.stream = append(s.stream, uint16(i%n))
		s.dciToRTS(t, q)
	}
	s.dct, err = c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeDCT, PD: s.pd, SendCQ: s.cq, RecvCQ: s.cq, SRQ: s.srq, DCAccessKey: dcKey})
	keep(s.dct, err, "create DCT")
	// rdma-core's create_qp_attr: every access, its RNR attributes, the
	// global route; the DCT goes to RTR only.
	modifyQP(t, s.dct, mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1,
		Access: mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteAtomic | mlx5.AccessRemoteRead},
		mlx5.QPAttrState|mlx5.QPAttrPKeyIndex|mlx5.QPAttrPort|mlx5.QPAttrAccessFlags)
	modifyQP(t, s.dct, mlx5.QPAttr{State: mlx5.QPStateRTR, Path: s.path, MinRNRTimer: 12},
		mlx5.QPAttrState|mlx5.QPAttrAV|mlx5.QPAttrPathMTU|mlx5.QPAttrMinRNRTimer)

	b, err := mlx5.AllocBuffer(dcBufSize)
	if err != nil {
		t.Fatal(err)
	}
	closers = append(closers, b)
	s.buf = b.Bytes()
	s.mr, err = s.pd.RegMR(s.buf, access)
	keep(s.mr, err, "reg mr")
	return s
}

// dciToRTS takes a DCI from RESET to RTS as rdma-core's to_rts does for
// one (no access flags; the path at RTR; rdma-core's TIMEOUT 14,
// RETRY_CNT 7, RNR_RETRY 7, MAX_RD_ATOMIC 1 at RTS).
func (s *dcSide) dciToRTS(t testing.TB, q *mlx5.QP) {
	t.Helper()
	modifyQP(t, q, mlx5.QPAttr{State: mlx5.QPStateInit, Port: 1}, mlx5.QPAttrState|mlx5.QPAttrPKeyIndex|mlx5.QPAttrPort)
	modifyQP(t, q, mlx5.QPAttr{State: mlx5.QPStateRTR, Path: s.path}, mlx5.QPAttrState|mlx5.QPAttrPathMTU|mlx5.QPAttrAV)
	modifyQP(t, q, mlx5.QPAttr{State: mlx5.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
		mlx5.QPAttrState|mlx5.QPAttrTimeout|mlx5.QPAttrRetryCnt|mlx5.QPAttrRNRRetry|mlx5.QPAttrSQPSN|mlx5.QPAttrMaxQPRdAtomic)
}

// modifyQP modifies q or fails the test.
func modifyQP(t testing.TB, q *mlx5.QP, a mlx5.QPAttr, mask mlx5.QPAttrMask) {
	t.Helper()
	if err := q.Modify(&a, mask); err != nil {
		t.Fatalf("QP %#x to %v: %v", q.QPN(), a.State, err)
	}
}

// newDCPair is rdma-core's create_players: a client and a server.
func newDCPair(t testing.TB, c *mlx5.Context, withStreams bool, access mlx5.AccessFlags) (client, server *dcSide) {
	t.Helper()
	return newDCSide(t, c, "client", withStreams, access), newDCSide(t, c, "server", withStreams, access)
}

// dcFullAccess is the access of rdma-core's MRs (Mlx5DcResources'
// default mr_access).
const dcFullAccess = mlx5.AccessLocalWrite | mlx5.AccessRemoteWrite | mlx5.AccessRemoteAtomic | mlx5.AccessRemoteRead

// nextID is a new wr_id of s.
func (s *dcSide) nextID() uint64 {
	s.id++
	return s.id
}

// nextStream is the stream id of DCI i's next work request: rdma-core's
// generate_stream_id increments it before each, but wraps within the
// DCI's 2^LogConcurrent streams, where rdma-core lets it run to 2^log + 2
// (mlx5 refuses a stream the DCI does not have: docs/MLX5.md).
func (s *dcSide) nextStream(i int) uint16 {
	s.stream[i] = uint16((int(s.stream[i]) + 1) % s.streams[i])
	return s.stream[i]
}

// to fills in wr's DC address: s's AH, the peer's DCT and rdma-core's key.
func (s *dcSide) to(peer *dcSide, wr mlx5.SendWR) mlx5.SendWR {
	wr.AH, wr.RemoteQPN, wr.DCAccessKey = s.ah, peer.dct.QPN(), dcKey
	return wr
}

// sge is the SGE of n bytes at off in s's MR.
func (s *dcSide) sge(off, n int) []mlx5.SGE {
	return []mlx5.SGE{{Addr: s.mr.Addr() + uint64(off), Length: uint32(n), LKey: s.mr.LKey()}}
}

// pattern writes a pattern of seed into b.
func pattern(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed*131 + i*7 + 1)
	}
}

// expectCQ polls cq for exactly the completions wants lists, in any order,
// each once (status; opcode and, for receives and RDMA READs, byte length
// of a success), fails the test for any other, and for one that comes
// within a millisecond after the last; it returns them in wants' order.
func expectCQ(t testing.TB, cq *mlx5.CQ, wants ...want) []mlx5.Completion {
	t.Helper()
	got := make([]mlx5.Completion, len(wants))
	seen := make([]bool, len(wants))
	for _, wc := range waitCQ(t, cq, len(wants)) {
		i := slices.IndexFunc(wants, func(w want) bool { return w.wrID == wc.WrID && w.qp.QPN() == wc.QPN })
		switch {
		case i < 0:
			t.Fatalf("completion of a work request nobody waits for: %+v (want %v)", wc, wants)
		case seen[i]:
			t.Fatalf("a second completion of work request %d of QP %#x: %+v", wc.WrID, wc.QPN, wc)
		}
		seen[i], got[i] = true, wc
		w := wants[i]
		switch {
		case wc.Status != w.status:
			t.Errorf("work request %d of QP %#x: %v (vendor syndrome %#x), want %v", wc.WrID, wc.QPN, wc.Status, wc.VendorErr, w.status)
		case w.status != mlx5.WCSuccess:
		case wc.Opcode != w.opcode:
			t.Errorf("work request %d of QP %#x: opcode %v, want %v", wc.WrID, wc.QPN, wc.Opcode, w.opcode)
		case (w.opcode == mlx5.WCRecv || w.opcode == mlx5.WCRDMARead) && wc.ByteLen != w.byteLen:
			t.Errorf("work request %d of QP %#x: %d bytes, want %d", wc.WrID, wc.QPN, wc.ByteLen, w.byteLen)
		}
	}
	quietCQ(t, cq, time.Millisecond)
	return got
}

// waitCQ polls cq until n completions came, failing the test after
// mustCome.
func waitCQ(t testing.TB, cq *mlx5.CQ, n int) []mlx5.Completion {
	t.Helper()
	wc := make([]mlx5.Completion, n)
	got := 0
	for deadline := time.Now().Add(mustCome); got < n; {
		k, err := cq.Poll(wc[got:])
		if err != nil {
			t.Fatalf("poll after %d of %d completions: %v", got, n, err)
		}
		got += k
		if got < n && time.Now().After(deadline) {
			t.Fatalf("%d of %d completions after %v: %+v", got, n, mustCome, wc[:got])
		}
		if got < n && k == 0 {
			time.Sleep(50 * time.Microsecond)
		}
	}
	return wc
}

// quietCQ fails the test if a completion arrives on cq within d.
func quietCQ(t testing.TB, cq *mlx5.CQ, d time.Duration) {
	t.Helper()
	var wc [1]mlx5.Completion
	for deadline := time.Now().Add(d); ; {
		n, err := cq.Poll(wc[:])
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if n != 0 {
			t.Fatalf("unexpected completion %+v", wc[0])
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// post posts wrs on DCI i of s as one list.
func (s *dcSide) post(t testing.TB, i int, wrs ...mlx5.SendWR) {
	t.Helper()
	if err := s.dcis[i].PostSendList(wrs); err != nil {
		t.Fatalf("%s DCI %d: post %d work requests: %v", s.name, i, len(wrs), err)
	}
}

// dcSend is one SEND of u.traffic: from's DCI i sends a message to to's
// DCT, which receives it on its SRQ. stream says whether to name a stream
// (the next of the DCI's) or none (mlx5dv_wr_set_dc_addr: stream 0).
func dcSend(t testing.TB, from, to *dcSide, i int, seed int, stream bool) {
	t.Helper()
	msg := from.buf[dcOffSend : dcOffSend+dcMsg]
	pattern(msg, seed)
	clear(to.buf[dcOffRecv : dcOffRecv+dcMsg])
	rid := to.nextID()
	if err := to.srq.PostRecv(rid, to.sge(dcOffRecv, dcMsg)); err != nil {
		t.Fatalf("%s: post receive: %v", to.name, err)
	}
	wr := from.to(to, mlx5.SendWR{WrID: from.nextID(), Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, SGL: from.sge(dcOffSend, dcMsg)})
	if stream {
		wr.StreamID = from.nextStream(i)
	}
	from.post(t, i, wr)
	expectCQ(t, from.cq, ok(from.dcis[i], wr.WrID, mlx5.WCSend))
	to.expectRecv(t, rid, from.dcis[i], dcMsg)
	if !bytes.Equal(to.buf[dcOffRecv:dcOffRecv+dcMsg], msg) {
		t.Errorf("%s DCI %d to %s's DCT: the message received differs from the one sent", from.name, i, to.name)
	}
}

// expectRecv expects the completion of receive rid on s's DCT, of n bytes
// sent by dci: the completion names the DCT, the sending DCI, and a GRH
// where the path has one.
func (s *dcSide) expectRecv(t testing.TB, rid uint64, dci *mlx5.QP, n uint32) {
	t.Helper()
	wc := expectCQ(t, s.cq, okLen(s.dct, rid, mlx5.WCRecv, n))[0]
	if wc.Status == mlx5.WCSuccess && (wc.SrcQP != dci.QPN() || wc.GRH != s.path.GRH) {
		t.Errorf("%s's DCT: receive %+v: want the sender %#x, GRH %v", s.name, wc, dci.QPN(), s.path.GRH)
	}
}

// dcTraffic is u.traffic with SENDs: iters times, each DCI of the client
// sends to the server's DCT, and the server's back to the client's.
func dcTraffic(t testing.TB, client, server *dcSide, iters int, stream bool) {
	t.Helper()
	for it := range iters {
		for i := range client.dcis {
			dcSend(t, client, server, i, 2*it+i, stream)
			dcSend(t, server, client, i, 2*it+i+100, stream)
		}
	}
}

// dcWrite is one RDMA WRITE of u.rdma_traffic: from's DCI i writes a
// message into to's MR; nothing completes at to.
func dcWrite(t testing.TB, from, to *dcSide, i int, seed int, stream bool) {
	t.Helper()
	msg := from.buf[dcOffSend : dcOffSend+dcMsg]
	pattern(msg, seed)
	clear(to.buf[dcOffWrite : dcOffWrite+dcMsg])
	wr := from.to(to, mlx5.SendWR{WrID: from.nextID(), Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled,
		RemoteAddr: to.mr.Addr() + dcOffWrite, RKey: to.mr.RKey(), SGL: from.sge(dcOffSend, dcMsg)})
	if stream {
		wr.StreamID = from.nextStream(i)
	}
	from.post(t, i, wr)
	expectCQ(t, from.cq, ok(from.dcis[i], wr.WrID, mlx5.WCRDMAWrite))
	quietCQ(t, to.cq, time.Millisecond)
	if !bytes.Equal(to.buf[dcOffWrite:dcOffWrite+dcMsg], msg) {
		t.Errorf("%s DCI %d (stream %d) to %s: the memory written differs from the message", from.name, i, wr.StreamID, to.name)
	}
}

// dcRead is one RDMA READ (u.rdma_traffic's same-side check): from's DCI
// i reads to's memory into its own.
func dcRead(t testing.TB, from, to *dcSide, i int, seed int) {
	t.Helper()
	src := to.buf[dcOffRead : dcOffRead+dcMsg]
	pattern(src, seed)
	clear(from.buf[dcOffBack : dcOffBack+dcMsg])
	wr := from.to(to, mlx5.SendWR{WrID: from.nextID(), Opcode: mlx5.OpRDMARead, Flags: mlx5.SendSignaled,
		RemoteAddr: to.mr.Addr() + dcOffRead, RKey: to.mr.RKey(), SGL: from.sge(dcOffBack, dcMsg)})
	from.post(t, i, wr)
	expectCQ(t, from.cq, okLen(from.dcis[i], wr.WrID, mlx5.WCRDMARead, dcMsg))
	quietCQ(t, to.cq, time.Millisecond)
	if !bytes.Equal(from.buf[dcOffBack:dcOffBack+dcMsg], src) {
		t.Errorf("%s DCI %d from %s: the memory read differs from the peer's", from.name, i, to.name)
	}
}

// DCTraffic runs rdma-core's DC traffic between two sides of DCIs without
// streams (Mlx5DcResources, qp_count 2): test_dc_send's SENDs (10
// iterations, each DCI of each side to the other side's DCT, received on
// its SRQ), test_dc_rdma_write's RDMA WRITEs, RDMA READs of the peer's
// memory (u.rdma_traffic's same-side check), and test_dc_atomic's
// fetch-and-adds (as many in flight as mlx5dv_query_device's
// max_dc_rd_atom, 2^log_max_ra_req_dc) with compare-and-swaps that match
// and that do not. Every message is compared with what arrived, every
// atomic's old value and the memory it left.
func DCTraffic(t *testing.T, c *mlx5.Context) {
	client, server := newDCPair(t, c, false, dcFullAccess)
	if !client.path.GRH {
		t.Logf("port 1 is InfiniBand: the AH routes by LID (mlx5 has no GID query for a global route)")
	}
	dcTraffic(t, client, server, 10, false)
	for it := range 10 {
		for i := range client.dcis {
			dcWrite(t, client, server, i, 3*it+i, false)
			dcWrite(t, server, client, i, 3*it+i+50, false)
			dcRead(t, client, server, i, 5*it+i)
			dcRead(t, server, client, i, 5*it+i+70)
		}
	}
	caps, err := c.DCCaps()
	if err != nil {
		t.Fatalf("dc caps: %v", err)
	}
	depth := min(1<<caps.LogMaxRAReq, 64) // rdma-core's client_wr: max_dc_rd_atom
	for it := range 3 {
		for i := range client.dcis {
			dcAtomics(t, client, server, i, depth, it)
			dcAtomics(t, server, client, i, depth, it+10)
		}
	}
}

// dcAtomics is u.atomic_traffic's client round: from's DCI i posts depth
// fetch-and-adds of 2 to an 8-byte value of to's memory, each returning
// the old value into a slot of its own, and polls them all; then a
// compare-and-swap that matches and one that does not. The atomics run
// in order on one stream: the k-th returns the start plus 2k. The memory
// is in host byte order (the device's atomic_req_8B_endianness_mode 1,
// which mlx5_core sets when the device has it).
func dcAtomics(t testing.TB, from, to *dcSide, i, depth, seed int) {
	t.Helper()
	ne := binary.NativeEndian
	start := uint64(0x0101010101010101) * uint64(seed+1)
	target := to.buf[dcOffAtomic : dcOffAtomic+8]
	ne.PutUint64(target, start)
	old := from.buf[dcOffOld : dcOffOld+8*depth]
	clear(old)
	wrs := make([]mlx5.SendWR, depth)
	wants := make([]want, depth)
	for k := range wrs {
		wrs[k] = from.to(to, mlx5.SendWR{WrID: from.nextID(), Opcode: mlx5.OpAtomicFAA, Flags: mlx5.SendSignaled,
			RemoteAddr: to.mr.Addr() + dcOffAtomic, RKey: to.mr.RKey(), SwapAdd: 2, SGL: from.sge(dcOffOld+8*k, 8)})
		wants[k] = ok(from.dcis[i], wrs[k].WrID, mlx5.WCFetchAdd)
	}
	from.post(t, i, wrs...)
	for _, wc := range expectCQ(t, from.cq, wants...) {
		if wc.Status == mlx5.WCSuccess && wc.ByteLen != 8 {
			t.Errorf("fetch-and-add %d: %d bytes, want 8", wc.WrID, wc.ByteLen)
		}
	}
	quietCQ(t, to.cq, time.Millisecond)
	for k := range depth {
		if got, want := ne.Uint64(old[8*k:]), start+2*uint64(k); got != want {
			t.Errorf("%s DCI %d fetch-and-add %d of %d: old value %#x, want %#x", from.name, i, k, depth, got, want)
		}
	}
	end := start + 2*uint64(depth)
	if got := ne.Uint64(target); got != end {
		t.Errorf("%s DCI %d: %d fetch-and-adds of 2 left %#x, want %#x", from.name, i, depth, got, end)
	}

	// A compare-and-swap that matches swaps; one that does not leaves the
	// memory; both return the old value.
	swap := ^end
	cas := []mlx5.SendWR{
		from.to(to, mlx5.SendWR{WrID: from.nextID(), Opcode: mlx5.OpAtomicCAS, Flags: mlx5.SendSignaled,
			RemoteAddr: to.mr.Addr() + dcOffAtomic, RKey: to.mr.RKey(), Compare: end, SwapAdd: swap, SGL: from.sge(dcOffOld, 8)}),
		from.to(to, mlx5.SendWR{WrID: from.nextID(), Opcode: mlx5.OpAtomicCAS, Flags: mlx5.SendSignaled,
			RemoteAddr: to.mr.Addr() + dcOffAtomic, RKey: to.mr.RKey(), Compare: end, SwapAdd: 1, SGL: from.sge(dcOffOld+8, 8)}),
	}
	from.post(t, i, cas...)
	expectCQ(t, from.cq, ok(from.dcis[i], cas[0].WrID, mlx5.WCCompSwap), ok(from.dcis[i], cas[1].WrID, mlx5.WCCompSwap))
	if a, b, m := ne.Uint64(old), ne.Uint64(old[8:]), ne.Uint64(target); a != end || b != swap || m != swap {
		t.Errorf("%s DCI %d compare-and-swaps: old values %#x and %#x, memory %#x; want %#x, %#x, %#x", from.name, i, a, b, m, end, swap, swap)
	}
}

// DCStreams is rdma-core's good flow of DCI streams
// (test_dc_rdma_write_stream, Mlx5DcStreamsRes): RDMA WRITEs from both DCIs
// of each side, the stream id rotated at each (DCI 0 of 2^3 streams, DCI 1
// of 2^2, within the device's caps), every write's data compared. mlx5
// refuses a stream id the DCI does not have (docs/MLX5.md), so the ids wrap
// at the DCI's 2^LogConcurrent, where rdma-core's test lets them run up to
// 2^LogConcurrent + 2 before it wraps to 1. Then each DCI posts, at once,
// two RDMA WRITEs on every stream, only each stream's last signaled, 30
// times over (more than the send queue holds): each stream's completion
// says its unsignaled write is done, and the ring's space comes back
// stream by stream. A device without DCI streams skips, as rdma-core's.
func DCStreams(t *testing.T, c *mlx5.Context) {
	client, server := newDCPair(t, c, true, dcFullAccess)
	for it := range 10 {
		for i := range client.dcis {
			dcWrite(t, client, server, i, 3*it+i, true)
			dcWrite(t, server, client, i, 3*it+i+50, true)
		}
	}
	for round := range 30 {
		for _, p := range [][2]*dcSide{{client, server}, {server, client}} {
			for i := range client.dcis {
				dcStreamBurst(t, p[0], p[1], i, round)
			}
		}
	}
}

// dcStreamBurst posts two RDMA WRITEs on each stream of from's DCI i, the
// second of each stream signaled, each to its own place in to's memory,
// and expects one completion per stream.
func dcStreamBurst(t testing.TB, from, to *dcSide, i, seed int) {
	t.Helper()
	n := from.streams[i]
	const size = 32
	var wrs []mlx5.SendWR
	var wants []want
	for k := range 2 * n {
		off := k * size
		pattern(from.buf[dcOffSend+off:dcOffSend+off+size], seed*1000+k)
		clear(to.buf[dcOffWrite+off : dcOffWrite+off+size])
		wr := from.to(to, mlx5.SendWR{WrID: from.nextID(), Opcode: mlx5.OpRDMAWrite, StreamID: uint16(k % n),
			RemoteAddr: to.mr.Addr() + uint64(dcOffWrite+off), RKey: to.mr.RKey(), SGL: from.sge(dcOffSend+off, size)})
		if k >= n {
			wr.Flags = mlx5.SendSignaled
			wants = append(wants, ok(from.dcis[i], wr.WrID, mlx5.WCRDMAWrite))
		}
		wrs = append(wrs, wr)
	}
	from.post(t, i, wrs...)
	expectCQ(t, from.cq, wants...)
	if !bytes.Equal(to.buf[dcOffWrite:dcOffWrite+2*n*size], from.buf[dcOffSend:dcOffSend+2*n*size]) {
		t.Errorf("%s DCI %d: a burst over its %d streams wrote other data", from.name, i, n)
	}
}

// DCStreamRecovery is rdma-core's test_dc_stream_ids_recovery (master): on
// sides whose MRs have no remote write, a round of SENDs first; then, as
// many times as DCI 0 may have errored streams (2^LogErrored), an RDMA
// WRITE on the next stream id fails with a remote access error at the
// DCI, the QP is queried and found still in RTS, and the stream is reset
// (mlx5dv_dci_stream_id_reset(3)'s rule); a round of SENDs works after.
// Beyond rdma-core's test, each failing write has a SEND behind it on the
// same stream, which is flushed, and one on another stream, which
// completes: an error flushes its stream's work only. A device without
// DCI streams, or without the stream reset (DCCaps.StreamReset), skips.
func DCStreamRecovery(t *testing.T, c *mlx5.Context) {
	client, server := newDCPair(t, c, true, mlx5.AccessLocalWrite)
	if !c.DEVX() {
		t.Skip("the stream reset is a DEVX command (mlx5dv_dci_stream_id_reset modifies the QP through DEVX), and the context has no DEVX")
	}
	if caps, err := c.DCCaps(); err != nil {
		t.Fatalf("dc caps: %v", err)
	} else if !caps.StreamReset {
		t.Skipf("the device cannot reset a DCI stream (DCCaps: errored streams %d, qpc_extension %v): mlx5dv_dci_stream_id_reset answers EOPNOTSUPP", caps.Streams.LogErrored, caps.QPCExtension)
	}
	dcTraffic(t, client, server, 2, true)
	dci := client.dcis[0]
	for e := range client.errored[0] {
		s := client.nextStream(0)
		other := uint16((int(s) + 1) % client.streams[0])
		client.stream[0] = other // the next error's stream comes after it
		pattern(client.buf[dcOffSend:dcOffSend+dcMsg], e)
		rid := server.nextID()
		if err := server.srq.PostRecv(rid, server.sge(dcOffRecv, dcMsg)); err != nil {
			t.Fatal(err)
		}
		wrs := []mlx5.SendWR{
			client.to(server, mlx5.SendWR{WrID: client.nextID(), Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, StreamID: s,
				RemoteAddr: server.mr.Addr() + dcOffWrite, RKey: server.mr.RKey(), SGL: client.sge(dcOffSend, dcMsg)}),
			client.to(server, mlx5.SendWR{WrID: client.nextID(), Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, StreamID: s, SGL: client.sge(dcOffSend, dcMsg)}),
			client.to(server, mlx5.SendWR{WrID: client.nextID(), Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, StreamID: other, SGL: client.sge(dcOffSend, dcMsg)}),
		}
		client.post(t, 0, wrs...)
		expectCQ(t, client.cq,
			want{wrID: wrs[0].WrID, qp: dci, status: mlx5.WCRemAccessErr},
			want{wrID: wrs[1].WrID, qp: dci, status: mlx5.WCWRFlushErr},
			ok(dci, wrs[2].WrID, mlx5.WCSend))
		server.expectRecv(t, rid, dci, dcMsg)
		a, err := dci.Query(mlx5.QPAttrState)
		if err != nil {
			t.Fatalf("query after error %d: %v", e+1, err)
		}
		if a.State != mlx5.QPStateRTS {
			t.Fatalf("after error %d of %d on stream %d: the DCI is in %v, want RTS (the error is the stream's)", e+1, client.errored[0], s, a.State)
		}
		if err := dci.ResetDCIStream(s); err != nil {
			t.Fatalf("reset of stream %d after error %d: %v", s, e+1, err)
		}
	}
	if a, err := dci.Query(mlx5.QPAttrState); err != nil || a.State != mlx5.QPStateRTS {
		t.Fatalf("after %d stream errors and resets: %v, %v; want RTS", client.errored[0], a.State, err)
	}
	dcTraffic(t, client, server, 2, true)
}

// DCQPRecovery is rdma-core's test_dc_stream_qp_recovery (master): on
// sides whose MRs have no remote write, a round of SENDs; then RDMA WRITEs
// of DCI 0 on as many stream ids as it may have errored streams
// (2^LogErrored), each failing with a remote access error and none reset.
// Until the last the DCI stays in RTS; after it, the DCI goes to ERR
// (queried for up to a second, as rdma-core's test: a device moves it
// when it gets to it), where a new work request is flushed. Every DCI of
// both sides is then moved to RESET and back to RTS, and a round of SENDs
// works. A device without DCI streams skips, as rdma-core's.
func DCQPRecovery(t *testing.T, c *mlx5.Context) {
	client, server := newDCPair(t, c, true, mlx5.AccessLocalWrite)
	dcTraffic(t, client, server, 2, true)
	dci, limit := client.dcis[0], client.errored[0]
	if limit > client.streams[0] {
		t.Skipf("DCI 0 has %d streams, fewer than its %d errored streams: stream errors cannot take it to ERR", client.streams[0], limit)
	}
	for e := range limit {
		s := client.nextStream(0)
		wr := client.to(server, mlx5.SendWR{WrID: client.nextID(), Opcode: mlx5.OpRDMAWrite, Flags: mlx5.SendSignaled, StreamID: s,
			RemoteAddr: server.mr.Addr() + dcOffWrite, RKey: server.mr.RKey(), SGL: client.sge(dcOffSend, dcMsg)})
		client.post(t, 0, wr)
		expectCQ(t, client.cq, want{wrID: wr.WrID, qp: dci, status: mlx5.WCRemAccessErr})
		if e == limit-1 {
			break
		}
		if a, err := dci.Query(mlx5.QPAttrState); err != nil || a.State != mlx5.QPStateRTS {
			t.Fatalf("after %d of %d errored streams: %v, %v; want RTS", e+1, limit, a.State, err)
		}
	}
	state := mlx5.QPStateRTS
	for start := time.Now(); time.Since(start) < time.Second; time.Sleep(time.Millisecond) {
		a, err := dci.Query(mlx5.QPAttrState)
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		if state = a.State; state == mlx5.QPStateErr {
			break
		}
	}
	if state != mlx5.QPStateErr {
		t.Fatalf("the DCI is in %v after %d errored streams, want ERR", state, limit)
	}
	// A QP in ERR flushes what is posted on it.
	wr := client.to(server, mlx5.SendWR{WrID: client.nextID(), Opcode: mlx5.OpSend, Flags: mlx5.SendSignaled, StreamID: client.nextStream(0),
		SGL: client.sge(dcOffSend, dcMsg)})
	client.post(t, 0, wr)
	expectCQ(t, client.cq, want{wrID: wr.WrID, qp: dci, status: mlx5.WCWRFlushErr})
	quietCQ(t, server.cq, time.Millisecond)

	for _, s := range []*dcSide{client, server} {
		for _, q := range s.dcis {
			modifyQP(t, q, mlx5.QPAttr{State: mlx5.QPStateReset}, mlx5.QPAttrState)
			s.dciToRTS(t, q)
		}
	}
	dcTraffic(t, client, server, 2, true)
}
