package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mlx5go/mlx5go/internal/seam"
)

// facts are what the model does not hold but libibverbs reads: the PCI
// device id each profile's ConnectX has (mlx5_core's pci_device_id table;
// libmlx5 matches its provider by it) and the part name ibv_devinfo shows.
type facts struct {
	pciDevice uint16
	hcaType   string
}

func profileFacts() facts {
	switch profileName() {
	case "cx5":
		return facts{0x1017, "MT4119"}
	case "cx7":
		return facts{0x1021, "MT4129"}
	default: // cx6dx
		return facts{0x101d, "MT4125"}
	}
}

// writeSysfs writes the tree libibverbs discovers the device in (the
// uverbs class device, the IB device, its port and GIDs), from the
// model's answers.
func writeSysfs(root string, d seam.Device) error {
	a, err := d.QueryDevice(nil)
	if err != nil {
		return err
	}
	p, err := d.QueryPort(1)
	if err != nil {
		return err
	}
	gids, err := d.QueryGIDTable()
	if err != nil {
		return err
	}
	f := profileFacts()
	guid := fmt.Sprintf("%04x:%04x:%04x:%04x", a.NodeGUID>>48, a.NodeGUID>>32&0xffff, a.NodeGUID>>16&0xffff, a.NodeGUID&0xffff)
	files := map[string]string{
		"class/infiniband_verbs/abi_version":         "6",
		"class/infiniband_verbs/uverbs0/ibdev":       "mlx5_0",
		"class/infiniband_verbs/uverbs0/dev":         "231:192",
		"class/infiniband_verbs/uverbs0/abi_version": "1",
		"class/infiniband/mlx5_0/device/modalias": fmt.Sprintf("pci:v000015B3d%08Xsv000015B3sd00000000bc02sc00i00",
			f.pciDevice),
		"class/infiniband/mlx5_0/device/vendor":      "0x15b3",
		"class/infiniband/mlx5_0/device/device":      fmt.Sprintf("0x%04x", f.pciDevice),
		"class/infiniband/mlx5_0/node_type":          "1: CA",
		"class/infiniband/mlx5_0/node_guid":          guid,
		"class/infiniband/mlx5_0/sys_image_guid":     guid,
		"class/infiniband/mlx5_0/fw_ver":             "0.0.0",
		"class/infiniband/mlx5_0/hca_type":           f.hcaType,
		"class/infiniband/mlx5_0/hw_rev":             "0x0",
		"class/infiniband/mlx5_0/board_id":           "MLX5GO_MODEL_" + strings.ToUpper(profileName()),
		"class/infiniband/mlx5_0/ports/1/state":      portState(p.State),
		"class/infiniband/mlx5_0/ports/1/lid":        fmt.Sprintf("0x%x", p.LID),
		"class/infiniband/mlx5_0/ports/1/link_layer": map[bool]string{true: "Ethernet", false: "InfiniBand"}[p.LinkLayer == 2],
	}
	// The default P_Key, the one entry of the table the port reports.
	files["class/infiniband/mlx5_0/ports/1/pkeys/0"] = "0xffff"
	for _, g := range gids {
		files[fmt.Sprintf("class/infiniband/mlx5_0/ports/%d/gids/%d", g.Port, g.Index)] = gidString(g.GID)
		typ := "IB/RoCE v1"
		if g.Type == 2 {
			typ = "RoCE v2"
		}
		files[fmt.Sprintf("class/infiniband/mlx5_0/ports/%d/gid_attrs/types/%d", g.Port, g.Index)] = typ
	}
	for name, v := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(v+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func portState(s uint8) string {
	names := map[uint8]string{1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
	return fmt.Sprintf("%d: %s", s, names[s])
}

func gidString(g [16]byte) string {
	var parts []string
	for i := 0; i < 16; i += 2 {
		parts = append(parts, fmt.Sprintf("%02x%02x", g[i], g[i+1]))
	}
	return strings.Join(parts, ":")
}
