// Command mlx5probe lists the RDMA devices of this machine and what they
// can do: driver, GUIDs, firmware and ports today; the mlx5 HCA
// capabilities (signature, UMR, DCI streams) as the driver grows.
//
//	go run ./cmd/mlx5probe          # a table for people
//	go run ./cmd/mlx5probe -json    # JSON for machines
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/mlx5go/mlx5go/uverbs"
)

type report struct {
	ABIVersion int             `json:"uverbs_abi_version,omitempty"`
	Devices    []uverbs.Device `json:"devices"`
}

func main() {
	jsonOut := flag.Bool("json", false, "print JSON")
	flag.Parse()
	if err := run(os.Stdout, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "mlx5probe:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, jsonOut bool) error {
	devs, err := uverbs.Devices()
	if err != nil {
		return err
	}
	rep := report{Devices: devs}
	if rep.Devices == nil {
		rep.Devices = []uverbs.Device{}
	}
	if len(devs) > 0 {
		if rep.ABIVersion, err = uverbs.ABIVersion(); err != nil {
			return err
		}
	}
	if jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if len(devs) == 0 {
		fmt.Fprintln(w, "No RDMA devices found (no /sys/class/infiniband_verbs/uverbs*).")
		fmt.Fprintln(w, "Load your NIC's RDMA driver (mlx5_ib for ConnectX), or run the kernel lab, which has an rdma_rxe device: go run ./hwtest/lab")
		return nil
	}
	fmt.Fprintf(w, "uverbs ABI version %d\n\n", rep.ABIVersion)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tUVERBS\tNODE TYPE\tNODE GUID\tSYS IMAGE GUID\tFW\tPORTS")
	for _, d := range devs {
		ports := ""
		for i, p := range d.Ports {
			if i > 0 {
				ports += ", "
			}
			ports += fmt.Sprintf("%d:%s/%s", p.Num, p.StateName, p.LinkLayer)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", d.Name, d.Path, d.NodeType, d.NodeGUID, d.SysImage, d.FWVersion, ports)
	}
	return tw.Flush()
}
