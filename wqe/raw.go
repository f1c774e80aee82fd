package wqe

import "errors"

// ErrRawDS is BuildRaw's refusal of a WQE whose control segment's ds
// does not describe it: 0, more 16-byte units than the WQE holds, or
// fewer WQEBBs than it spans.
var ErrRawDS = errors.New("wqe: raw WQE's ds (qpn_ds) does not match its length")

// MaxRawWQE is the longest WQE BuildRaw takes: 63 16-byte units (ds has
// 6 bits) rounded up to whole WQEBBs.
const MaxRawWQE = (63*16 + WQEBB - 1) / WQEBB * WQEBB

// BuildRaw writes the WQE w, which its caller encoded whole (a control
// segment, then the segments of its opcode; with this package's Put and
// Store functions or a Build function into a ring of its own), into r at
// producer counter pi, as mlx5dv_wr_raw_wqe does. It sets the two fields
// of the control segment that belong to the queue: the WQE counter (pi)
// and the QP number (qpn), keeping w's opcode, opmod, ds, signature,
// stream, fm_ce_se and imm as they are. w itself is not changed.
//
// w's ds (the low 6 bits of byte 7) must be at least 1, at most len(w)/16,
// and end in w's last WQEBB: w is ds 16-byte units, rounded up to no
// more than a whole WQEBB, else ErrRawDS. The ds units are copied and the
// rest of the last WQEBB is zeroed. A w shorter than a control segment is
// ErrShort, one longer than MaxRawWQE ErrTooLarge. free is as for
// BuildSend. On error nothing is written.
func BuildRaw(r Ring, pi uint16, free int, qpn uint32, w []byte) (Result, error) {
	if qpn > 0xffffff {
		return Result{}, ErrQPN
	}
	if len(w) < CtrlSegSize {
		return Result{}, ErrShort
	}
	if len(w) > MaxRawWQE {
		return Result{}, ErrTooLarge
	}
	ds := int(w[ctrlOffQPNDS+3] & 0x3f)
	n := (ds*16 + WQEBB - 1) / WQEBB
	if ds == 0 || ds*16 > len(w) || n != (len(w)+WQEBB-1)/WQEBB {
		return Result{}, ErrRawDS
	}
	if res, err := r.fit(n, free); err != nil {
		return res, err
	}
	src := w[:ds*16]
	for i := range n {
		bb := r.slot(pi + uint16(i))
		k := copy(bb, src[min(i*WQEBB, len(src)):])
		clear(bb[k:])
	}
	first := r.slot(pi)
	// opmod_idx_opcode keeps opmod and opcode around the counter; qpn_ds
	// keeps ds under the QP number.
	be.PutUint32(first[ctrlOffOpmodIdxOpcode:], be.Uint32(w[ctrlOffOpmodIdxOpcode:])&0xff0000ff|uint32(pi)<<8)
	be.PutUint32(first[ctrlOffQPNDS:], qpn<<8|uint32(ds))
	return Result{WQEBBs: n, DS: uint8(ds), Doorbell: be.Uint64(first)}, nil
}
