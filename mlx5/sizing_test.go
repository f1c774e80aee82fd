package mlx5

import "testing"

// The oracle's device limits (its GET_CONTEXT answer).
var oracleLimits = deviceLimits{maxSQDesc: 1024, maxRQDesc: 512, maxSendWQEBB: 32768, maxRecvWR: 32768}

// libmlx5's geometry for the QPs the oracle created (create_cmds.jsonl's
// create_qp_rc_sig_pipelining, datapath_setup.jsonl's dp_rc and dp_ud:
// the sq_wqe_count, rq_wqe_count and rq_wqe_shift of their driver data,
// and the send caps ibv_query_qp reported).
func TestSizingAsLibmlx5(t *testing.T) {
	for _, c := range []struct {
		name                    string
		typ                     QPType
		ops                     OpcodeSet
		sendWR, sendSGE, inline int
		recvWR, recvSGE         int
		sq                      sqGeometry
		rq                      rqGeometry
	}{
		{"main_rc", QPTypeRC, Opcodes(OpRDMAWrite, OpSend, OpRDMARead), 64, 1, 512, 16, 1,
			sqGeometry{wqeSize: 576, wqeCnt: 1024, maxPost: 113, maxInline: 540, maxSGE: 1}, rqGeometry{16, 4, 16, 1}},
		{"dp_rc", QPTypeRC, defaultOps(QPTypeRC), 64, 4, 256, 16, 4,
			sqGeometry{wqeSize: 512, wqeCnt: 512, maxPost: 64, maxInline: 316, maxSGE: 4}, rqGeometry{16, 6, 16, 4}},
		{"dp_ud", QPTypeUD, Opcodes(OpSend, OpSendImm), 64, 2, 64, 16, 2,
			sqGeometry{wqeSize: 192, wqeCnt: 256, maxPost: 85, maxInline: 124, maxSGE: 2}, rqGeometry{16, 5, 16, 2}},
	} {
		sq, err := sqSize(&oracleLimits, c.typ, c.ops, c.sendWR, c.sendSGE, c.inline)
		if err != nil || sq != c.sq {
			t.Errorf("%s: send queue %+v %v, libmlx5 %+v", c.name, sq, err, c.sq)
		}
		rq, err := rqSize(&oracleLimits, c.recvWR, c.recvSGE)
		if err != nil || rq != c.rq {
			t.Errorf("%s: receive queue %+v %v, libmlx5 %+v", c.name, rq, err, c.rq)
		}
	}
	if _, err := sqSize(&oracleLimits, QPTypeRC, defaultOps(QPTypeRC), 1, 60, 0); err == nil {
		t.Error("60 SGEs fit a 1024-byte WQE")
	}
	if _, err := rqSize(&oracleLimits, 1<<16, 1); err == nil {
		t.Error("65536 receives on a device that takes 32768")
	}
}
