package mlx5

import (
	"testing"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// The device query at open, as mlx5_query_device_ctx makes it: with
// struct mlx5_ib_query_device_resp only if GET_CONTEXT's cmds_supp_uhw
// has MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE, and a failed query leaves the
// context open with its query caps zero.
func TestContextDeviceQuery(t *testing.T) {
	for _, tc := range []struct {
		name    string
		uhw     uint8
		errno   unix.Errno
		drvOut  bool // UHW_OUT sent
		streams DCIStreams
		atomics bool
	}{
		{"driver data", mlx5abi.MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE, 0, true, DCIStreams{LogConcurrent: 3, LogErrored: 1}, true},
		{"no driver data", mlx5abi.MLX5_USER_CMDS_SUPP_UHW_CREATE_AH, 0, false, DCIStreams{}, true},
		{"query refused", mlx5abi.MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE, unix.EOPNOTSUPP, true, DCIStreams{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var queries []*uverbs.Call
			uctx := uverbs.NewRecordingContext(uverbs.DriverMLX5, func(c *uverbs.Call) unix.Errno {
				switch {
				case c.Hdr.MethodID == uverbsabi.UVERBS_METHOD_GET_CONTEXT:
					r := mlx5abi.Mlx5IbAllocUcontextResp{CmdsSuppUhw: tc.uhw}
					for i, a := range c.Attrs {
						if a.AttrID == uverbsabi.UVERBS_ATTR_UHW_OUT {
							copy(c.Data[i], bytesOf(&r))
						}
					}
					return 0
				case c.Hdr.ObjectID == uverbsabi.UVERBS_OBJECT_DEVICE && c.Hdr.MethodID == uverbsabi.UVERBS_METHOD_INVOKE_WRITE:
					queries = append(queries, c)
					if tc.errno != 0 {
						return tc.errno
					}
					for i, a := range c.Attrs {
						switch a.AttrID {
						case uverbsabi.UVERBS_ATTR_CORE_OUT:
							var r uverbsabi.IbUverbsExQueryDeviceResp
							r.Base.AtomicCap = uint32(uverbs.AtomicHCA)
							r.HcaCoreClock = 1000
							r.ResponseLength = uverbsabi.SizeofIbUverbsExQueryDeviceResp
							copy(c.Data[i], bytesOf(&r))
						case uverbsabi.UVERBS_ATTR_UHW_OUT:
							r := mlx5abi.Mlx5IbQueryDeviceResp{ResponseLength: 102,
								DciStreamsCaps: mlx5abi.Mlx5IbDciStreamsCaps{MaxLogNumConcurent: 3, MaxLogNumErrored: 1}}
							copy(c.Data[i], bytesOf(&r)[:102])
						}
					}
					return 0
				}
				return unix.EOPNOTSUPP // the non-cached UAR: the first CQ tries again
			})
			defer uctx.Close()
			if err := uctx.RecordGetContext(&uverbs.Options{DriverOut: make([]byte, len(bytesOf(&mlx5abi.Mlx5IbAllocUcontextResp{})))}); err != nil {
				t.Fatal(err)
			}
			c := NewContext(&kernelDevice{ctx: uctx})
			if len(queries) != 1 {
				t.Fatalf("%d device queries at open, want 1", len(queries))
			}
			var uhw []uint16
			for _, a := range queries[0].Attrs {
				if a.AttrID == uverbsabi.UVERBS_ATTR_UHW_OUT {
					uhw = append(uhw, a.Len)
				}
			}
			if tc.drvOut != (len(uhw) == 1 && uhw[0] == mlx5abi.SizeofMlx5IbQueryDeviceResp) || !tc.drvOut && len(uhw) != 0 {
				t.Errorf("UHW_OUT lengths %v; want one of %d: %v", uhw, mlx5abi.SizeofMlx5IbQueryDeviceResp, tc.drvOut)
			}
			wantClock := uint64(1000)
			if tc.errno != 0 {
				wantClock = 0
			}
			if c.caps.MaxDCIStreams != tc.streams || c.caps.Atomics != tc.atomics || c.caps.CoreClockKHz != wantClock {
				t.Errorf("caps: MaxDCIStreams %+v, Atomics %v, CoreClockKHz %d; want %+v, %v, %d", c.caps.MaxDCIStreams,
					c.caps.Atomics, c.caps.CoreClockKHz, tc.streams, tc.atomics, wantClock)
			}
			if !c.verbs {
				t.Error("the context does not speak verbs")
			}
		})
	}
}
