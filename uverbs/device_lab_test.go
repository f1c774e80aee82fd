package uverbs

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"golang.org/x/sys/unix"
)

// sysfsDev reads attribute attr of the lab's rxe device, "" if the
// attribute is absent (the kernel only creates some for some drivers).
func sysfsDev(t *testing.T, attr string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/class/infiniband", labenv.RXEDevice, attr))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// Query device agrees with sysfs and with RDMA netlink about the same
// device.
func TestLabQueryDeviceMatchesSysfsAndNetlink(t *testing.T) {
	c := openLab(t)
	d, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %+v", labenv.RXEDevice, d)
	if d.ResponseLength != uverbsabi.SizeofIbUverbsExQueryDeviceResp {
		t.Errorf("response_length %d; the lab's kernel has the %d-byte struct (BTF)", d.ResponseLength, uverbsabi.SizeofIbUverbsExQueryDeviceResp)
	}
	if got, want := FormatGUID(d.NodeGUID), sysfsDev(t, "node_guid"); got != want {
		t.Errorf("node_guid %s, sysfs %s", got, want)
	}
	if got, want := FormatGUID(d.SysImageGUID), sysfsDev(t, "sys_image_guid"); got != want {
		t.Errorf("sys_image_guid %s, sysfs %s", got, want)
	}
	if d.NodeGUID == 0 {
		t.Error("node GUID is zero")
	}
	// fw_ver, hw_rev and the PCI ids exist in sysfs only for drivers that
	// provide them; compare where they do.
	fw := sysfsDev(t, "fw_ver")
	t.Logf("sysfs fw_ver %q, hw_rev %q; query: fw %#x (%s), hw_ver %#x, vendor %#x part %d",
		fw, sysfsDev(t, "hw_rev"), d.FWVer, d.FWVersion(), d.HWVer, d.VendorID, d.VendorPartID)
	if fw != "" && fw != d.FWVersion() {
		t.Errorf("fw_ver %s, sysfs %s", d.FWVersion(), fw)
	}
	if hw := sysfsDev(t, "hw_rev"); hw != "" {
		if v, err := strconv.ParseUint(hw, 0, 32); err != nil || uint32(v) != d.HWVer {
			t.Errorf("hw_ver %#x, sysfs hw_rev %q", d.HWVer, hw)
		}
	}
	for attr, got := range map[string]uint32{"device/vendor": d.VendorID, "device/device": d.VendorPartID} {
		if s := sysfsDev(t, attr); s != "" {
			if v, err := strconv.ParseUint(s, 0, 32); err != nil || uint32(v) != got {
				t.Errorf("%s: query %#x, sysfs %q", attr, got, s)
			}
		}
	}
	ports, err := os.ReadDir(filepath.Join("/sys/class/infiniband", labenv.RXEDevice, "ports"))
	if err != nil {
		t.Fatal(err)
	}
	if int(d.PhysPortCnt) != len(ports) {
		t.Errorf("phys_port_cnt %d, sysfs has %d ports", d.PhysPortCnt, len(ports))
	}
	if d.MaxQP == 0 || d.MaxCQE == 0 || d.MaxPD == 0 || d.MaxMR == 0 || d.MaxSGE == 0 {
		t.Errorf("a device without QPs, CQEs, PDs, MRs or SGEs: %+v", d)
	}
	if d.PageSizeCap&(1<<12) == 0 {
		t.Errorf("page_size_cap %#x lacks 4 KiB pages", d.PageSizeCap)
	}
	if uint32(d.DeviceCapFlagsEx) != uint32(d.DeviceCapFlags) {
		t.Errorf("device_cap_flags_ex %#x does not extend device_cap_flags %#x", d.DeviceCapFlagsEx, d.DeviceCapFlags)
	}

	nd := labNLDevice(t)
	if nd.NodeGUID != d.NodeGUID || nd.SysImageGUID != d.SysImageGUID {
		t.Errorf("netlink GUIDs %s/%s, query %s/%s", FormatGUID(nd.NodeGUID), FormatGUID(nd.SysImageGUID), FormatGUID(d.NodeGUID), FormatGUID(d.SysImageGUID))
	}
	if nd.Ports != uint32(d.PhysPortCnt) {
		t.Errorf("netlink ports %d, phys_port_cnt %d", nd.Ports, d.PhysPortCnt)
	}
	// Netlink carries the driver's firmware string, as sysfs does, and
	// leaves it out when the driver has none.
	if nd.FWVersion != fw {
		t.Errorf("netlink FW version %q, sysfs %q", nd.FWVersion, fw)
	}
}

// The GID table agrees with sysfs ports/1/gids, gid_attrs/types and
// gid_attrs/ndevs, entry by entry, and QueryGIDEntry with the table.
func TestLabGIDTableMatchesSysfs(t *testing.T) {
	c := openLab(t)
	table, err := c.QueryGIDTable()
	if err != nil {
		t.Fatal(err)
	}
	port := filepath.Join("/sys/class/infiniband", labenv.RXEDevice, "ports/1")
	byIndex := map[uint32]GIDEntry{}
	var haveV4, haveLinkLocal bool
	for _, e := range table {
		t.Logf("GID[%3d] port %d %s %s ifindex %d", e.Index, e.Port, e.GID.Addr(), e.Type, e.NetdevIfindex)
		byIndex[e.Index] = e
		if e.Port != 1 {
			t.Errorf("entry on port %d; rxe has one port", e.Port)
		}
		n := strconv.Itoa(int(e.Index))
		if got := sysfsPort(t, "gids/"+n); got != e.GID.String() {
			t.Errorf("GID[%d] %s, sysfs %s", e.Index, e.GID, got)
		}
		wantType := "IB/RoCE v1" // sysfs's name for types 0 and 1
		if e.Type == GIDTypeRoCEv2 {
			wantType = "RoCE v2"
		}
		if got := sysfsPort(t, "gid_attrs/types/"+n); got != wantType {
			t.Errorf("GID[%d] type %s, sysfs %q", e.Index, e.Type, got)
		}
		ifi, err := net.InterfaceByIndex(int(e.NetdevIfindex))
		if err != nil {
			t.Errorf("GID[%d] netdev ifindex %d: %v", e.Index, e.NetdevIfindex, err)
		} else if got := sysfsPort(t, "gid_attrs/ndevs/"+n); got != ifi.Name || ifi.Name != labenv.Netdev {
			t.Errorf("GID[%d] netdev %s, sysfs %s, lab %s", e.Index, ifi.Name, got, labenv.Netdev)
		}
		if a := e.GID.Addr(); a.Is4In6() && a.Unmap().String() == "192.0.2.1" && e.Type == GIDTypeRoCEv2 {
			haveV4 = true
		}
		if e.GID.Addr().IsLinkLocalUnicast() {
			haveLinkLocal = true
		}
		one, err := c.QueryGIDEntry(1, e.Index)
		if err != nil {
			t.Errorf("QueryGIDEntry(1, %d): %v", e.Index, err)
		} else if one != e {
			t.Errorf("QueryGIDEntry(1, %d) = %+v, table has %+v", e.Index, one, e)
		}
	}
	if !haveV4 || !haveLinkLocal {
		t.Errorf("table lacks the RoCE v2 GID of 192.0.2.1 (%v) or a link-local GID (%v)", haveV4, haveLinkLocal)
	}
	// Every non-empty sysfs slot is in the table.
	gids, err := os.ReadDir(filepath.Join(port, "gids"))
	if err != nil {
		t.Fatal(err)
	}
	nonEmpty := 0
	for _, g := range gids {
		if s := sysfsPort(t, "gids/"+g.Name()); s != (GID{}).String() {
			nonEmpty++
			i, _ := strconv.Atoi(g.Name())
			if _, ok := byIndex[uint32(i)]; !ok {
				t.Errorf("sysfs GID[%s] %s is not in the table", g.Name(), s)
			}
		}
	}
	if nonEmpty != len(table) {
		t.Errorf("table has %d entries, sysfs %d non-empty GIDs", len(table), nonEmpty)
	}
}

// GID queries fail as the kernel says, with errors naming the call.
func TestLabGIDErrors(t *testing.T) {
	c := openLab(t)
	pa, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	table, err := c.QueryGIDTable()
	if err != nil {
		t.Fatal(err)
	}
	used := map[uint32]bool{}
	for _, e := range table {
		used[e.Index] = true
	}
	empty := uint32(0)
	for used[empty] {
		empty++
	}
	cases := []struct {
		name        string
		port, index uint32
		want        unix.Errno
	}{
		{"port the device lacks", 2, 0, unix.EINVAL},
		{"index past the table", 1, pa.GIDTableLen, unix.EINVAL},
		{"empty slot", 1, empty, unix.ENODATA},
	}
	for _, tc := range cases {
		_, err := c.QueryGIDEntry(tc.port, tc.index)
		t.Logf("%s: %v", tc.name, err)
		var ce *CallError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "query gid entry") {
			t.Errorf("%s: %v, want a CallError naming query gid entry", tc.name, err)
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := c.QueryGIDEntry(0, 0); err == nil || errors.As(err, new(*CallError)) {
		t.Errorf("QueryGIDEntry(0, 0) = %v, want an error before the call", err)
	}
}

// RDMA netlink's uverbs character device is the one sysfs names, with the
// driver id the kernel expects in every call's header.
func TestLabUverbsChardev(t *testing.T) {
	labenv.Require(t)
	nd := labNLDevice(t)
	cd, err := NetlinkUverbsChardev(nd.Index)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", cd)
	sd, err := DeviceByName(labenv.RXEDevice)
	if err != nil {
		t.Fatal(err)
	}
	if cd.Name != sd.Uverbs || cd.ABI != uint64(sd.ABIVersion) {
		t.Errorf("netlink chardev %s ABI %d, sysfs %s ABI %d", cd.Name, cd.ABI, sd.Uverbs, sd.ABIVersion)
	}
	var st unix.Stat_t
	if err := unix.Stat(sd.Path, &st); err != nil {
		t.Fatal(err)
	}
	major, minor := uint32(cd.Dev>>8&0xfff), uint32(cd.Dev&0xff|cd.Dev>>12&0xfff00)
	if major != unix.Major(st.Rdev) || minor != unix.Minor(st.Rdev) {
		t.Errorf("netlink dev %d:%d, %s is %d:%d", major, minor, sd.Path, unix.Major(st.Rdev), unix.Minor(st.Rdev))
	}
	if cd.DriverID != DriverRXE {
		t.Errorf("driver id %d, want RDMA_DRIVER_RXE (%d)", cd.DriverID, DriverRXE)
	}
	id, err := DriverIDOf(labenv.RXEDevice)
	if err != nil || id != cd.DriverID {
		t.Errorf("DriverIDOf(%s) = %d, %v", labenv.RXEDevice, id, err)
	}
	if _, err := DriverIDOf("nosuchdev9"); !errors.Is(err, ErrNoDevice) {
		t.Errorf("DriverIDOf(nosuchdev9) = %v, want ErrNoDevice", err)
	}
	// The kernel answers EINVAL for a device index it does not have.
	if _, err := NetlinkUverbsChardev(0xfffff); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "get chardev") {
		t.Errorf("chardev of a missing device index: %v, want EINVAL naming get chardev", err)
	}
	// The kernel refuses calls whose header names another driver.
	_, err = Open(labenv.RXEDevice, &Options{DriverID: DriverMLX5})
	if !errors.Is(err, unix.EINVAL) {
		t.Errorf("Open with the mlx5 driver id on rxe: %v, want EINVAL", err)
	}
}

// The kernel fills a shorter response buffer as an older kernel would fill
// ours: it writes what fits and says so in response_length. On the ioctl
// path it does not refuse a buffer too short even for response_length
// (no ENOSPC: it writes what fits and nothing past it), which is why
// QueryDevice always passes the whole struct.
func TestLabQueryDeviceShortResponse(t *testing.T) {
	c := openLab(t)
	full, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	const cmd = uverbsabi.IB_USER_VERBS_CMD_FLAG_EXTENDED | uverbsabi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE
	var in uverbsabi.IbUverbsExQueryDevice
	var r uverbsabi.IbUverbsExQueryDeviceResp
	for _, n := range []uintptr{unsafe.Offsetof(r.ResponseLength) + 4, unsafe.Offsetof(r.TmCaps)} {
		var resp uverbsabi.IbUverbsExQueryDeviceResp
		if err := c.InvokeWrite("query device (short)", cmd, asBytes(&in), asBytes(&resp)[:n], nil, nil); err != nil {
			t.Fatal(err)
		}
		if uintptr(resp.ResponseLength) != n {
			t.Errorf("response_length %d for a %d-byte buffer", resp.ResponseLength, n)
		}
		short := decodeQueryDeviceResp(&resp)
		// What a kernel whose struct ends at n would give: the full answer
		// with every field past n zero.
		want := full
		want.ResponseLength = uint32(n)
		if n < unsafe.Offsetof(r.TmCaps) {
			want.ODPCaps, want.CompletionTimestampMask, want.HCACoreClock, want.DeviceCapFlagsEx = ODPCaps{}, 0, 0, 0
			want.RSSCaps, want.MaxWQTypeRQ, want.RawPacketCaps = RSSCaps{}, 0, 0
		}
		want.TMCaps, want.CQModerationCaps, want.MaxDMSize, want.XRCODPCaps = TMCaps{}, CQModerationCaps{}, 0, 0
		if short != want {
			t.Errorf("%d-byte response decodes to\n%+v\nwant\n%+v", n, short, want)
		}
	}
	// A buffer that ends before response_length: the call succeeds and
	// the kernel writes nothing past the buffer.
	var resp uverbsabi.IbUverbsExQueryDeviceResp
	b := asBytes(&resp)
	for i := range b {
		b[i] = 0xee
	}
	n := unsafe.Sizeof(resp.Base)
	if err := c.InvokeWrite("query device (base only)", cmd, asBytes(&in), b[:n], nil, nil); err != nil {
		t.Errorf("%d-byte buffer: %v", n, err)
	}
	if resp.Base.MaxQp != full.MaxQP || resp.ResponseLength != 0xeeeeeeee {
		t.Errorf("%d-byte buffer: max_qp %#x, response_length %#x (want %#x and untouched)", n, resp.Base.MaxQp, resp.ResponseLength, full.MaxQP)
	}
}

// The extended query with provider driver data on rxe, by ioctl and by
// write(): rxe has no driver data for it. An empty driver response sends
// no UHW_OUT (ioctl) or no provider words (write) and answers as
// QueryDevice; a non-empty one is refused with EINVAL and left as it was
// (6.1 and 6.12: rxe_query_device rejects any udata), or accepted and
// zeroed (7.x: "RDMA: Use ib_respond_empty_udata()" in every driver with
// no response struct). Either way mlx5, which passes struct
// mlx5_ib_query_device_resp there (QueryDeviceWithDriverData), reads no
// capability from it.
func TestLabQueryDeviceDriverData(t *testing.T) {
	for _, forceWrite := range []bool{false, true} {
		t.Run(fmt.Sprintf("write=%v", forceWrite), func(t *testing.T) {
			labenv.Require(t)
			c, err := Open(labenv.RXEDevice, &Options{DriverID: DriverRXE, ForceWrite: forceWrite})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			want, err := c.QueryDevice()
			if err != nil {
				t.Fatal(err)
			}
			for _, drv := range [][]byte{nil, {}} {
				got, err := c.QueryDeviceWithDriverData(drv)
				if err != nil {
					t.Fatalf("driver response %v: %v", drv, err)
				}
				if got != want {
					t.Errorf("driver response %v: %+v, QueryDevice %+v", drv, got, want)
				}
			}
			drv := bytes.Repeat([]byte{0xee}, 104) // as mlx5 passes it
			_, err = c.QueryDeviceWithDriverData(drv)
			switch {
			case err == nil:
				// 7.x: drivers that have no response struct answer with
				// ib_respond_empty_udata, which zeroes the caller's buffer.
				if !bytes.Equal(drv, make([]byte, 104)) {
					t.Errorf("accepted driver response not zeroed: %x", drv)
				}
			case !errors.Is(err, unix.EINVAL):
				t.Errorf("104-byte driver response on rxe: %v, want EINVAL (6.1, 6.12) or success with zeros (7.x)", err)
			case !bytes.Equal(drv, bytes.Repeat([]byte{0xee}, 104)):
				t.Errorf("refused query wrote the driver response: %x", drv)
			}
		})
	}
}
