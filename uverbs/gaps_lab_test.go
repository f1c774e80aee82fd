package uverbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// What a real kernel answers a device without a capability, the answer
// the software ConnectX gives where it lacks one (docs/MODEL.md, "Gaps
// the rdma-core suite meets"): uverbs drops the commands of a device
// without the driver function, and the command is then EOPNOTSUPP before
// anything is read. On rxe0: OPEN_XRCD is EOPNOTSUPP exactly when
// device_cap_flags has no IB_UVERBS_DEVICE_XRC, ALLOC_MW exactly when it
// has no MEM_WINDOW; REREG_MR of no MR is EOPNOTSUPP without
// rereg_user_mr, else the handler's lookup error, ENOENT. Seen: rxe has
// no XRC on 6.1, 6.12 and 7.2 (EOPNOTSUPP) and memory windows on all
// three; rereg_user_mr only from 6.12 (6.1: EOPNOTSUPP). The commands are laid
// out by hand (struct ib_uverbs_open_xrcd, ib_uverbs_alloc_mw,
// ib_uverbs_rereg_mr of ib_user_verbs.h; uverbsabi generates none of
// them), by write() and through RDMA_VERBS_IOCTL's write bridge.
func TestLabCapGaps(t *testing.T) {
	onRXEEachPath(t, func(t *testing.T, c *Context) {
		da, err := c.QueryDevice()
		if err != nil {
			t.Fatal(err)
		}
		pd, err := c.AllocPD(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer pd.Close()
		ne := binary.NativeEndian

		// struct ib_uverbs_open_xrcd: response, fd -1 (no inode),
		// oflags O_CREAT; the response is the xrcd_handle.
		xrcd := make([]byte, 16)
		ne.PutUint32(xrcd[8:], ^uint32(0))
		ne.PutUint32(xrcd[12:], unix.O_CREAT)
		err = c.InvokeWrite("open xrcd", uverbsabi.IB_USER_VERBS_CMD_OPEN_XRCD, xrcd, make([]byte, 4), nil, nil)
		hasXRC := da.DeviceCapFlagsEx&DeviceXRC != 0
		t.Logf("rxe0 device_cap_flags_ex %#x: XRC %v, open xrcd: %v", uint64(da.DeviceCapFlagsEx), hasXRC, err)
		if hasXRC == errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("open xrcd: %v with IB_UVERBS_DEVICE_XRC %v; want EOPNOTSUPP exactly without it", err, hasXRC)
		}

		// struct ib_uverbs_alloc_mw: response, pd_handle, mw_type 2
		// (IB_MW_TYPE_2); the response is mw_handle and rkey.
		mw := make([]byte, 16)
		ne.PutUint32(mw[8:], pd.handle)
		mw[12] = 2
		err = c.InvokeWrite("alloc mw", uverbsabi.IB_USER_VERBS_CMD_ALLOC_MW, mw, make([]byte, 8), nil, nil)
		hasMW := da.DeviceCapFlagsEx&DeviceMemWindow != 0
		t.Logf("MEM_WINDOW %v, alloc mw: %v", hasMW, err)
		if hasMW == errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("alloc mw: %v with IB_UVERBS_DEVICE_MEM_WINDOW %v; want EOPNOTSUPP exactly without it", err, hasMW)
		}

		// struct ib_uverbs_rereg_mr of an MR handle that names nothing:
		// response, mr_handle, flags IB_MR_REREG_ACCESS, start,
		// length, hca_va, pd_handle, access_flags.
		rereg := make([]byte, 48)
		ne.PutUint32(rereg[8:], ^uint32(0))
		ne.PutUint32(rereg[12:], 1<<2)
		err = c.InvokeWrite("rereg mr", uverbsabi.IB_USER_VERBS_CMD_REREG_MR, rereg, make([]byte, 8), nil, nil)
		t.Logf("rereg mr of no MR: %v", err)
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOENT) {
			t.Errorf("rereg mr of no MR: %v, want EOPNOTSUPP (no rereg_user_mr: rxe of 6.1) or ENOENT (no such MR: rxe of 6.12 and 7.2)", err)
		}
	})
}

// onRXEEachPath runs f on a context of the lab's rxe0 opened twice: with
// RDMA_VERBS_IOCTL, then with write() (Options.ForceWrite).
func onRXEEachPath(t *testing.T, f func(t *testing.T, c *Context)) {
	labenv.Require(t)
	for _, forceWrite := range []bool{false, true} {
		t.Run(fmt.Sprintf("write=%v", forceWrite), func(t *testing.T) {
			c, err := Open(labenv.RXEDevice, &Options{DriverID: DriverRXE, ForceWrite: forceWrite})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			f(t, c)
		})
	}
}
