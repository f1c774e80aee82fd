package uverbs

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// The port's speed comes from active_speed_ex where the kernel fills it
// (6.12 and later: an XDR port's 256 does not fit the legacy u8, which the
// kernel truncates to 0) and from active_speed where it leaves those bytes
// reserved and zero (6.1).
func TestPortSpeedFromActiveSpeedEx(t *testing.T) {
	for _, tc := range []struct {
		name         string
		legacy       uint8
		ex           uint32
		speed        uint32
		wantExOffset uintptr
	}{
		{"XDR on a newer kernel", 0, 256, 256, 44},
		{"HDR on a newer kernel", 64, 64, 64, 44},
		{"EDR on 6.1", 32, 0, 32, 44},
	} {
		var resp uverbsabi.IbUverbsQueryPortRespEx
		b := unsafe.Slice((*byte)(unsafe.Pointer(&resp)), unsafe.Sizeof(resp))
		if len(b) != 48 || unsafe.Offsetof(resp.ActiveSpeedEx) != tc.wantExOffset {
			t.Fatalf("struct ib_uverbs_query_port_resp_ex: %d bytes, active_speed_ex at %d; the uapi has 48 and 44", len(b), unsafe.Offsetof(resp.ActiveSpeedEx))
		}
		// As the kernel writes it: the legacy u8, and active_speed_ex at 44.
		b[unsafe.Offsetof(resp.LegacyResp.ActiveSpeed)] = tc.legacy
		binary.NativeEndian.PutUint32(b[44:], tc.ex)
		a := portAttrOf(&resp)
		if a.ActiveSpeed != tc.legacy || a.ActiveSpeedEx != tc.ex || a.Speed() != tc.speed {
			t.Errorf("%s: ActiveSpeed %d, ActiveSpeedEx %d, Speed() %d; want %d, %d, %d", tc.name, a.ActiveSpeed, a.ActiveSpeedEx, a.Speed(), tc.legacy, tc.ex, tc.speed)
		}
	}
}
