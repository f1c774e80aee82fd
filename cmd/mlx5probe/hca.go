package main

import (
	"fmt"

	"github.com/mlx5go/mlx5go/internal/mlx5hook"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
	"github.com/mlx5go/mlx5go/uverbs"
)

// capGroups are the general HCA capabilities (cmd_hca_cap, current values)
// that users of signature offloads, UMR and DC look for, grouped; the names
// are the PRM's.
var capGroups = []struct {
	Name   string
	Fields []string
}{
	{"general", []string{"port_type", "num_ports", "cqe_version", "rc", "ud", "xrc", "dct", "roce", "atomic",
		"log_max_pd", "log_max_uctx", "log_max_xrcd"}},
	{"signature and UMR", []string{"sho", "sig_block_4048", "sig_crc32c", "sig_crc64_xp10", "sigerr_cqe",
		"sigerr_domain_and_sig_type", "drain_sigerr", "qpc_extension", "log_max_bsf_list_size",
		"log_max_klm_list_size", "repeated_mkey", "umr_extended_translation_offset", "umr_indirect_mkey_disabled",
		"umr_modify_entity_size_disabled", "umr_modify_atomic_disabled", "umr_fence", "umr_ptr_rlky"}},
	{"DC and DCI streams", []string{"dc_v2", "log_max_dci_stream_channels", "log_max_dci_errored_streams",
		"dci_no_rdma_wr_optimized_performance", "log_max_ra_req_dc", "log_max_ra_res_dc", "max_wqe_sz_sq_dc",
		"log_max_atomic_size_dc", "dc_req_scat_data_cqe", "lag_dct", "log_max_dct_connections"}},
	{"crypto", []string{"crypto", "aes_xts_single_block_le_tweak", "aes_xts_multi_block_be_tweak"}},
	{"limits", []string{"log_max_qp", "log_max_qp_sz", "log_max_cq", "log_max_cq_sz", "log_max_srq", "log_max_srq_sz",
		"log_max_mkey", "log_max_mrw_sz", "log_max_msg", "log_max_eq", "log_max_ra_req_qp", "log_max_ra_res_qp",
		"max_wqe_sz_sq", "max_wqe_sz_rq", "max_sgl_for_optimized_performance", "log_max_atomic_size_qp"}},
}

// capValue is one capability.
type capValue struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// capGroup is one group of capabilities as reported.
type capGroup struct {
	Group string     `json:"group"`
	Caps  []capValue `json:"caps"`
}

// hcaSection reads the groups' fields from cmd_hca_cap's bytes.
func hcaSection(caps []byte) []capGroup {
	var out []capGroup
	l := prm.CmdHcaCap.Layout()
	for _, g := range capGroups {
		cg := capGroup{Group: g.Name}
		for _, name := range g.Fields {
			if f, ok := l.Field(name); ok {
				cg.Caps = append(cg.Caps, capValue{name, f.Get(caps)})
			}
		}
		out = append(out, cg)
	}
	return out
}

// sigCapsReport is struct mlx5dv_sig_caps, mlx5dv_query_device's sig_caps
// (Context.SigCaps), each field a flag word with mlx5dv.h's bit names.
type sigCapsReport struct {
	BlockSize flags `json:"block_size"`
	BlockProt flags `json:"block_prot"`
	T10DIFBG  flags `json:"t10dif_bg"`
	CRCType   flags `json:"crc_type"`
}

func sigCapsSection(c sig.Caps) *sigCapsReport {
	return &sigCapsReport{
		BlockSize: decodeFlags(c.BlockSize, sigBlockSizeCaps),
		BlockProt: decodeFlags(uint64(c.BlockProt), sigProtCaps),
		T10DIFBG:  decodeFlags(uint64(c.T10DIFBG), sigT10DIFBGCaps),
		CRCType:   decodeFlags(uint64(c.CRCType), sigCRCTypeCaps),
	}
}

// cryptoCapsReport is struct mlx5dv_crypto_caps, mlx5dv_query_device's
// crypto_caps (Context.CryptoCaps), the flag words with mlx5dv.h's bit
// names.
type cryptoCapsReport struct {
	FailedSelfTests     uint16 `json:"failed_selftests"`
	CryptoEngines       flags  `json:"crypto_engines"`
	WrappedImportMethod flags  `json:"wrapped_import_method"`
	LogMaxNumDEKs       uint8  `json:"log_max_num_deks"`
	Flags               flags  `json:"flags"`
}

func cryptoCapsSection(c mlx5.CryptoCaps) *cryptoCapsReport {
	return &cryptoCapsReport{
		FailedSelfTests:     c.FailedSelfTests,
		CryptoEngines:       decodeFlags(uint64(c.Engines), cryptoEngineCaps),
		WrappedImportMethod: decodeFlags(uint64(c.WrappedImport), cryptoWrappedImportCaps),
		LogMaxNumDEKs:       c.LogMaxDEKs,
		Flags:               decodeFlags(uint64(c.Flags), cryptoFlagCaps),
	}
}

// dciStreamsReport is struct mlx5dv_dci_streams_caps, mlx5dv_query_device's
// dci_streams (Context.Caps.MaxDCIStreams, from the kernel's
// QUERY_DEVICE_EX): the most concurrent and errored stream channels a DCI
// may ask for, log2; 0 and 0 on a device without DCI streams.
type dciStreamsReport struct {
	MaxLogNumConcurent int `json:"max_log_num_concurent"`
	MaxLogNumErrored   int `json:"max_log_num_errored"`
}

// probeHCA adds an mlx5 context's DCI stream caps, general capabilities
// and the signature and crypto caps the driver derives from them to r;
// it records what fails.
func probeHCA(r *deviceReport, c *mlx5.Context) {
	r.DCIStreams = &dciStreamsReport{c.Caps().MaxDCIStreams.LogConcurrent, c.Caps().MaxDCIStreams.LogErrored}
	caps, err := c.QueryHCACap(prm.MLX5_CAP_GENERAL, true)
	if err != nil {
		r.Errors = append(r.Errors, fmt.Sprintf("hca caps: %v", err))
		return
	}
	r.HCACaps = hcaSection(caps)
	sc, err := c.SigCaps()
	if err != nil {
		r.Errors = append(r.Errors, fmt.Sprintf("sig caps: %v", err))
		return
	}
	r.SigCaps = sigCapsSection(sc)
	cc, err := c.CryptoCaps()
	if err != nil {
		r.Errors = append(r.Errors, fmt.Sprintf("crypto caps: %v", err))
		return
	}
	r.CryptoCaps = cryptoCapsSection(cc)
}

// probeModel reports the software ConnectX of a profile: its HCA
// capabilities, read through the driver as from a real device.
func probeModel(profile string) (deviceReport, error) {
	dev, err := model.New(profile)
	if err != nil {
		return deviceReport{}, err
	}
	c := mlx5hook.NewContext(dev).(*mlx5.Context)
	defer c.Close()
	drv := lookup(driverNames, uint64(uverbs.DriverMLX5), "unknown")
	r := deviceReport{HCAID: "model:" + profile, Driver: &drv, Transport: transportOfNodeType(1), Ports: []portReport{}}
	probeHCA(&r, c)
	return r, nil
}
