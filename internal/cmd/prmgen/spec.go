package main

// structs is every mlx5_ifc_NAME_bits struct prm declares, in output order.
// Nested structs named here get their own tables; others appear only as
// byte-array fields of the struct that holds them.
var structs = []string{
	// Command header and output header.
	"mbox_in", "mbox_out",
	"general_obj_in_cmd_hdr", "general_obj_out_cmd_hdr",

	// QUERY_HCA_CAP and the capability pages mlx5probe shows.
	"query_hca_cap_in", "query_hca_cap_out",
	"cmd_hca_cap", "cmd_hca_cap_2",
	"odp_cap", "odp_per_transport_service_cap",
	"roce_cap", "atomic_caps",

	// QUERY_ADAPTER, QUERY_ISSI, SET_ISSI.
	"query_adapter_in", "query_adapter_out", "query_adapter_param_block",
	"query_issi_in", "query_issi_out",
	"set_issi_in", "set_issi_out",

	// Memory keys and PSVs.
	"create_mkey_in", "create_mkey_out",
	"query_mkey_in", "query_mkey_out",
	"destroy_mkey_in", "destroy_mkey_out",
	"mkc",
	"create_psv_in", "create_psv_out",
	"destroy_psv_in", "destroy_psv_out",

	// Protection domains and UARs.
	"alloc_pd_in", "alloc_pd_out",
	"dealloc_pd_in", "dealloc_pd_out",
	"alloc_uar_in", "alloc_uar_out",
	"dealloc_uar_in", "dealloc_uar_out",

	// User contexts (DEVX uid).
	"create_uctx_in", "create_uctx_out",
	"destroy_uctx_in", "destroy_uctx_out",
	"uctx",

	// Completion queues.
	"create_cq_in", "create_cq_out",
	"query_cq_in", "query_cq_out",
	"modify_cq_in", "modify_cq_out",
	"destroy_cq_in", "destroy_cq_out",
	"cqc",

	// Queue pairs and their state transitions.
	"create_qp_in", "create_qp_out",
	"query_qp_in", "query_qp_out",
	"destroy_qp_in", "destroy_qp_out",
	"qpc", "ads", "qpc_ext",
	"rst2init_qp_in", "rst2init_qp_out",
	"init2init_qp_in", "init2init_qp_out",
	"init2rtr_qp_in", "init2rtr_qp_out",
	"rtr2rts_qp_in", "rtr2rts_qp_out",
	"rts2rts_qp_in", "rts2rts_qp_out",
	"sqd2rts_qp_in", "sqd2rts_qp_out",
	"sqerr2rts_qp_in", "sqerr2rts_qp_out",
	"qp_2err_in", "qp_2err_out",
	"qp_2rst_in", "qp_2rst_out",

	// Crypto: the crypto capability page, DEKs (encryption key general
	// objects) and crypto logins.
	"crypto_cap",
	"encryption_key_obj", "create_encryption_key_in", "query_encryption_key_obj_out",
	"crypto_login_obj", "create_crypto_login_obj_in", "query_crypto_login_obj_out",
}

// Sources of the fields the lab kernel's mlx5_ifc.h does not name.
const (
	srcRdmaCore    = "rdma-core v44.0 providers/mlx5/mlx5_ifc.h"
	srcLinux       = "Linux after 6.1, include/linux/mlx5/mlx5_ifc.h"
	srcCmdC        = "Linux drivers/net/ethernet/mellanox/mlx5/core/cmd.c"
	srcLinuxDevice = "Linux 6.3 and later, include/linux/mlx5/device.h"
)

// extra is a field that the kernel's mlx5_ifc.h of the lab kernel leaves
// reserved (or that lies past its end), taken from a newer definition of
// the same struct. The generator refuses an extra field that overlaps a
// field the kernel names.
type extra struct {
	Struct, Name string
	Off, Width   uint32
	Type         string // nested struct, "" for plain bits
	Src          string
}

var extras = []extra{
	{"cmd_hca_cap", "repeated_mkey", 0xf7, 1, "", srcRdmaCore},
	{"cmd_hca_cap", "aes_xts_single_block_le_tweak", 0x3f1, 1, "", srcRdmaCore},
	{"cmd_hca_cap", "aes_xts_multi_block_be_tweak", 0x3f2, 1, "", srcRdmaCore},
	{"cmd_hca_cap", "qpc_extension", 0x122, 1, "", srcRdmaCore},
	{"cmd_hca_cap", "sig_crc64_xp10", 0x147, 1, "", srcRdmaCore},
	{"cmd_hca_cap", "sig_crc32c", 0x148, 1, "", srcRdmaCore},
	{"cmd_hca_cap", "sig_block_4048", 0x1f0, 1, "", srcRdmaCore},
	{"cmd_hca_cap", "dc_v2", 0x23b, 1, "", srcRdmaCore},
	{"cmd_hca_cap", "dci_no_rdma_wr_optimized_performance", 0x241, 1, "", srcLinux},
	{"cmd_hca_cap", "crypto", 0x469, 1, "", srcRdmaCore},
	{"cmd_hca_cap", "sigerr_domain_and_sig_type", 0x480, 1, "", srcRdmaCore},
	{"cmd_hca_cap", "log_max_dct_connections", 0x57b, 5, "", srcRdmaCore},
	{"cmd_hca_cap", "log_max_atomic_size_qp", 0x580, 8, "", srcRdmaCore},
	{"cmd_hca_cap", "log_max_atomic_size_dc", 0x598, 8, "", srcRdmaCore},
	{"cmd_hca_cap", "dma_mmo_qp", 0x748, 1, "", srcRdmaCore},
	{"cmd_hca_cap_2", "log_reserved_qpn_granularity", 0x93, 5, "", srcRdmaCore},
	{"atomic_caps", "fetch_add_pci_atomic", 0x280, 16, "", srcRdmaCore},
	{"atomic_caps", "swap_pci_atomic", 0x290, 16, "", srcRdmaCore},
	{"atomic_caps", "compare_swap_pci_atomic", 0x2a0, 16, "", srcRdmaCore},
	{"mkc", "crypto_en", 0x1e3, 2, "", srcRdmaCore},
	{"cqc", "dbr_umem_id", 0x20, 32, "", srcRdmaCore},
	{"create_cq_in", "cq_umem_offset", 0x280, 64, "", srcRdmaCore},
	{"create_cq_in", "cq_umem_id", 0x2c0, 32, "", srcRdmaCore},
	{"qpc", "data_in_order", 0x5a, 1, "", srcRdmaCore},
	{"qpc", "dbr_umem_id", 0x720, 32, "", srcRdmaCore},
	{"create_qp_in", "wq_umem_id", 0x840, 32, "", srcRdmaCore},
	{"init2init_qp_in", "qpc_ext", 0x40, 1, "", srcRdmaCore},
	{"init2init_qp_in", "opt_param_mask_95_32", 0x840, 64, "", srcRdmaCore},
	{"init2init_qp_in", "qpc_data_ext", 0x880, 0x600, "qpc_ext", srcRdmaCore},
	{"rts2rts_qp_in", "qpc_ext", 0x40, 1, "", srcRdmaCore},
	{"rts2rts_qp_in", "opt_param_mask_95_32", 0x840, 64, "", srcRdmaCore},
	{"rts2rts_qp_in", "qpc_data_ext", 0x880, 0x600, "qpc_ext", srcRdmaCore},
	// 6.1 names key_size, key_type (rdma-core's key_purpose), pd and a
	// 32-byte key; rdma-core's key is 128 bytes from the same start, as in
	// later kernels.
	{"encryption_key_obj", "state", 0x40, 8, "", srcRdmaCore},
	{"encryption_key_obj", "has_keytag", 0x58, 1, "", srcRdmaCore},
	{"encryption_key_obj", "opaque", 0x180, 0x40, "", srcRdmaCore},
	{"encryption_key_obj", "key", 0x200, 0x400, "", srcRdmaCore},
}

// extraStructs are structs the kernel's header does not define: the
// generic command input and output headers (defined in the driver's cmd.c,
// so present in mlx5_core's BTF) and rdma-core's QP context extension.
//
// A Partial struct is one that later kernels define with fields of their
// own: the BTF test checks its fields one by one, as extras (named there
// at the same bits, or on bits kept reserved), not as the struct's own.
var extraStructs = extraStructList{
	{"mbox_in", 0x80, []extra{
		{"", "opcode", 0x0, 16, "", srcCmdC},
		{"", "uid", 0x10, 16, "", srcCmdC},
		{"", "op_mod", 0x30, 16, "", srcCmdC},
	}, false},
	{"mbox_out", 0x80, []extra{
		{"", "status", 0x0, 8, "", srcCmdC},
		{"", "syndrome", 0x20, 32, "", srcCmdC},
	}, false},
	{"qpc_ext", 0x600, []extra{
		{"", "mmo", 0x2, 1, "", srcRdmaCore},
		{"", "dci_stream_channel_id", 0x10, 16, "", srcRdmaCore},
		{"", "qos_queue_group_id_requester", 0x20, 32, "", srcRdmaCore},
		{"", "qos_queue_group_id_responder", 0x40, 32, "", srcRdmaCore},
	}, false},
	// rdma-core's crypto_caps; Linux 6.3 and later call it crypto_cap,
	// naming other fields (and log_max_num_deks at the same bits).
	{"crypto_cap", 0x800, []extra{
		{"", "wrapped_crypto_operational", 0x0, 1, "", srcRdmaCore},
		{"", "wrapped_crypto_going_to_commissioning", 0x1, 1, "", srcRdmaCore},
		{"", "wrapped_import_method", 0x18, 8, "", srcRdmaCore},
		{"", "log_max_num_deks", 0x2b, 5, "", srcRdmaCore},
		{"", "log_max_num_import_keks", 0x33, 5, "", srcRdmaCore},
		{"", "log_max_num_creds", 0x3b, 5, "", srcRdmaCore},
		{"", "failed_selftests", 0x40, 16, "", srcRdmaCore},
		{"", "num_nv_import_keks", 0x50, 8, "", srcRdmaCore},
		{"", "num_nv_credentials", 0x58, 8, "", srcRdmaCore},
	}, true},
	{"query_encryption_key_obj_out", 0x880, []extra{
		{"", "hdr", 0x0, 0x80, "general_obj_out_cmd_hdr", srcRdmaCore},
		{"", "obj", 0x80, 0x800, "encryption_key_obj", srcRdmaCore},
	}, false},
	{"crypto_login_obj", 0x800, []extra{
		{"", "modify_field_select", 0x0, 0x40, "", srcRdmaCore},
		{"", "state", 0x84, 4, "", srcRdmaCore},
		{"", "credential_pointer", 0x88, 0x18, "", srcRdmaCore},
		{"", "session_import_kek_ptr", 0xa8, 0x18, "", srcRdmaCore},
		{"", "credential", 0x200, 0x180, "", srcRdmaCore},
	}, false},
	{"create_crypto_login_obj_in", 0x880, []extra{
		{"", "hdr", 0x0, 0x80, "general_obj_in_cmd_hdr", srcRdmaCore},
		{"", "login_obj", 0x80, 0x800, "crypto_login_obj", srcRdmaCore},
	}, false},
	{"query_crypto_login_obj_out", 0x880, []extra{
		{"", "hdr", 0x0, 0x80, "general_obj_out_cmd_hdr", srcRdmaCore},
		{"", "obj", 0x80, 0x800, "crypto_login_obj", srcRdmaCore},
	}, false},
}

// extraStructList is the type of extraStructs.
type extraStructList = []struct {
	Name    string
	Bits    uint32
	Fields  []extra
	Partial bool
}

// extraConsts are constants the lab kernel's headers do not define.
var extraConsts = []struct {
	Name  string
	Value uint64
	Src   string
}{
	{"MLX5_CAP_CRYPTO", 0x1a, srcLinuxDevice},
	{"MLX5_OBJ_TYPE_CRYPTO_LOGIN", 0x1f, srcRdmaCore},
	{"MLX5_CRYPTO_CAPS_WRAPPED_IMPORT_METHOD_AES", 0x4, srcRdmaCore},
	{"MLX5_CRYPTO_LOGIN_OBJ_STATE_VALID", 0x0, srcRdmaCore},
	{"MLX5_CRYPTO_LOGIN_OBJ_STATE_INVALID", 0x1, srcRdmaCore},
	{"MLX5_ENCRYPTION_KEY_OBJ_STATE_READY", 0x0, srcRdmaCore},
	{"MLX5_ENCRYPTION_KEY_OBJ_STATE_ERROR", 0x1, srcRdmaCore},
	{"MLX5_ENCRYPTION_KEY_OBJ_KEY_PURPOSE_AES_XTS", 0x3, srcRdmaCore},
}

// enums are the constant groups prm mirrors: the C enum's first enumerator
// (or its tag) in the header that defines it, and the prefix every Go
// constant keeps.
var enums = []struct {
	Header string // "ifc" or "device"
	Enum   string // "enum TAG" or the first enumerator of an anonymous enum
	Prefix string
}{
	{"ifc", "MLX5_CMD_OP_QUERY_HCA_CAP", "MLX5_CMD_OP_"},
	{"device", "MLX5_CMD_STAT_OK", "MLX5_CMD_STAT_"},
	{"device", "enum mlx5_cap_type", "MLX5_CAP_"},
	{"device", "enum mlx5_cap_mode", "HCA_CAP_OPMOD_"},
	{"ifc", "MLX5_GENERAL_OBJECT_TYPES_ENCRYPTION_KEY", "MLX5_GENERAL_OBJECT_TYPES_"},
	{"ifc", "MLX5_GENERAL_OBJECT_TYPE_ENCRYPTION_KEY_KEY_SIZE_128", "MLX5_GENERAL_OBJECT_TYPE_ENCRYPTION_KEY_KEY_SIZE_"},
}
