// Command mlx5probe lists the RDMA devices of this machine and what they
// can do, the way `ibv_devinfo -v` does, without libibverbs: identity
// (driver, GUIDs, firmware, vendor and part ids), every device attribute of
// the extended query device, and each port with its GID table; for mlx5
// devices also the HCA capabilities users of signature offloads, UMR and DC
// look for (QUERY_HCA_CAP, which mlx5_ib runs for any context), the
// block signature caps mlx5dv_query_device reports (sig_caps, with
// mlx5dv.h's names), which the driver derives from them as libmlx5 does,
// and its DCI stream caps (dci_streams: max_log_num_concurent,
// max_log_num_errored, from the kernel's query device).
//
//	go run ./cmd/mlx5probe              # text shaped like ibv_devinfo -v
//	go run ./cmd/mlx5probe -json        # JSON, keys named as ibv_devinfo names them
//	go run ./cmd/mlx5probe -d rxe0      # one device
//	go run ./cmd/mlx5probe -sim cx6dx   # mlx5go's software ConnectX, no hardware needed
//
// It only queries: it opens each device (a uverbs context), reads, and
// closes it. A device it cannot open or query is reported with the error;
// the others are still listed. The exit status is 1 if any device failed.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/uverbs"
)

// options are the command line.
type options struct {
	json   bool
	device string // "" for all
	sim    string // a model profile: probe the software ConnectX instead
}

func main() {
	var opt options
	flag.BoolVar(&opt.json, "json", false, "print JSON")
	flag.StringVar(&opt.device, "d", "", "only the device `NAME` (e.g. mlx5_0, rxe0)")
	flag.StringVar(&opt.sim, "sim", "", "probe mlx5go's software ConnectX with `PROFILE` ("+strings.Join(model.Profiles(), ", ")+") instead of this machine's devices")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "mlx5probe: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	if err := run(os.Stdout, opt); err != nil {
		fmt.Fprintln(os.Stderr, "mlx5probe:", err)
		os.Exit(1)
	}
}

// errDeviceFailed reports that at least one device could not be probed
// fully; the output says which and why.
var errDeviceFailed = errors.New("some devices could not be queried (see their errors)")

// collect builds the report from the kernel: sysfs for the device list,
// then each device's queries.
func collect(opt options) (report, error) {
	var rep report
	if opt.sim != "" {
		d, err := probeModel(opt.sim)
		if err != nil {
			return rep, err
		}
		rep.Devices = []deviceReport{d}
		return rep, nil
	}
	devs, err := uverbs.Devices()
	if err != nil {
		return rep, err
	}
	if opt.device != "" {
		d, err := uverbs.DeviceByName(opt.device)
		if err != nil {
			return rep, err
		}
		devs = []uverbs.Device{d}
	}
	rep.Devices = []deviceReport{}
	if len(devs) > 0 {
		if rep.ABIVersion, err = uverbs.ABIVersion(); err != nil {
			return rep, err
		}
	}
	for _, d := range devs {
		rep.Devices = append(rep.Devices, probeDevice(d))
	}
	return rep, nil
}

func run(w io.Writer, opt options) error {
	rep, err := collect(opt)
	if err != nil {
		return err
	}
	if opt.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		if len(rep.Devices) == 0 {
			fmt.Fprintln(w, "No RDMA devices found (no /sys/class/infiniband_verbs/uverbs*).")
			fmt.Fprintln(w, "Load your NIC's RDMA driver (mlx5_ib for ConnectX), or run the kernel lab, which has an rdma_rxe device: go run ./hwtest/lab")
			fmt.Fprintf(w, "To see what a ConnectX reports, probe mlx5go's software model: mlx5probe -sim cx6dx (profiles: %s)\n", strings.Join(model.Profiles(), ", "))
			return nil
		}
		if err := writeText(w, rep); err != nil {
			return err
		}
	}
	return rep.failed()
}

// failed returns errDeviceFailed if any device has errors.
func (r report) failed() error {
	for _, d := range r.Devices {
		if len(d.Errors) > 0 {
			return errDeviceFailed
		}
	}
	return nil
}
