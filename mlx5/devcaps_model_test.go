package mlx5_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"golang.org/x/sys/unix"
)

// What a context learns from the device query at open, on each profile
// (the model answers as mlx5_ib_query_device), and the DCI stream caps
// CreateQP holds a DCI to: more than the device allows is ErrInvalid
// before any command, as libmlx5 refuses it; up to them the device makes
// the DCI. A device without DCI streams (cx5) lets through only 2^0 of
// each, which the kernel then refuses (mlx5_ib: DCI_STREAM without
// log_max_dci_stream_channels), as it does libmlx5's.
func TestModelDeviceQueryCaps(t *testing.T) {
	for _, tc := range []struct {
		profile string
		max     mlx5.DCIStreams
		clock   uint64
	}{
		{"cx5", mlx5.DCIStreams{}, 156250},
		{"cx6dx", mlx5.DCIStreams{LogConcurrent: 4, LogErrored: 2}, 1000000},
		{"cx7", mlx5.DCIStreams{LogConcurrent: 6, LogErrored: 3}, 1000000},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			c, _ := onModel(t, tc.profile)
			if c.Caps().MaxDCIStreams != tc.max || !c.Caps().Atomics || c.Caps().CoreClockKHz != tc.clock {
				t.Errorf("caps: MaxDCIStreams %+v, Atomics %v, CoreClockKHz %d; want %+v, true, %d",
					c.Caps().MaxDCIStreams, c.Caps().Atomics, c.Caps().CoreClockKHz, tc.max, tc.clock)
			}
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 64})
			if err != nil {
				t.Fatal(err)
			}
			dci := func(s mlx5.DCIStreams) (*mlx5.QP, error) {
				return c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeDCI, PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 16,
					MaxSendSGE: 1, DCIStreams: &s})
			}
			for _, s := range []mlx5.DCIStreams{
				{LogConcurrent: tc.max.LogConcurrent + 1, LogErrored: tc.max.LogErrored},
				{LogConcurrent: tc.max.LogConcurrent, LogErrored: tc.max.LogErrored + 1},
			} {
				qp, err := dci(s)
				if qp != nil || !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) || !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "MaxDCIStreams") {
					t.Errorf("DCI streams %+v over %+v: %v, want the driver's ErrInvalid naming Caps.MaxDCIStreams", s, tc.max, err)
				}
			}
			qp, err := dci(tc.max)
			switch {
			case tc.max == mlx5.DCIStreams{}:
				if qp != nil || !errors.Is(mlx5.Checked(t, err), unix.EINVAL) || errors.Is(err, mlx5.ErrInvalid) {
					t.Errorf("DCI streams 2^0 on a device without: %v, want the kernel's EINVAL", err)
				}
			case err != nil:
				t.Errorf("DCI streams %+v: %v", tc.max, err)
			default:
				qp.Close()
			}
		})
	}
}
