package main

import (
	"fmt"
	"io"
	"strings"
)

// The text output follows the shape of `ibv_devinfo -v`: "key:" then tabs
// to the value column (column 40 for the device, 48 for ports, with 8-column
// tabs), flag names one per line at column 40, a port section per port
// with its GIDs, a blank line after each port.

const (
	deviceColumn = 40
	portColumn   = 48
	tabWidth     = 8
)

// textWriter writes lines and keeps the first write error.
type textWriter struct {
	w   io.Writer
	err error
}

func (t *textWriter) printf(format string, args ...any) {
	if t.err == nil {
		_, t.err = fmt.Fprintf(t.w, format, args...)
	}
}

// kv writes "key:" indented by indent tabs, then tabs up to column, then
// the value (at least one tab, as ibv_devinfo).
func (t *textWriter) kv(indent, column int, key string, format string, args ...any) {
	pos := indent*tabWidth + len(key) + 1
	tabs := 0
	for pos < column || tabs == 0 {
		pos = (pos/tabWidth + 1) * tabWidth
		tabs++
	}
	t.printf("%s%s:%s%s\n", strings.Repeat("\t", indent), key, strings.Repeat("\t", tabs), fmt.Sprintf(format, args...))
}

// flagLines writes one line per set flag at column 40, and the unknown
// bits, as ibv_devinfo lists them.
func (t *textWriter) flagLines(f flags, none string) {
	if f.Value == 0 && none != "" {
		t.printf("\t\t\t\t\t%s\n", none)
		return
	}
	for _, n := range f.Names {
		t.printf("\t\t\t\t\t%s\n", n)
	}
	if f.Unknown != 0 {
		t.printf("\t\t\t\t\tUnknown flags: 0x%X\n", f.Unknown)
	}
}

func writeText(w io.Writer, rep report) error {
	t := &textWriter{w: w}
	for _, d := range rep.Devices {
		writeDevice(t, &d)
	}
	return t.err
}

func writeDevice(t *textWriter, d *deviceReport) {
	dev := func(key, format string, args ...any) { t.kv(1, deviceColumn, key, format, args...) }
	t.printf("hca_id:\t%s\n", d.HCAID)
	if d.UverbsDevice != "" {
		dev("uverbs_device", "%s", d.UverbsDevice)
	}
	if d.Driver != nil {
		dev("driver", "%s (%d)", d.Driver.Name, d.Driver.Value)
	}
	if d.KernelDriver != "" {
		dev("kernel_driver", "%s", d.KernelDriver)
	}
	dev("transport", "%s (%d)", d.Transport.Name, d.Transport.Value)
	for _, e := range d.Errors {
		dev("error", "%s", e)
	}
	if a := d.DeviceAttrs; a != nil {
		writeDeviceAttrs(t, a)
	}
	for i := range d.Ports {
		writePort(t, &d.Ports[i], d.Transport.Value == 0)
	}
	writeHCACaps(t, d.HCACaps)
	writeSigCaps(t, d.SigCaps)
	writeCryptoCaps(t, d.CryptoCaps)
	writeDCIStreams(t, d.DCIStreams)
	if len(d.HCACaps) > 0 || d.SigCaps != nil || d.CryptoCaps != nil || d.DCIStreams != nil {
		t.printf("\n")
	}
	if len(d.Ports) == 0 {
		t.printf("\n")
	}
}

func writeDeviceAttrs(t *textWriter, a *DeviceAttrs) {
	dev := func(key, format string, args ...any) { t.kv(1, deviceColumn, key, format, args...) }
	sub := func(key, format string, args ...any) { t.kv(2, deviceColumn, key, format, args...) }
	if a.FWVer != "" {
		dev("fw_ver", "%s", a.FWVer)
	}
	dev("node_guid", "%s", a.NodeGUID)
	dev("sys_image_guid", "%s", a.SysImageGUID)
	dev("vendor_id", "0x%04x", a.VendorID)
	dev("vendor_part_id", "%d", a.VendorPartID)
	dev("hw_ver", "0x%X", a.HWVer)
	if a.BoardID != "" {
		dev("board_id", "%s", a.BoardID)
	}
	dev("phys_port_cnt", "%d", a.PhysPortCnt)
	dev("max_mr_size", "0x%x", a.MaxMRSize)
	dev("page_size_cap", "0x%x", a.PageSizeCap)
	dev("max_qp", "%d", a.MaxQP)
	dev("max_qp_wr", "%d", a.MaxQPWR)
	dev("device_cap_flags", "0x%08x", a.DeviceCapFlags.Value)
	t.flagLines(a.DeviceCapFlags, "")
	for _, kv := range []struct {
		key string
		v   uint32
	}{
		{"max_sge", a.MaxSGE}, {"max_sge_rd", a.MaxSGERd}, {"max_cq", a.MaxCQ}, {"max_cqe", a.MaxCQE},
		{"max_mr", a.MaxMR}, {"max_pd", a.MaxPD}, {"max_qp_rd_atom", a.MaxQPRdAtom},
		{"max_ee_rd_atom", a.MaxEERdAtom}, {"max_res_rd_atom", a.MaxResRdAtom},
		{"max_qp_init_rd_atom", a.MaxQPInitRdAtom}, {"max_ee_init_rd_atom", a.MaxEEInitRdAtom},
	} {
		dev(kv.key, "%d", kv.v)
	}
	dev("atomic_cap", "%s (%d)", a.AtomicCap.Name, a.AtomicCap.Value)
	for _, kv := range []struct {
		key string
		v   uint32
	}{
		{"max_ee", a.MaxEE}, {"max_rdd", a.MaxRDD}, {"max_mw", a.MaxMW},
		{"max_raw_ipv6_qp", a.MaxRawIPv6QP}, {"max_raw_ethy_qp", a.MaxRawEthyQP},
		{"max_mcast_grp", a.MaxMcastGrp}, {"max_mcast_qp_attach", a.MaxMcastQPAttach},
		{"max_total_mcast_qp_attach", a.MaxTotalMcastQPAttach}, {"max_ah", a.MaxAH}, {"max_fmr", a.MaxFMR},
	} {
		dev(kv.key, "%d", kv.v)
	}
	if a.MaxFMR != 0 {
		dev("max_map_per_fmr", "%d", a.MaxMapPerFMR)
	}
	dev("max_srq", "%d", a.MaxSRQ)
	if a.MaxSRQ != 0 {
		dev("max_srq_wr", "%d", a.MaxSRQWR)
		dev("max_srq_sge", "%d", a.MaxSRQSGE)
	}
	dev("max_pkeys", "%d", a.MaxPKeys)
	dev("local_ca_ack_delay", "%d", a.LocalCAAckDelay)

	t.printf("\tgeneral_odp_caps:\n")
	t.flagLines(a.GeneralODPCaps, "")
	for _, odp := range []struct {
		key string
		f   flags
	}{{"rc_odp_caps", a.RCODPCaps}, {"uc_odp_caps", a.UCODPCaps}, {"ud_odp_caps", a.UDODPCaps}, {"xrc_odp_caps", a.XRCODPCaps}} {
		t.printf("\t%s:\n", odp.key)
		t.flagLines(odp.f, "NO SUPPORT")
	}
	if a.CompletionTimestampMask != 0 {
		dev("completion_timestamp_mask", "0x%016x", a.CompletionTimestampMask)
	} else {
		t.printf("\tcompletion_timestamp_mask not supported\n")
	}
	if a.HCACoreClock != 0 {
		dev("hca_core_clock", "%dkHZ", a.HCACoreClock)
	} else {
		t.printf("\tcore clock not supported\n")
	}
	if a.RawPacketCaps.Value != 0 {
		t.printf("\traw packet caps:\n")
		t.flagLines(a.RawPacketCaps, "")
	}
	dev("device_cap_flags_ex", "0x%X", a.DeviceCapFlagsEx.Value)
	t.flagLines(flags{Names: a.DeviceCapFlagsEx.Names, Unknown: a.DeviceCapFlagsEx.Unknown}, "")

	t.printf("\ttso_caps:\n")
	sub("max_tso", "%d", a.TSOCaps.MaxTSO)
	if a.TSOCaps.MaxTSO != 0 {
		t.printf("\t\tsupported_qp:\n")
		t.flagLines(a.TSOCaps.SupportedQP, "")
	}
	t.printf("\trss_caps:\n")
	sub("max_rwq_indirection_tables", "%d", a.RSSCaps.MaxRWQIndirectionTables)
	sub("max_rwq_indirection_table_size", "%d", a.RSSCaps.MaxRWQIndirectionTableSize)
	sub("rx_hash_function", "0x%x", a.RSSCaps.RxHashFunction)
	sub("rx_hash_fields_mask", "0x%X", a.RSSCaps.RxHashFieldsMask)
	if a.RSSCaps.SupportedQP.Value != 0 {
		t.printf("\t\tsupported_qp:\n")
		t.flagLines(a.RSSCaps.SupportedQP, "")
	}
	dev("max_wq_type_rq", "%d", a.MaxWQTypeRQ)
	t.printf("\tpacket_pacing_caps:\n")
	sub("qp_rate_limit_min", "%dkbps", a.PacketPacingCaps.QPRateLimitMin)
	sub("qp_rate_limit_max", "%dkbps", a.PacketPacingCaps.QPRateLimitMax)
	if a.PacketPacingCaps.QPRateLimitMax != 0 {
		t.printf("\t\tsupported_qp:\n")
		t.flagLines(a.PacketPacingCaps.SupportedQP, "")
	}
	if tm := a.TMCaps; tm.MaxNumTags != 0 {
		dev("max_rndv_hdr_size", "%d", tm.MaxRndvHdrSize)
		dev("max_num_tags", "%d", tm.MaxNumTags)
		dev("max_ops", "%d", tm.MaxOps)
		dev("max_sge", "%d", tm.MaxSGE)
		t.printf("\tflags:\n")
		t.flagLines(tm.Flags, "")
	} else {
		t.printf("\ttag matching not supported\n")
	}
	if cq := a.CQModerationCaps; cq.MaxCQCount != 0 && cq.MaxCQPeriod != 0 {
		t.printf("\tcq moderation caps:\n")
		sub("max_cq_count", "%d", cq.MaxCQCount)
		sub("max_cq_period", "%d us", cq.MaxCQPeriod)
	}
	if a.MaxDMSize != 0 {
		dev("maximum available device memory", "%dBytes", a.MaxDMSize)
	}
	dev("num_comp_vectors", "%d", a.NumCompVectors)
}

func writePort(t *textWriter, p *portReport, ibTransport bool) {
	port := func(key, format string, args ...any) { t.kv(3, portColumn, key, format, args...) }
	t.printf("\t\tport:\t%d\n", p.Port)
	port("state", "%s (%d)", p.State.Name, p.State.Value)
	port("max_mtu", "%s (%d)", p.MaxMTU.Name, p.MaxMTU.Value)
	port("active_mtu", "%s (%d)", p.ActiveMTU.Name, p.ActiveMTU.Value)
	port("sm_lid", "%d", p.SMLID)
	port("port_lid", "%d", p.PortLID)
	port("port_lmc", "0x%02x", p.PortLMC)
	port("link_layer", "%s", p.LinkLayer)
	port("max_msg_sz", "0x%x", p.MaxMsgSz)
	port("port_cap_flags", "0x%08x", p.PortCapFlags)
	port("port_cap_flags2", "0x%04x", p.PortCapFlags2)
	port("max_vl_num", "%s (%d)", p.MaxVLNum.Name, p.MaxVLNum.Value)
	port("bad_pkey_cntr", "0x%x", p.BadPKeyCntr)
	port("qkey_viol_cntr", "0x%x", p.QKeyViolCntr)
	port("sm_sl", "%d", p.SMSL)
	port("pkey_tbl_len", "%d", p.PKeyTblLen)
	port("gid_tbl_len", "%d", p.GIDTblLen)
	port("subnet_timeout", "%d", p.SubnetTimeout)
	port("init_type_reply", "%d", p.InitTypeReply)
	port("active_width", "%sX (%d)", p.ActiveWidth.Name, p.ActiveWidth.Value)
	port("active_speed", "%s (%d)", p.ActiveSpeed.Name, p.ActiveSpeed.Value)
	if ibTransport {
		port("phys_state", "%s (%d)", p.PhysState.Name, p.PhysState.Value)
	}
	for _, g := range p.GIDs {
		label := ""
		if p.LinkLayer == "Ethernet" {
			label = ", " + gidTypeLabel(g.Type)
		}
		port(fmt.Sprintf("GID[%3d]", g.Index), "%s%s", g.GID, label)
	}
	t.printf("\n")
}

// writeHCACaps prints the mlx5 capability groups after the ports.
func writeHCACaps(t *textWriter, groups []capGroup) {
	if len(groups) == 0 {
		return
	}
	t.printf("\thca_caps (QUERY_HCA_CAP, general device, current):\n")
	for _, g := range groups {
		t.printf("\t\t%s:\n", g.Group)
		for _, c := range g.Caps {
			t.kv(3, portColumn, c.Name, "%d", c.Value)
		}
	}
}

// writeSigCaps prints mlx5dv_query_device's sig_caps after the HCA caps:
// each field's value, then its bits by mlx5dv.h's names, as ibv_devinfo
// lists flags; NO SUPPORT for a zero field.
func writeSigCaps(t *textWriter, s *sigCapsReport) {
	if s == nil {
		return
	}
	t.printf("\tsig_caps (mlx5dv_query_device):\n")
	for _, f := range []struct {
		key string
		f   flags
	}{{"block_size", s.BlockSize}, {"block_prot", s.BlockProt}, {"t10dif_bg", s.T10DIFBG}, {"crc_type", s.CRCType}} {
		t.kv(2, deviceColumn, f.key, "0x%x", f.f.Value)
		t.flagLines(f.f, "NO SUPPORT")
	}
}

// writeCryptoCaps prints mlx5dv_query_device's crypto_caps after the
// signature caps, as writeSigCaps prints those.
func writeCryptoCaps(t *textWriter, c *cryptoCapsReport) {
	if c == nil {
		return
	}
	t.printf("\tcrypto_caps (mlx5dv_query_device):\n")
	t.kv(2, deviceColumn, "failed_selftests", "0x%x", c.FailedSelfTests)
	t.kv(2, deviceColumn, "crypto_engines", "0x%x", c.CryptoEngines.Value)
	t.flagLines(c.CryptoEngines, "NO SUPPORT")
	t.kv(2, deviceColumn, "wrapped_import_method", "0x%x", c.WrappedImportMethod.Value)
	t.flagLines(c.WrappedImportMethod, "NO SUPPORT")
	t.kv(2, deviceColumn, "log_max_num_deks", "%d", c.LogMaxNumDEKs)
	t.kv(2, deviceColumn, "flags", "0x%x", c.Flags.Value)
	t.flagLines(c.Flags, "NO SUPPORT")
}

// writeDCIStreams prints mlx5dv_query_device's dci_streams after the
// crypto caps.
func writeDCIStreams(t *textWriter, d *dciStreamsReport) {
	if d == nil {
		return
	}
	t.printf("\tdci_streams (mlx5dv_query_device):\n")
	t.kv(2, deviceColumn, "max_log_num_concurent", "%d", d.MaxLogNumConcurent)
	t.kv(2, deviceColumn, "max_log_num_errored", "%d", d.MaxLogNumErrored)
}
