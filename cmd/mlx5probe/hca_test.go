package main

import (
	"testing"

	"github.com/mlx5go/mlx5go/prm"
)

// Every capability mlx5probe shows is a field prm declares (and the lab
// checks against the kernel's BTF).
func TestCapGroupsNamePRMFields(t *testing.T) {
	l := prm.CmdHcaCap.Layout()
	for _, g := range capGroups {
		for _, name := range g.Fields {
			if _, ok := l.Field(name); !ok {
				t.Errorf("%s: cmd_hca_cap has no field %q", g.Name, name)
			}
		}
	}
}

func TestHCASectionReadsFields(t *testing.T) {
	caps := make([]byte, l4096)
	prm.CmdHcaCap.LogMaxQp.Set(caps, 17)
	prm.CmdHcaCap.DrainSigerr.Set(caps, 1)
	got := map[string]uint64{}
	for _, g := range hcaSection(caps) {
		for _, c := range g.Caps {
			got[c.Name] = c.Value
		}
	}
	if got["log_max_qp"] != 17 || got["drain_sigerr"] != 1 || got["log_max_cq"] != 0 {
		t.Errorf("read %v", got)
	}
}

const l4096 = 4096
