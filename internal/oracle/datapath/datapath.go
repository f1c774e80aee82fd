// Package datapath reads the oracle's datapath records (libmlx5's send
// and receive posts through ibv_wr_* and ibv_post_send/ibv_post_recv, in
// its datapath and wrap families) as plain values. It is for tests of wqe
// and mlx5, so it imports neither.
package datapath

import (
	"testing"

	"github.com/mlx5go/mlx5go/internal/oracle"
)

// SGE is one recorded struct ibv_sge; BytesHex, with ibv_post_send and
// IBV_SEND_INLINE, the bytes libmlx5 copied into the WQE.
type SGE struct {
	Addr     string  `json:"addr"`
	Length   uint32  `json:"length"`
	Lkey     string  `json:"lkey"`
	BytesHex *string `json:"bytes_hex"`
}

// WR is one recorded work request.
type WR struct {
	Opcode      string `json:"opcode"`
	OpcodeValue int    `json:"opcode_value"`
	WrID        uint64 `json:"wr_id"`
	SendFlags   uint32 `json:"send_flags_value"`
	RDMA        *struct {
		RemoteAddr string `json:"remote_addr"`
		RKey       string `json:"rkey"`
	} `json:"rdma"`
	Atomic *struct {
		RemoteAddr string `json:"remote_addr"`
		RKey       string `json:"rkey"`
		CompareAdd string `json:"compare_add"`
		Swap       string `json:"swap"`
	} `json:"atomic"`
	ImmData        string `json:"imm_data"`
	InvalidateRKey string `json:"invalidate_rkey"`
	UD             *struct {
		AH         AH     `json:"ah"`
		RemoteQPN  string `json:"remote_qpn"`
		RemoteQKey string `json:"remote_qkey"`
	} `json:"ud"`
	// DC is the DC address of a work request on a DCI (the dc family):
	// nil when the work request called no DC setter.
	DC         *DC    `json:"dc"`
	Setter     string `json:"setter"`
	SGList     []SGE  `json:"sg_list"`
	InlineData []struct {
		Length int    `json:"length"`
		Hex    string `json:"hex"`
	} `json:"inline_data"`
}

// AH is a recorded address handle (struct ibv_ah_attr on an InfiniBand
// port).
type AH struct {
	Name        string `json:"name"`
	DLID        uint16 `json:"dlid"`
	SL          uint8  `json:"sl"`
	SrcPathBits uint8  `json:"src_path_bits"`
	StaticRate  uint8  `json:"static_rate"`
	IsGlobal    int    `json:"is_global"`
	GRH         *struct {
		DGID         string `json:"dgid"`
		FlowLabel    uint32 `json:"flow_label"`
		SGIDIndex    uint8  `json:"sgid_index"`
		HopLimit     uint8  `json:"hop_limit"`
		TrafficClass uint8  `json:"traffic_class"`
	} `json:"grh"`
}

// DC is a recorded mlx5dv_wr_set_dc_addr (or _stream) call: Setter names
// which, Order whether it came before or after the data setter, StreamID
// is nil for mlx5dv_wr_set_dc_addr.
type DC struct {
	Setter      string `json:"setter"`
	Order       string `json:"order"`
	AH          AH     `json:"ah"`
	RemoteDCTN  string `json:"remote_dctn"`
	RemoteDCKey string `json:"remote_dc_key"`
	StreamID    *int   `json:"stream_id"`
}

// WQEBB is one recorded 64-byte send queue block (or receive WQE) at its
// ring index.
type WQEBB struct {
	Index int    `json:"index"`
	Hex   string `json:"hex"`
}

// BF is what one post wrote to the UAR's BlueFlame half.
type BF struct {
	Size   int `json:"size"`
	Writes []struct {
		Len int    `json:"len"`
		Hex string `json:"hex"`
	} `json:"writes"`
}

// Record is one datapath record (or a datapath record of the wrap
// family).
type Record struct {
	Case  string `json:"case"`
	Input struct {
		SQStart int `json:"sq_start"`
		RQStart int `json:"rq_start"`
		Posts   []struct {
			API string `json:"api"`
			WRs []WR   `json:"wrs"`
		} `json:"posts"`
	} `json:"input"`
	// Note says what a record of a misuse shows (the dc family).
	Note string `json:"note"`
	QP   struct {
		Name string `json:"name"`
		Type string `json:"type"`
		// DCIStreams are a DCI's streams (the dc family), nil without.
		DCIStreams *struct {
			LogNumConcurent int `json:"log_num_concurent"`
			LogNumErrored   int `json:"log_num_errored"`
		} `json:"dci_streams"`
		QPN      uint32 `json:"qpn"`
		SQWQECnt int    `json:"sq_wqe_cnt"`
		SQStride int    `json:"sq_stride"`
		RQWQECnt int    `json:"rq_wqe_cnt"`
		RQStride int    `json:"rq_stride"`
		SendCap  struct {
			MaxSendWR     int `json:"max_send_wr"`
			MaxSendSGE    int `json:"max_send_sge"`
			MaxInlineData int `json:"max_inline_data"`
		} `json:"send_cap"`
		BFSize int `json:"bf_size"`
	} `json:"qp"`
	Result struct {
		Posts []struct {
			API        string `json:"api"`
			Ret        int    `json:"ret"`
			BadWR      *int   `json:"bad_wr_index"`
			SQPIBefore int    `json:"sq_pi_before"`
			SQPIAfter  int    `json:"sq_pi_after"`
			RQPIBefore int    `json:"rq_pi_before"`
			RQPIAfter  int    `json:"rq_pi_after"`
			DBRec      struct {
				Send int `json:"send_counter"`
				Recv int `json:"recv_counter"`
			} `json:"dbrec"`
			BF BF `json:"bf"`
		} `json:"posts"`
	} `json:"result"`
	SQPIBefore int `json:"sq_pi_before"`
	SQPIAfter  int `json:"sq_pi_after"`
	SQ         struct {
		WQEBBs []WQEBB `json:"wqebbs"`
	} `json:"sq"`
	RQ *struct {
		WQECnt int     `json:"wqe_cnt"`
		Stride int     `json:"stride"`
		WQEs   []WQEBB `json:"wqes"`
	} `json:"rq"`
	Stray []WQEBB `json:"stray_wqebbs"`
	Wrap  *struct {
		Schema string `json:"schema"`
	} `json:"wrap"`
}

// Values of enum ibv_wr_opcode.
const (
	IBVWRRDMAWrite    = 0
	IBVWRRDMAWriteImm = 1
	IBVWRSend         = 2
	IBVWRSendImm      = 3
	IBVWRRDMARead     = 4
	IBVWRAtomicCS     = 5
	IBVWRAtomicFA     = 6
	IBVWRLocalInv     = 7
	IBVWRSendInv      = 9
)

// Num and Unhex are internal/oracle's, for the tests that read records
// through this package.
var (
	Num   = oracle.Num
	Unhex = oracle.Unhex
)

// Read calls each for every datapath record of path (a wrap file's other
// records are left out).
func Read(t testing.TB, path string, each func(r *Record)) {
	t.Helper()
	oracle.Records(t, path, func(r *Record) bool { return r.Wrap == nil || r.Wrap.Schema == "datapath" }, each)
}

// ReadDC calls each for every record of the dc family's data path in
// path (dc.jsonl's wr/, post_send/ and wrap/ records: the datapath schema
// with a DCI and DC addresses); its other records are left out.
func ReadDC(t testing.TB, path string, each func(r *Record)) {
	t.Helper()
	oracle.Records(t, path, func(r *Record) bool { return r.Wrap != nil && r.Wrap.Schema == "dc" }, each)
}
