package uverbs

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// The CQ resize and moderation commands on a real kernel's rxe0: resize
// grows and shrinks the CQ (rxe answers the entries asked for, and
// struct rxe_resize_cq_resp, a struct mminfo as at create, says where the
// new queue maps); entries over the device's max_cqe are EINVAL; a closed
// CQ is refused. rxe has no modify_cq, so the kernel refuses moderation
// before reading it: EOPNOTSUPP even for an attr_mask of 0 or a reserved
// word set, which ib_uverbs_ex_modify_cq would call EINVAL (the command is
// not there for a driver without modify_cq), so rxe cannot check the
// command's layout; BTF does (internal/uverbsabi). Both through
// RDMA_VERBS_IOCTL and by write().
func TestLabCQResizeModerate(t *testing.T) {
	onRXEEachPath(t, labCQResizeModerate)
}

func labCQResizeModerate(t *testing.T, c *Context) {
	da, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(CQOptions{CQE: 16, DriverOut: make([]byte, rxeCreateCQResp)})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []uint32{64, 8, 1, da.MaxCQE} {
		resp := make([]byte, rxeCreateCQResp)
		got, err := cq.Resize(n, nil, resp)
		if err != nil || got < n || cq.CQE != got {
			t.Fatalf("resize to %d: %d (cq.CQE %d), %v", n, got, cq.CQE, err)
		}
		if resp[8] == 0 && resp[9] == 0 && resp[10] == 0 && resp[11] == 0 {
			t.Errorf("resize to %d: rxe_resize_cq_resp has no mmap size: %x", n, resp)
		}
		t.Logf("resize to %d: %d entries", n, got)
	}
	if _, err := cq.Resize(da.MaxCQE+1, nil, make([]byte, rxeCreateCQResp)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("resize over max_cqe %d: %v, want EINVAL", da.MaxCQE, err)
	}
	if _, err := cq.Resize(0, nil, nil); err == nil {
		t.Error("resize to 0 succeeded")
	}
	// rxe_init_device_param: cq_caps 0 and 0, a device without
	// moderation (mlx5.CQ.Moderate refuses before sending on such caps;
	// the kernel itself does not check them: EOPNOTSUPP at any value).
	if da.CQModerationCaps != (CQModerationCaps{}) {
		t.Errorf("rxe's moderation caps %+v, want 0 and 0", da.CQModerationCaps)
	}
	for _, m := range [][2]uint16{{1, 1}, {0, 0}, {0xffff, 0xffff}} {
		err = cq.Moderate(m[0], m[1])
		t.Logf("modify cq %v on rxe: %v; moderation caps %+v", m, err, da.CQModerationCaps)
		if !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("modify cq %v on rxe: %v, want EOPNOTSUPP (rxe has no modify_cq)", m, err)
		}
	}
	for _, bad := range []uverbsabi.IbUverbsExModifyCq{{CqHandle: cq.handle}, {CqHandle: cq.handle, AttrMask: uverbsabi.IB_CQ_MODERATE, Reserved: 1}} {
		err := c.InvokeWrite("modify cq", uverbsabi.IB_USER_VERBS_CMD_FLAG_EXTENDED|uverbsabi.IB_USER_VERBS_EX_CMD_MODIFY_CQ, asBytes(&bad), nil, nil, nil)
		if !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("modify cq %+v: %v, want EOPNOTSUPP (refused before it is read)", bad, err)
		}
	}
	// A CQ with completion timestamps: rxe_create_cq refuses any
	// attr->flags (EOPNOTSUPP); by write() the flags have no command.
	const timestampCompletion = 1 << 0 // IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION
	tcq, err := c.CreateCQ(CQOptions{CQE: 16, Flags: timestampCompletion, DriverOut: make([]byte, rxeCreateCQResp)})
	t.Logf("create cq with IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION on rxe (write %v): %v", c.forceWrite, err)
	switch {
	case err == nil:
		tcq.Close()
		t.Error("rxe made a CQ with IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION")
	case !c.forceWrite && !errors.Is(err, unix.EOPNOTSUPP):
		t.Errorf("timestamp CQ on rxe: %v, want the kernel's EOPNOTSUPP", err)
	}
	if err := cq.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cq.Resize(32, nil, make([]byte, rxeCreateCQResp)); err == nil {
		t.Error("resize of a closed CQ succeeded")
	}
	if err := cq.Moderate(1, 1); err == nil {
		t.Error("moderate of a closed CQ succeeded")
	}
}
