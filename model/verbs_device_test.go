package model

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mlx5go/mlx5go/internal/seam"
	"golang.org/x/sys/unix"
)

// QueryDevice answers struct mlx5_ib_query_device_resp as
// mlx5_ib_query_device fills it for each profile (docs/MODEL.md, "The
// device query"), for libmlx5's 104-byte buffer and shorter ones.
func TestQueryDevice(t *testing.T) {
	for _, tc := range []struct {
		profile   string
		conc, err byte // log_max_dci_stream_channels, log_max_dci_errored_streams
		clock     uint64
	}{{"cx5", 0, 0, 156250}, {"cx6dx", 4, 2, 1000000}, {"cx7", 6, 3, 1000000}} {
		t.Run(tc.profile, func(t *testing.T) {
			d := newDev(t, tc.profile)
			// The whole response as the kernel writes it: 102 of the
			// struct's 104 bytes (the reserved u16 and the padding are not
			// counted, so not copied); flags SCAT2CQE_DCT, the DCI stream
			// caps, every other part zero (no Ethernet, QoS, CQE
			// compression or striding RQ caps).
			want := make([]byte, 102)
			want[4] = 102     // response_length
			want[60] = 1 << 3 // flags: MLX5_IB_QUERY_DEV_RESP_FLAGS_SCAT2CQE_DCT
			want[100], want[101] = tc.conc, tc.err
			out := bytes.Repeat([]byte{0xee}, 104)
			a, err := d.QueryDevice(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out[:102], want) || out[102] != 0xee || out[103] != 0xee {
				t.Errorf("driver response\n%x\nwant\n%x then eeee", out, want)
			}
			// ODP as mlx5_ib_internal_fill_odp_caps derives it from the
			// profile's caps: pg, implicit, RC all six bits, UD send.
			odp := seam.ODPCaps{General: odpSupport | odpSupportImplicit, RC: 0x3f, UD: odpSend}
			// cq_caps: every profile has cq_moderation, so
			// MLX5_MAX_CQ_COUNT and MLX5_MAX_CQ_PERIOD.
			if wantA := (seam.DeviceAttr{AtomicCap: 1, HCACoreClock: tc.clock, NodeGUID: d.h.guid, ODP: odp,
				CQModerationCount: 65535, CQModerationPeriod: 4095,
				// CHANGE_PHY_PORT, PORT_ACTIVE_EVENT, SYS_IMAGE_GUID,
				// RC_RNR_NAK_GEN, MEM_MGT_EXTENSIONS: no XRC, no memory
				// windows.
				CapFlags: 1<<5 | 1<<10 | 1<<11 | 1<<12 | 1<<21}); a != wantA || a.NodeGUID>>32 != 0x0002c903 {
				t.Errorf("attributes %+v, want %+v (a node GUID of the Mellanox OUI)", a, wantA)
			}
			// Shorter buffers: a part is filled only if it fits whole.
			for _, c := range []struct{ outlen, length int }{
				{8, 8}, {15, 8}, {16, 16}, {31, 16}, {32, 32}, {40, 40}, {56, 56}, {60, 60}, {63, 60},
				{64, 64}, {72, 72}, {95, 72}, {96, 96}, {100, 100}, {101, 100}, {102, 102},
			} {
				out := bytes.Repeat([]byte{0xee}, c.outlen)
				if _, err := d.QueryDevice(out); err != nil {
					t.Fatalf("%d bytes: %v", c.outlen, err)
				}
				w := append([]byte(nil), want[:c.length]...)
				w[4] = byte(c.length)
				if !bytes.Equal(out[:c.length], w) || !bytes.Equal(out[c.length:], bytes.Repeat([]byte{0xee}, c.outlen-c.length)) {
					t.Errorf("%d bytes: %x, want %x then ee", c.outlen, out, w)
				}
			}
			// No driver response: the attributes alone.
			if b, err := d.QueryDevice(nil); err != nil || b != a {
				t.Errorf("no driver response: %+v, %v", b, err)
			}
			// Not room for comp_mask and response_length.
			short := bytes.Repeat([]byte{0xee}, 7)
			if _, err := d.QueryDevice(short); !errors.Is(err, unix.EINVAL) || !bytes.Equal(short, bytes.Repeat([]byte{0xee}, 7)) {
				t.Errorf("7 bytes: %v, %x; want EINVAL and untouched", err, short)
			}
			d.Close()
			if _, err := d.QueryDevice(make([]byte, 104)); !errors.Is(err, unix.EBADF) {
				t.Errorf("closed: %v, want EBADF", err)
			}
		})
	}
}
