package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/model"
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

// -sim probes the software ConnectX through the driver, as a real device.
func TestSimProfiles(t *testing.T) {
	for _, p := range model.Profiles() {
		var text, js bytes.Buffer
		if err := run(&text, options{sim: p}); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, want := range []string{"hca_id:\tmodel:" + p, "signature and UMR:", "drain_sigerr:", "log_max_dci_stream_channels:"} {
			if !strings.Contains(text.String(), want) {
				t.Errorf("%s: text output lacks %q", p, want)
			}
		}
		if err := run(&js, options{sim: p, json: true}); err != nil {
			t.Fatal(err)
		}
		var rep report
		if err := json.Unmarshal(js.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Devices) != 1 || len(rep.Devices[0].HCACaps) != len(capGroups) {
			t.Fatalf("%s: JSON %s", p, js.String())
		}
		// What the model's profile says must come out: cx5 has no
		// drain_sigerr, cx6dx and cx7 do (docs/MODEL.md).
		var drain uint64 = 99
		for _, g := range rep.Devices[0].HCACaps {
			for _, c := range g.Caps {
				if c.Name == "drain_sigerr" {
					drain = c.Value
				}
			}
		}
		if want := map[string]uint64{"cx5": 0, "cx6dx": 1, "cx7": 1}[p]; drain != want {
			t.Errorf("%s: drain_sigerr %d, want %d", p, drain, want)
		}
	}
	if err := run(io.Discard, options{sim: "cx1"}); err == nil {
		t.Error("-sim cx1: no error for an unknown profile")
	}
}
