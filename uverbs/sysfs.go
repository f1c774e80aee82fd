package uverbs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// SupportedABIVersion is the uverbs ABI version this package speaks
// (IB_USER_VERBS_ABI_VERSION in <rdma/ib_user_verbs.h>).
const SupportedABIVersion = 6

// sysfsRoot is where sysfs is mounted; tests point it at a fake tree.
var sysfsRoot = "/sys"

// devRoot is where device nodes live; tests point it elsewhere.
var devRoot = "/dev"

// ErrNoDevice reports that no RDMA device (or none of the name asked for)
// is present.
var ErrNoDevice = errors.New("uverbs: no such RDMA device")

// Device is an RDMA device with a uverbs character device, as sysfs
// describes it.
type Device struct {
	Name       string // ibdev name, e.g. "mlx5_0" or "rxe0"
	Uverbs     string // uverbs class device, e.g. "uverbs0"
	Path       string // character device, e.g. "/dev/infiniband/uverbs0"
	ABIVersion int    // per-device uverbs ABI version (the provider's)
	NodeType   int    // 1 CA, 2 switch, 3 router, 4 RNIC, ...
	NodeGUID   string // as sysfs prints it: "0011:2233:4455:6677"
	SysImage   string // system image GUID, same format
	FWVersion  string
	Driver     string // kernel driver name from the PCI or parent device, if any
	Ports      []Port
}

// Port is one port's sysfs state.
type Port struct {
	Num       int
	State     int    // 4 = ACTIVE
	StateName string // e.g. "ACTIVE"
	LinkLayer string // "InfiniBand" or "Ethernet"
}

func readTrim(p string) (string, error) {
	b, err := os.ReadFile(p)
	return strings.TrimSpace(string(b)), err
}

// ABIVersion reads the kernel's uverbs ABI version
// (/sys/class/infiniband_verbs/abi_version).
func ABIVersion() (int, error) {
	s, err := readTrim(filepath.Join(sysfsRoot, "class/infiniband_verbs/abi_version"))
	if err != nil {
		return 0, fmt.Errorf("uverbs: read abi_version: %w", err)
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("uverbs: abi_version %q: %w", s, err)
	}
	return v, nil
}

// CheckABIVersion returns an error unless the kernel speaks the uverbs ABI
// version this package implements.
func CheckABIVersion() error {
	v, err := ABIVersion()
	if err != nil {
		return err
	}
	if v != SupportedABIVersion {
		return fmt.Errorf("uverbs: kernel ABI version %d, this package speaks %d", v, SupportedABIVersion)
	}
	return nil
}

// Devices lists the RDMA devices that have a uverbs character device,
// sorted by name. A machine without RDMA devices gives an empty list and no
// error.
func Devices() ([]Device, error) {
	dir := filepath.Join(sysfsRoot, "class/infiniband_verbs")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("uverbs: list devices: %w", err)
	}
	var devs []Device
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "uverbs") {
			continue
		}
		d, err := readDevice(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		devs = append(devs, d)
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].Name < devs[j].Name })
	return devs, nil
}

// DeviceByName finds the device whose ibdev name is name.
func DeviceByName(name string) (Device, error) {
	devs, err := Devices()
	if err != nil {
		return Device{}, err
	}
	for _, d := range devs {
		if d.Name == name {
			return d, nil
		}
	}
	return Device{}, fmt.Errorf("%w: %q", ErrNoDevice, name)
}

func readDevice(udir string) (Device, error) {
	d := Device{Uverbs: filepath.Base(udir)}
	var err error
	if d.Name, err = readTrim(filepath.Join(udir, "ibdev")); err != nil {
		return d, fmt.Errorf("uverbs: %s: %w", d.Uverbs, err)
	}
	if s, err := readTrim(filepath.Join(udir, "abi_version")); err == nil {
		d.ABIVersion, _ = strconv.Atoi(s)
	}
	d.Path = filepath.Join(devRoot, "infiniband", d.Uverbs)
	ib := filepath.Join(sysfsRoot, "class/infiniband", d.Name)
	if s, err := readTrim(filepath.Join(ib, "node_type")); err == nil {
		n, _, _ := strings.Cut(s, ":")
		d.NodeType, _ = strconv.Atoi(n)
	}
	d.NodeGUID, _ = readTrim(filepath.Join(ib, "node_guid"))
	d.SysImage, _ = readTrim(filepath.Join(ib, "sys_image_guid"))
	d.FWVersion, _ = readTrim(filepath.Join(ib, "fw_ver"))
	if l, err := os.Readlink(filepath.Join(ib, "device/driver")); err == nil {
		d.Driver = filepath.Base(l)
	}
	ports, _ := os.ReadDir(filepath.Join(ib, "ports"))
	for _, p := range ports {
		num, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		pd := filepath.Join(ib, "ports", p.Name())
		pt := Port{Num: num}
		if s, err := readTrim(filepath.Join(pd, "state")); err == nil {
			n, name, _ := strings.Cut(s, ":")
			pt.State, _ = strconv.Atoi(strings.TrimSpace(n))
			pt.StateName = strings.TrimSpace(name)
		}
		pt.LinkLayer, _ = readTrim(filepath.Join(pd, "link_layer"))
		d.Ports = append(d.Ports, pt)
	}
	sort.Slice(d.Ports, func(i, j int) bool { return d.Ports[i].Num < d.Ports[j].Num })
	return d, nil
}
