package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/internal/labenv"
)

// TestLabProbeRXE runs the probe on the lab's real rxe device.
func TestLabProbeRXE(t *testing.T) {
	labenv.Require(t)
	var table bytes.Buffer
	if err := run(&table, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	if !strings.Contains(table.String(), labenv.RXEDevice) || !strings.Contains(table.String(), "1:ACTIVE/Ethernet") {
		t.Errorf("table does not show %s with port 1 ACTIVE", labenv.RXEDevice)
	}
	var js bytes.Buffer
	if err := run(&js, true); err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(js.Bytes(), &rep); err != nil {
		t.Fatalf("JSON output: %v\n%s", err, js.String())
	}
	if rep.ABIVersion != 6 || len(rep.Devices) == 0 || rep.Devices[0].Name != labenv.RXEDevice {
		t.Errorf("JSON report = %+v", rep)
	}
}
