package main

import (
	"testing"

	"github.com/mlx5go/mlx5go/uverbs"
)

// An XDR port's speed is only in active_speed_ex (the legacy u8 reads 0):
// mlx5probe shows it as ibv_devinfo does.
func TestPortSpeedXDR(t *testing.T) {
	for _, tc := range []struct {
		pa   uverbs.PortAttr
		name string
		val  int64
	}{
		{uverbs.PortAttr{ActiveSpeed: 0, ActiveSpeedEx: 256}, "200.0 Gbps", 256},
		{uverbs.PortAttr{ActiveSpeed: 32}, "25.0 Gbps", 32},
	} {
		p := portSection(1, &tc.pa)
		if p.ActiveSpeed.Name != tc.name || p.ActiveSpeed.Value != tc.val {
			t.Errorf("%+v: active_speed %q (%d), want %q (%d)", tc.pa, p.ActiveSpeed.Name, p.ActiveSpeed.Value, tc.name, tc.val)
		}
	}
}
