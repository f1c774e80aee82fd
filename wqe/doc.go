// Package wqe encodes mlx5 work queue entries and decodes completion queue
// entries, one small function per segment writing into a caller's buffer.
//
// Send queue: BuildSend writes the WQE of an RC, UD or DCI work request
// (SEND, SEND_WITH_IMM, SEND_WITH_INV, RDMA_WRITE(_WITH_IMM), RDMA_READ,
// the two atomics) from its ctrl (with a DCI's stream channel id),
// datagram or DC address vector, remote address, atomic, data or inline
// segments; BuildLocalInv writes a LOCAL_INV (a UMR), BuildNOP a NOP, and
// BuildMkeyConfigure the UMR and SET_PSV WQEs of a signature or crypto
// mkey configuration (UMR control, mkey context, KLM or repeat block, BSF,
// crypto BSF, SET_PSV segments). Each Build function writes at a producer counter into
// a Ring, continues at the ring's start when a WQE crosses its end, checks
// its input before writing anything, writes no more than the free WQEBBs
// the caller gives it (ErrNoRoom says how many it needs), and returns the
// WQEBBs used, the doorbell word and whether the next WQE needs the small
// fence. Receive queue: PutRecv writes one receive WQE.
//
// Completion queue: CQEOwned tells whether software owns the CQE at a
// consumer index, InitCQE prepares a fresh CQ buffer, CQE.Decode and
// SigErrCQE.Decode decode requester, responder, error and signature error
// CQEs.
//
// It is a pure encoder: no syscalls, no allocation on its hot path, no
// panics on bad input. It imports only the standard library, prm (the mkey
// context layout) and sig (the block signature configuration the BSF and
// SET_PSV encode, and the signature error a SIG_ERR CQE reports). Its
// output is checked byte for byte against what rdma-core's libmlx5 writes
// (../shared/oracle vectors in testdata), its layouts and constants
// against the kernel's BTF (TestLabBTFWQE); see docs/WQE.md.
package wqe
