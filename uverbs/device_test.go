package uverbs

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
)

// oracleQueryDevice is libibverbs' extended query device from the oracle's
// open_device case: the INVOKE_WRITE whose WRITE_CMD is 0x80000001 (the
// first INVOKE_WRITE of the case is libibverbs' probe for the method).
func oracleQueryDevice(t *testing.T) oracleCall {
	t.Helper()
	for _, c := range oracleCalls(t, "open_device") {
		if c.Method == "INVOKE_WRITE" && len(c.Attrs) > 0 && c.Attrs[0].Name == "WRITE_CMD" && c.Attrs[0].Hex == "0100008000000000" {
			return c
		}
	}
	t.Fatal("oracle has no INVOKE_WRITE of write command 0x80000001 in open_device")
	return oracleCall{}
}

// oracleOutHex is the bytes the oracle's fake kernel wrote into output
// attribute name of the call kase/object/method (out_hex is not in
// oracleCall, so the record is read again).
func oracleOutHex(t testing.TB, kase, method, writeCmd, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/create_cmds.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var rec struct {
			Case       string `json:"case"`
			KernelCmds []struct {
				Method   string `json:"method"`
				WriteCmd string `json:"write_cmd"`
				Attrs    []struct {
					Name   string `json:"name"`
					OutHex string `json:"out_hex"`
				} `json:"attrs"`
			} `json:"kernel_cmds"`
		}
		if line == "" {
			continue
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Case != kase {
			continue
		}
		for _, c := range rec.KernelCmds {
			if c.Method != method || c.WriteCmd != writeCmd {
				continue
			}
			for _, a := range c.Attrs {
				if a.Name == name {
					out, err := hex.DecodeString(a.OutHex)
					if err != nil {
						t.Fatal(err)
					}
					return out
				}
			}
		}
	}
	t.Fatalf("oracle has no %s %s %s output %s", kase, method, writeCmd, name)
	return nil
}

func TestOracleQueryDeviceEx(t *testing.T) {
	want := oracleQueryDevice(t)
	if uverbsabi.IB_USER_VERBS_CMD_FLAG_EXTENDED|uverbsabi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE != 0x80000001 {
		t.Fatalf("extended query device command %#x, libibverbs sent 0x80000001", uverbsabi.IB_USER_VERBS_CMD_FLAG_EXTENDED|uverbsabi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE)
	}
	drvOut := make([]byte, 104) // struct mlx5_ib_query_device_resp, as libmlx5 passed it
	c := testContext(t)
	hdr, attrs := capture(t, func() {
		if _, err := c.QueryDeviceWithDriverData(drvOut); err != nil {
			t.Fatal(err)
		}
	})
	compare(t, want, hdr, attrs)
	// compare skips INVOKE_WRITE's CORE_IN bytes (alloc pd's hold an
	// address); struct ib_uverbs_ex_query_device has none, so check them.
	var got [8]byte
	binary.LittleEndian.PutUint64(got[:], attrs[1].Data)
	if h := hex.EncodeToString(got[:]); h != want.Attrs[1].Hex {
		t.Errorf("CORE_IN bytes %s, libibverbs %s", h, want.Attrs[1].Hex)
	}
	if attrs[3].Data != uint64(uintptr(unsafe.Pointer(&drvOut[0]))) {
		t.Errorf("UHW_OUT points at %#x, not at the caller's buffer", attrs[3].Data)
	}
	// Without driver data the call has no UHW_OUT.
	_, attrs = capture(t, func() {
		if _, err := c.QueryDevice(); err != nil {
			t.Fatal(err)
		}
	})
	if len(attrs) != 3 {
		t.Errorf("QueryDevice sent %d attributes, want WRITE_CMD, CORE_IN, CORE_OUT", len(attrs))
	}
}

// respFromBytes loads a struct ib_uverbs_ex_query_device_resp from the
// bytes the kernel would have written.
func respFromBytes(t *testing.T, b []byte) *uverbsabi.IbUverbsExQueryDeviceResp {
	t.Helper()
	var r uverbsabi.IbUverbsExQueryDeviceResp
	if len(b) != int(unsafe.Sizeof(r)) {
		t.Fatalf("%d response bytes, struct is %d", len(b), unsafe.Sizeof(r))
	}
	copy(asBytes(&r), b)
	return &r
}

// The oracle's fake kernel answered libibverbs with a ConnectX-6; decoding
// its bytes gives the values its README lists (vendor 0x02c9, part 4123,
// fw 20.31.1014, max_qp 2^18, max_qp_wr 32768, max_sge 30, ATOMIC_HCA).
func TestDecodeOracleQueryDeviceResp(t *testing.T) {
	out := oracleOutHex(t, "open_device", "INVOKE_WRITE", "0x80000001", "CORE_OUT")
	d := decodeQueryDeviceResp(respFromBytes(t, out))
	t.Logf("%+v", d)
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"vendor_id", uint64(d.VendorID), 0x02c9},
		{"vendor_part_id", uint64(d.VendorPartID), 4123},
		{"max_qp", uint64(d.MaxQP), 1 << 18},
		{"max_qp_wr", uint64(d.MaxQPWR), 32768},
		{"max_sge", uint64(d.MaxSGE), 30},
		{"atomic_cap", uint64(d.AtomicCap), uint64(AtomicHCA)},
		{"phys_port_cnt", uint64(d.PhysPortCnt), 1},
		{"response_length", uint64(d.ResponseLength), uverbsabi.SizeofIbUverbsExQueryDeviceResp},
		// node_guid is __be64 in memory: the bytes at offset 8 read as a
		// big-endian number.
		{"node_guid", d.NodeGUID, binary.BigEndian.Uint64(out[8:16])},
		{"sys_image_guid", d.SysImageGUID, binary.BigEndian.Uint64(out[16:24])},
		{"max_mr_size", d.MaxMRSize, binary.LittleEndian.Uint64(out[24:32])},
		{"hca_core_clock", d.HCACoreClock, binary.LittleEndian.Uint64(out[216:224])},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
	if got := d.FWVersion(); got != "20.31.1014" {
		t.Errorf("FWVersion() = %q, want 20.31.1014", got)
	}
	if d.AtomicCap.String() != "ATOMIC_HCA" {
		t.Errorf("atomic cap %v", d.AtomicCap)
	}
}

// A field is taken only if the kernel's response_length covers it; an
// older kernel's shorter response leaves the newer fields zero even when
// the buffer holds other bytes there.
func TestDecodeQueryDeviceRespLength(t *testing.T) {
	var full uverbsabi.IbUverbsExQueryDeviceResp
	b := asBytes(&full)
	for i := range b {
		b[i] = 0xa5
	}
	type ext struct {
		name string
		end  uintptr // offsetofend in struct ib_uverbs_ex_query_device_resp
		get  func(d *DeviceAttr) uint64
	}
	r := &full
	exts := []ext{
		{"odp_caps", unsafe.Offsetof(r.OdpCaps) + unsafe.Sizeof(r.OdpCaps), func(d *DeviceAttr) uint64 { return d.ODPCaps.General | uint64(d.ODPCaps.UD) }},
		{"timestamp_mask", unsafe.Offsetof(r.TimestampMask) + 8, func(d *DeviceAttr) uint64 { return d.CompletionTimestampMask }},
		{"hca_core_clock", unsafe.Offsetof(r.HcaCoreClock) + 8, func(d *DeviceAttr) uint64 { return d.HCACoreClock }},
		{"device_cap_flags_ex", unsafe.Offsetof(r.DeviceCapFlagsEx) + 8, func(d *DeviceAttr) uint64 { return uint64(d.DeviceCapFlagsEx) }},
		{"rss_caps", unsafe.Offsetof(r.RssCaps) + unsafe.Sizeof(r.RssCaps), func(d *DeviceAttr) uint64 { return uint64(d.RSSCaps.MaxRWQIndirectionTableSize) }},
		{"max_wq_type_rq", unsafe.Offsetof(r.MaxWqTypeRq) + 4, func(d *DeviceAttr) uint64 { return uint64(d.MaxWQTypeRQ) }},
		{"raw_packet_caps", unsafe.Offsetof(r.RawPacketCaps) + 4, func(d *DeviceAttr) uint64 { return uint64(d.RawPacketCaps) }},
		{"tm_caps", unsafe.Offsetof(r.TmCaps) + unsafe.Sizeof(r.TmCaps), func(d *DeviceAttr) uint64 { return uint64(d.TMCaps.MaxSGE) }},
		{"cq_moderation_caps", unsafe.Offsetof(r.CqModerationCaps) + unsafe.Sizeof(r.CqModerationCaps), func(d *DeviceAttr) uint64 { return uint64(d.CQModerationCaps.MaxCQPeriod) }},
		{"max_dm_size", unsafe.Offsetof(r.MaxDmSize) + 8, func(d *DeviceAttr) uint64 { return d.MaxDMSize }},
		{"xrc_odp_caps", unsafe.Offsetof(r.XrcOdpCaps) + 4, func(d *DeviceAttr) uint64 { return uint64(d.XRCODPCaps) }},
	}
	lengths := []uint32{uint32(unsafe.Offsetof(r.OdpCaps)), 200, 208, 216, 224, 232, 248, 252, 256, 280, 288, 296, 300, uverbsabi.SizeofIbUverbsExQueryDeviceResp}
	for _, n := range lengths {
		full.ResponseLength = n
		d := decodeQueryDeviceResp(&full)
		if d.MaxQP != 0xa5a5a5a5 || d.PhysPortCnt != 0xa5 {
			t.Errorf("length %d: base fields not decoded: %+v", n, d)
		}
		for _, e := range exts {
			got := e.get(&d)
			if present := uintptr(n) >= e.end; present && got == 0 {
				t.Errorf("length %d: %s (ends at %d) is zero", n, e.name, e.end)
			} else if !present && got != 0 {
				t.Errorf("length %d: %s (ends at %d) decoded as %#x past the response", n, e.name, e.end, got)
			}
		}
	}
}

func TestABIDeviceSizes(t *testing.T) {
	sizes := []struct {
		name      string
		got, want uintptr
	}{
		{"ib_uverbs_query_device_resp", unsafe.Sizeof(uverbsabi.IbUverbsQueryDeviceResp{}), uverbsabi.SizeofIbUverbsQueryDeviceResp},
		{"ib_uverbs_ex_query_device", unsafe.Sizeof(uverbsabi.IbUverbsExQueryDevice{}), uverbsabi.SizeofIbUverbsExQueryDevice},
		{"ib_uverbs_ex_query_device_resp", unsafe.Sizeof(uverbsabi.IbUverbsExQueryDeviceResp{}), uverbsabi.SizeofIbUverbsExQueryDeviceResp},
		{"ib_uverbs_gid_entry", unsafe.Sizeof(uverbsabi.IbUverbsGidEntry{}), uverbsabi.SizeofIbUverbsGidEntry},
	}
	for _, s := range sizes {
		if s.got != s.want {
			t.Errorf("struct %s: Go size %d, want %d", s.name, s.got, s.want)
		}
	}
}

// The GID calls send what libibverbs 44's _ibv_query_gid_table and
// __ibv_query_gid_ex send (there is no oracle vector for them: the oracle's
// fake kernel refuses the method and libibverbs falls back to sysfs): the
// entry size, port and index as 8-byte inline constants, the flags as a
// 4-byte inline value, the outputs by pointer; every attribute mandatory.
func TestQueryGIDEncoding(t *testing.T) {
	type attr struct {
		id, len uint16
		inline  uint64 // for inline inputs
		isIn    bool
	}
	check := func(t *testing.T, method uint16, hdr uverbsabi.IbUverbsIoctlHdr, got []uverbsabi.IbUverbsAttr, want []attr) {
		t.Helper()
		if hdr.ObjectID != uverbsabi.UVERBS_OBJECT_DEVICE || hdr.MethodID != method || hdr.DriverID != uint32(DriverMLX5) {
			t.Errorf("header %+v, want object DEVICE method %d", hdr, method)
		}
		if int(hdr.NumAttrs) != len(want) || int(hdr.Length) != uverbsabi.SizeofIbUverbsIoctlHdr+uverbsabi.SizeofIbUverbsAttr*len(want) {
			t.Errorf("header %+v, want %d attributes", hdr, len(want))
		}
		if len(got) != len(want) {
			t.Fatalf("%d attributes, want %d", len(got), len(want))
		}
		for i, w := range want {
			g := got[i]
			if g.AttrID != w.id || g.Len != w.len || g.Flags != uverbsabi.UVERBS_ATTR_F_MANDATORY {
				t.Errorf("attr %d: id %d len %d flags %#x, want id %d len %d flags mandatory", i, g.AttrID, g.Len, g.Flags, w.id, w.len)
			}
			if w.isIn && g.Data != w.inline {
				t.Errorf("attr %d: inline %#x, want %#x", i, g.Data, w.inline)
			}
			if !w.isIn && g.Data == 0 {
				t.Errorf("attr %d: output without a buffer", i)
			}
		}
	}
	c := testContext(t)
	t.Run("table", func(t *testing.T) {
		hdr, got := capture(t, func() {
			if _, err := c.queryGIDTable(5); err != nil {
				t.Fatal(err)
			}
		})
		check(t, uverbsabi.UVERBS_METHOD_QUERY_GID_TABLE, hdr, got, []attr{
			{uverbsabi.UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, 8, 32, true},
			{uverbsabi.UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, 4, 0, true},
			{uverbsabi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, 5 * 32, 0, false},
			{uverbsabi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, 8, 0, false},
		})
	})
	t.Run("entry", func(t *testing.T) {
		hdr, got := capture(t, func() {
			if _, err := c.QueryGIDEntry(1, 3); err != nil {
				t.Fatal(err)
			}
		})
		check(t, uverbsabi.UVERBS_METHOD_QUERY_GID_ENTRY, hdr, got, []attr{
			{uverbsabi.UVERBS_ATTR_QUERY_GID_ENTRY_PORT, 8, 1, true},
			{uverbsabi.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, 8, 3, true},
			{uverbsabi.UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 4, 0, true},
			{uverbsabi.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, 32, 0, false},
		})
	})
}

// hookErrno makes every call fail with errno and counts the calls.
func hookErrno(t *testing.T, errno unix.Errno) *int {
	t.Helper()
	n := new(int)
	ioctlHook = func(int, *uverbsabi.IbUverbsIoctlHdr, []uverbsabi.IbUverbsAttr, []unsafe.Pointer) unix.Errno {
		*n++
		return errno
	}
	t.Cleanup(func() { ioctlHook = nil })
	return n
}

func TestDeviceCallErrors(t *testing.T) {
	c := testContext(t)
	calls := hookErrno(t, unix.EINVAL)
	if _, err := c.QueryGIDEntry(0, 0); err == nil || !strings.Contains(err.Error(), "ports are numbered from 1") {
		t.Errorf("QueryGIDEntry(0, 0) = %v, want a port-0 error", err)
	}
	if _, err := c.queryGIDTable(0x10000); err == nil || !strings.Contains(err.Error(), "do not fit") {
		t.Errorf("queryGIDTable(65536) = %v, want a size error", err)
	}
	if *calls != 0 {
		t.Errorf("bad input reached the kernel (%d calls)", *calls)
	}
	if got, err := c.queryGIDTable(0); err != nil || len(got) != 0 || *calls != 0 {
		t.Errorf("queryGIDTable(0) = %v, %v after %d calls; want empty, no call", got, err, *calls)
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"query device", func() error { _, err := c.QueryDevice(); return err }},
		{"query gid entry (port 2, index 7)", func() error { _, err := c.QueryGIDEntry(2, 7); return err }},
		{"query gid table", func() error { _, err := c.queryGIDTable(4); return err }},
	} {
		err := tc.call()
		var ce *CallError
		if !errors.As(err, &ce) || !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: error %v, want a CallError naming the call and wrapping EINVAL", tc.name, err)
		}
	}
	closed := &Context{fd: -1}
	if _, err := closed.QueryDevice(); !errors.Is(err, ErrClosed) {
		t.Errorf("QueryDevice on a closed context: %v, want ErrClosed", err)
	}
}

func TestGIDFormats(t *testing.T) {
	// fe80::5054:ff:fe12:3456 and ::ffff:192.0.2.1, as the kernel stores
	// them in struct ib_uverbs_gid_entry.
	var e uverbsabi.IbUverbsGidEntry
	raw := []byte{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56}
	copy(asBytes(&e), raw)
	e.GidIndex, e.PortNum, e.GidType, e.NetdevIfindex = 1, 1, uverbsabi.IB_UVERBS_GID_TYPE_ROCE_V2, 3
	g := gidEntryFromABI(&e)
	if g.GID.String() != "fe80:0000:0000:0000:5054:00ff:fe12:3456" {
		t.Errorf("String() = %s", g.GID)
	}
	if g.GID.Addr().String() != "fe80::5054:ff:fe12:3456" {
		t.Errorf("Addr() = %s", g.GID.Addr())
	}
	if g.Index != 1 || g.Port != 1 || g.Type != GIDTypeRoCEv2 || g.NetdevIfindex != 3 || g.Type.String() != "RoCE v2" {
		t.Errorf("entry %+v", g)
	}
	v4 := GID{10: 0xff, 11: 0xff, 12: 192, 13: 0, 14: 2, 15: 1}
	if v4.String() != "0000:0000:0000:0000:0000:ffff:c000:0201" || v4.Addr().Unmap().String() != "192.0.2.1" {
		t.Errorf("IPv4-mapped GID: %s / %s", v4, v4.Addr().Unmap())
	}
	if !(GID{}).IsZero() || v4.IsZero() {
		t.Error("IsZero")
	}
	for typ, want := range map[GIDType]string{GIDTypeIB: "IB", GIDTypeRoCEv1: "RoCE v1", GIDTypeRoCEv2: "RoCE v2", 7: "GIDType(7)"} {
		if typ.String() != want {
			t.Errorf("GIDType(%d).String() = %q, want %q", uint32(typ), typ.String(), want)
		}
	}
}

// Any bytes the kernel could write decode without panicking; the base
// fields come straight from the bytes and nothing past response_length is
// taken.
func FuzzDecodeQueryDeviceResp(f *testing.F) {
	var zero uverbsabi.IbUverbsExQueryDeviceResp
	f.Add(make([]byte, unsafe.Sizeof(zero)))
	f.Add(bytes.Repeat([]byte{0xa5}, int(unsafe.Sizeof(zero))))
	f.Add(oracleOutHex(f, "open_device", "INVOKE_WRITE", "0x80000001", "CORE_OUT"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r uverbsabi.IbUverbsExQueryDeviceResp
		copy(asBytes(&r), b)
		raw := asBytes(&r)
		d := decodeQueryDeviceResp(&r)
		if d.NodeGUID != binary.BigEndian.Uint64(raw[8:16]) || d.MaxQP != r.Base.MaxQp || d.PhysPortCnt != r.Base.PhysPortCnt {
			t.Fatalf("base fields differ from the bytes: %+v", d)
		}
		n := uintptr(r.ResponseLength)
		if n < unsafe.Offsetof(r.XrcOdpCaps)+4 && d.XRCODPCaps != 0 {
			t.Fatalf("xrc_odp_caps %#x taken past response_length %d", d.XRCODPCaps, n)
		}
		if n < unsafe.Offsetof(r.OdpCaps)+unsafe.Sizeof(r.OdpCaps) && d.ODPCaps != (ODPCaps{}) {
			t.Fatalf("odp_caps %+v taken past response_length %d", d.ODPCaps, n)
		}
	})
}

// Query what a device can do and list its GIDs. (Not run: it needs an RDMA
// device; the kernel lab runs the same calls in device_lab_test.go.)
func ExampleContext_QueryDevice() {
	id, err := DriverIDOf("rxe0")
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := Open("rxe0", &Options{DriverID: id})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	d, err := c.QueryDevice()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("node_guid %s, %d ports, max_qp %d\n", FormatGUID(d.NodeGUID), d.PhysPortCnt, d.MaxQP)
	gids, err := c.QueryGIDTable()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, g := range gids {
		fmt.Printf("port %d GID[%d] %s %s\n", g.Port, g.Index, g.GID.Addr(), g.Type)
	}
}
