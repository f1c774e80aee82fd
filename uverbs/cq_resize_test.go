package uverbs

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// TestCQResizeModerateWrite: the write() forms of the resize and modify
// CQ commands, word by word as the kernel's ib_uverbs_write reads them.
// Resize: the legacy header (RESIZE_CQ, in_words over header, command
// and the provider's 16 bytes, out_words over the 8-byte response),
// then struct ib_uverbs_resize_cq (response pointer, handle, cqe) and the
// driver data. Modify: the extended header (FLAG_EXTENDED | MODIFY_CQ,
// 2 words of command, no response) and struct ib_uverbs_ex_cmd_hdr,
// then struct ib_uverbs_ex_modify_cq.
func TestCQResizeModerateWrite(t *testing.T) {
	c := testContext(t)
	_, writes, last := fakeFallback(t, unix.ENOTTY)
	cq := &CQ{object: object{ctx: c, handle: 7}}
	drv := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	if _, err := cq.Resize(63, drv, nil); err != nil {
		t.Fatal(err)
	}
	b := *last
	le := binary.LittleEndian
	if len(b) != 8+16+16 || le.Uint32(b) != uverbsabi.IB_USER_VERBS_CMD_RESIZE_CQ || le.Uint16(b[4:]) != 10 || le.Uint16(b[6:]) != 2 {
		t.Errorf("resize header %x (len %d)", b[:8], len(b))
	}
	if le.Uint64(b[8:]) == 0 || le.Uint32(b[16:]) != 7 || le.Uint32(b[20:]) != 63 || string(b[24:]) != string(drv) {
		t.Errorf("resize command %x", b[8:])
	}
	if err := cq.Moderate(0x1234, 0x0fff); err != nil {
		t.Fatal(err)
	}
	b = *last
	want := make([]byte, 8+16+16)
	le.PutUint32(want, uverbsabi.IB_USER_VERBS_CMD_FLAG_EXTENDED|uverbsabi.IB_USER_VERBS_EX_CMD_MODIFY_CQ)
	le.PutUint16(want[4:], 2)
	le.PutUint32(want[24:], 7)
	le.PutUint32(want[28:], uverbsabi.IB_CQ_MODERATE)
	le.PutUint16(want[32:], 0x1234)
	le.PutUint16(want[34:], 0x0fff)
	if string(b) != string(want) {
		t.Errorf("modify cq:\n got %x\nwant %x", b, want)
	}
	if *writes != 2 {
		t.Errorf("%d writes", *writes)
	}
	if uverbsabi.IB_USER_VERBS_EX_CMD_MODIFY_CQ != 57 {
		t.Errorf("IB_USER_VERBS_EX_CMD_MODIFY_CQ %d, want 57 (<rdma/ib_user_verbs.h>)", uverbsabi.IB_USER_VERBS_EX_CMD_MODIFY_CQ)
	}
}
