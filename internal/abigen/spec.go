package abigen

// Package is a Go package of generated ABI mirrors: its directory, the
// kernel modules whose BTF holds its types (searched in this order), and
// one generated file per header.
type Package struct {
	Dir     string   // relative to the repository root, e.g. internal/uverbsabi
	Name    string   // Go package name
	Modules []string // BTF searched in this order ("vmlinux" for the kernel itself)
	Files   []File
}

// File is one generated file: the mirrors of one C header.
type File struct {
	Name   string // file name in Package.Dir, e.g. ib_user_verbs.go
	Header string // the header, e.g. <rdma/ib_user_verbs.h>
	// Internal marks a kernel-internal header (not uapi): its layout is
	// what the kernel copies to user space as it is (an EQE).
	Internal bool
	Enums    []Enum
	Structs  []Struct
}

// Enum is a named C enum, generated as untyped constants with the
// kernel's names.
type Enum struct {
	Name string // the C enum's tag
	// Only, if set, lists the enumerators generated: for a kernel-internal
	// enum mlx5go needs a few values of (its other enumerators may change
	// between kernels without breaking mlx5go).
	Only []string
	Doc  string // what it is for, appended to "enum NAME."
}

// Struct is a named C struct, generated as a Go struct with
// structs.HostLayout, fields in C order and the C layout (sizes, offsets
// and padding are checked against BTF when it is generated).
type Struct struct {
	Name string // the C struct's tag
	// Kernel is the suite whose layout is generated ("" for Kernels[0],
	// the oldest): a struct whose newer layout mlx5go reads (a field the
	// oldest kernel keeps reserved) comes from the newer kernel, and lists
	// that field in Newer.
	Kernel string
	Doc    string // what it is for, appended to "GoName is struct NAME."
	// Extensible marks a response the kernel copies only as far as the
	// caller's buffer reaches (btfcheck.Layout.Extensible): a newer
	// kernel's may be larger.
	Extensible bool
	// Newer lists members older kernels do not have, whose bytes they
	// keep reserved (btfcheck.Field.Newer).
	Newer []string
}

// Kernels are the Debian suites whose BTF the generator reads, the oldest
// (the default for every struct) first.
var Kernels = []string{"bookworm", "trixie"}

// Packages are the generated packages.
var Packages = []Package{uverbsABI, mlx5ABI}

var uverbsABI = Package{
	Dir:     "internal/uverbsabi",
	Name:    "uverbsabi",
	Modules: []string{"ib_uverbs", "ib_core", "vmlinux"},
	Files: []File{
		{
			Name:   "rdma_user_ioctl_cmds.go",
			Header: "<rdma/rdma_user_ioctl_cmds.h>",
			Structs: []Struct{
				{Name: "ib_uverbs_attr", Doc: "AttrData is attr_data, whose enum_data.elem_id is its low byte on little-endian machines (amd64, arm64)."},
				{Name: "ib_uverbs_ioctl_hdr", Doc: "The attributes follow it in the same buffer."},
			},
		},
		{
			Name:   "ib_user_ioctl_cmds.go",
			Header: "<rdma/ib_user_ioctl_cmds.h>",
			Enums: []Enum{
				{Name: "uverbs_default_objects"},
				{Name: "uverbs_methods_device"},
				{Name: "uverbs_attrs_invoke_write_cmd_attr_ids"},
				{Name: "uverbs_attrs_get_context_attr_ids"},
				{Name: "uverbs_attrs_query_port_cmd_attr_ids"},
				{Name: "uverbs_attrs_query_gid_table_cmd_attr_ids"},
				{Name: "uverbs_attrs_query_gid_entry_cmd_attr_ids"},
				{Name: "uverbs_methods_pd"},
				{Name: "uverbs_attrs_pd_destroy_ids"},
				{Name: "uverbs_methods_mr"},
				{Name: "uverbs_attrs_mr_destroy_ids"},
				{Name: "uverbs_attrs_reg_dmabuf_mr_cmd_attr_ids"},
				{Name: "uverbs_methods_cq"},
				{Name: "uverbs_attrs_create_cq_cmd_attr_ids"},
				{Name: "uverbs_attrs_destroy_cq_cmd_attr_ids"},
				{Name: "uverbs_methods_qp"},
				{Name: "uverbs_attrs_create_qp_cmd_attr_ids"},
				{Name: "uverbs_attrs_destroy_qp_cmd_attr_ids"},
				{Name: "uverbs_methods_srq"},
				{Name: "uverbs_attrs_create_srq_cmd_attr_ids"},
				{Name: "uverbs_attrs_destroy_srq_cmd_attr_ids"},
				{Name: "uverbs_methods_ah"},
				{Name: "uverbs_attrs_ah_destroy_ids"},
				{Name: "uverbs_method_async_event"},
				{Name: "uverbs_attrs_async_event_create"},
			},
		},
		{
			Name:   "ib_user_ioctl_verbs.go",
			Header: "<rdma/ib_user_ioctl_verbs.h>",
			Enums: []Enum{
				{Name: "rdma_driver_id", Doc: "The driver a call's header names (ib_uverbs_ioctl_hdr.driver_id)."},
				{Name: "ib_uverbs_access_flags"},
				{Name: "ib_uverbs_srq_type"},
				{Name: "ib_uverbs_qp_type"},
				{Name: "ib_uverbs_qp_create_flags"},
				{Name: "ib_uverbs_gid_type"},
			},
			Structs: []Struct{
				{Name: "ib_uverbs_qp_cap"},
				{
					Name: "ib_uverbs_query_port_resp_ex", Kernel: "trixie", Newer: []string{"active_speed_ex"},
					Doc: "active_speed_ex is newer than 6.1, which keeps its bytes reserved and zero: the port's enum ib_port_speed, which XDR (256) no longer fits into the legacy u8 active_speed.",
				},
				{Name: "ib_uverbs_gid_entry", Doc: "Gid holds the 16 raw GID bytes in network order (the C struct declares them as two __aligned_u64)."},
			},
		},
		{
			Name:   "ib_user_verbs.go",
			Header: "<rdma/ib_user_verbs.h>",
			Enums: []Enum{
				{Name: "ib_uverbs_write_cmds", Doc: "The legacy write() commands, also sent through UVERBS_METHOD_INVOKE_WRITE."},
				{Name: "ib_uverbs_device_cap_flags", Doc: "The low 32 bits are ib_uverbs_query_device_resp.device_cap_flags; all 64 are ib_uverbs_ex_query_device_resp.device_cap_flags_ex."},
				{Name: "ib_uverbs_raw_packet_caps"},
			},
			Structs: []Struct{
				{Name: "ib_uverbs_cmd_hdr", Doc: "The header of a legacy write() command; words are 4 bytes."},
				{Name: "ib_uverbs_ex_cmd_hdr", Doc: "The second header of an extended write() command; words are 8 bytes."},
				{Name: "ib_uverbs_get_context", Doc: "The legacy write() form of GET_CONTEXT."},
				{Name: "ib_uverbs_get_context_resp"},
				{Name: "ib_uverbs_query_device_resp"},
				{Name: "ib_uverbs_ex_query_device", Doc: "The extended query's request."},
				{Name: "ib_uverbs_odp_caps"},
				{Name: "ib_uverbs_rss_caps"},
				{Name: "ib_uverbs_tm_caps"},
				{Name: "ib_uverbs_cq_moderation_caps"},
				{Name: "ib_uverbs_ex_query_device_resp", Doc: "The kernel sets ResponseLength to the bytes it wrote: its own struct's size, capped by the buffer it was given."},
				{Name: "ib_uverbs_query_port", Doc: "The legacy write() form of QUERY_PORT."},
				{Name: "ib_uverbs_query_port_resp"},
				{Name: "ib_uverbs_alloc_pd", Doc: "Response is the legacy write() response pointer; the ioctl path returns the response through UVERBS_ATTR_CORE_OUT instead."},
				{Name: "ib_uverbs_alloc_pd_resp"},
				{Name: "ib_uverbs_dealloc_pd"},
				{Name: "ib_uverbs_reg_mr"},
				{Name: "ib_uverbs_reg_mr_resp"},
				{Name: "ib_uverbs_rereg_mr", Doc: "The legacy write() command that changes an MR's translation, PD or access (flags IB_MR_REREG_*)."},
				{Name: "ib_uverbs_rereg_mr_resp"},
				{Name: "ib_uverbs_dereg_mr"},
				{Name: "ib_uverbs_create_comp_channel"},
				{Name: "ib_uverbs_create_comp_channel_resp"},
				{Name: "ib_uverbs_create_cq"},
				{Name: "ib_uverbs_create_cq_resp"},
				{Name: "ib_uverbs_resize_cq", Doc: "The legacy write() command that resizes a CQ; the provider's data follows it."},
				{Name: "ib_uverbs_resize_cq_resp"},
				{Name: "ib_uverbs_cq_moderation"},
				{Name: "ib_uverbs_ex_modify_cq", Doc: "The extended write() command that sets a CQ's moderation."},
				{Name: "ib_uverbs_req_notify_cq"},
				{Name: "ib_uverbs_destroy_cq"},
				{Name: "ib_uverbs_destroy_cq_resp"},
				{Name: "ib_uverbs_create_qp"},
				{Name: "ib_uverbs_create_qp_resp"},
				{Name: "ib_uverbs_qp_dest"},
				{Name: "ib_uverbs_query_qp"},
				{Name: "ib_uverbs_query_qp_resp"},
				{Name: "ib_uverbs_modify_qp"},
				{Name: "ib_uverbs_ex_modify_qp"},
				{Name: "ib_uverbs_ex_modify_qp_resp"},
				{Name: "ib_uverbs_destroy_qp"},
				{Name: "ib_uverbs_destroy_qp_resp"},
				{Name: "ib_uverbs_global_route"},
				{Name: "ib_uverbs_ah_attr"},
				{Name: "ib_uverbs_create_ah"},
				{Name: "ib_uverbs_create_ah_resp"},
				{Name: "ib_uverbs_destroy_ah"},
				{Name: "ib_uverbs_create_srq"},
				{Name: "ib_uverbs_create_srq_resp"},
				{Name: "ib_uverbs_modify_srq"},
				{Name: "ib_uverbs_destroy_srq"},
				{Name: "ib_uverbs_destroy_srq_resp"},
				{Name: "ib_uverbs_async_event_desc", Doc: "What a read of the async event file returns."},
				{Name: "ib_uverbs_comp_event_desc", Doc: "What a read of a completion channel returns."},
			},
		},
		{
			Name:   "rdma_netlink.go",
			Header: "<rdma/rdma_netlink.h>",
			Enums: []Enum{
				{Name: "rdma_nldev_command"},
				{Name: "rdma_nldev_attr"},
			},
		},
		{
			Name:     "ib_verbs.go",
			Header:   "<rdma/ib_verbs.h>",
			Internal: true,
			Enums: []Enum{
				{Name: "ib_srq_attr_mask", Doc: "The modify SRQ command carries it (ib_uverbs_modify_srq.attr_mask)."},
			},
		},
	},
}

var mlx5ABI = Package{
	Dir:     "internal/mlx5abi",
	Name:    "mlx5abi",
	Modules: []string{"mlx5_ib", "mlx5_core", "ib_uverbs", "ib_core", "vmlinux"},
	Files: []File{
		{
			Name:   "mlx5_abi.go",
			Header: "<rdma/mlx5-abi.h>",
			Enums: []Enum{
				{Name: "mlx5_lib_caps"},
				{Name: "mlx5_ib_alloc_uctx_v2_flags"},
				{Name: "mlx5_user_cmds_supp_uhw", Doc: "mlx5_ib_alloc_ucontext_resp.cmds_supp_uhw: the commands whose driver data the kernel accepts."},
				{Name: "mlx5_ib_alloc_ucontext_resp_mask"},
				{Name: "mlx5_ib_create_cq_flags"},
				{Name: "mlx5_ib_cqe_comp_res_format", Doc: "mlx5_ib_cqe_comp_caps.supported_format."},
				{Name: "mlx5_ib_packet_pacing_cap_flags", Doc: "mlx5_packet_pacing_caps.cap_flags."},
				{Name: "mlx5_ib_mpw_caps", Doc: "mlx5_ib_query_device_resp.mlx5_ib_support_multi_pkt_send_wqes."},
				{Name: "mlx5_ib_sw_parsing_offloads", Doc: "mlx5_ib_sw_parsing_caps.sw_parsing_offloads."},
				{Name: "mlx5_ib_query_dev_resp_flags", Doc: "mlx5_ib_query_device_resp.flags."},
				{Name: "mlx5_ib_tunnel_offloads", Doc: "mlx5_ib_query_device_resp.tunnel_offloads_caps."},
			},
			Structs: []Struct{
				{Name: "mlx5_ib_alloc_ucontext_req_v2"},
				{Name: "mlx5_ib_alloc_ucontext_resp"},
				{Name: "mlx5_ib_alloc_pd_resp"},
				{Name: "mlx5_ib_tso_caps", Doc: "SupportedQpts has bit n set for QP type n (enum ib_qp_type)."},
				{Name: "mlx5_ib_rss_caps"},
				{Name: "mlx5_ib_cqe_comp_caps"},
				{Name: "mlx5_packet_pacing_caps", Doc: "Rates are in kbit/s."},
				{Name: "mlx5_ib_sw_parsing_caps"},
				{Name: "mlx5_ib_striding_rq_caps"},
				{Name: "mlx5_ib_dci_streams_caps", Doc: "The largest log2 of a DCI's stream channels and of its errored streams (mlx5_ib_create_qp_dci_streams asks for them)."},
				{
					Name: "mlx5_ib_query_device_resp", Extensible: true,
					Doc: "The driver data of the extended query device. The kernel fills a member only if offsetofend(resp, member) <= the caller's buffer (mlx5_ib_query_device), and counts it in ResponseLength; later kernels add members (6.12: reg_c0).",
				},
				{Name: "mlx5_ib_create_cq", Doc: "The driver data of CQ creation."},
				{Name: "mlx5_ib_resize_cq", Doc: "The driver data of a CQ resize: the new ring."},
				{Name: "mlx5_ib_create_srq", Doc: "The driver data of SRQ creation."},
				{Name: "mlx5_ib_create_srq_resp"},
				{Name: "mlx5_ib_create_qp_dci_streams"},
				{Name: "mlx5_ib_create_qp", Doc: "The driver data of QP creation."},
				{Name: "mlx5_ib_create_qp_resp"},
				{Name: "mlx5_ib_create_ah_resp", Doc: "On RoCE, the destination MAC the kernel resolved."},
				{Name: "mlx5_ib_burst_info", Doc: "Packet pacing."},
				{Name: "mlx5_ib_modify_qp", Doc: "The driver data of the extended modify QP command."},
				{Name: "mlx5_ib_modify_qp_resp", Doc: "A DCT's number once it reaches RTR, and the ECE options."},
			},
		},
		{
			Name:   "mlx5_user_ioctl_cmds.go",
			Header: "<rdma/mlx5_user_ioctl_cmds.h>",
			Enums: []Enum{
				{Name: "mlx5_ib_objects"},
				{Name: "mlx5_ib_devx_methods"},
				{Name: "mlx5_ib_devx_other_attrs"},
				{Name: "mlx5_ib_devx_query_uar_attrs"},
				{Name: "mlx5_ib_devx_query_eqn_attrs"},
				{Name: "mlx5_ib_devx_subscribe_event_attrs"},
				{Name: "mlx5_ib_devx_obj_methods"},
				{Name: "mlx5_ib_devx_obj_create_attrs"},
				{Name: "mlx5_ib_devx_obj_destroy_attrs"},
				{Name: "mlx5_ib_devx_obj_modify_attrs"},
				{Name: "mlx5_ib_devx_obj_query_attrs"},
				{Name: "mlx5_ib_devx_obj_query_async_attrs"},
				{Name: "mlx5_ib_devx_async_cmd_fd_methods"},
				{Name: "mlx5_ib_devx_async_cmd_fd_alloc_attrs"},
				{Name: "mlx5_ib_devx_async_event_fd_methods"},
				{Name: "mlx5_ib_devx_async_event_fd_alloc_attrs"},
				{Name: "mlx5_ib_devx_umem_methods"},
				{Name: "mlx5_ib_devx_umem_reg_attrs"},
				{Name: "mlx5_ib_devx_umem_dereg_attrs"},
				{Name: "mlx5_ib_uar_obj_methods"},
				{Name: "mlx5_ib_uar_alloc_attrs"},
				{Name: "mlx5_ib_uar_obj_destroy_attrs"},
			},
		},
		{
			Name:   "mlx5_user_ioctl_verbs.go",
			Header: "<rdma/mlx5_user_ioctl_verbs.h>",
			Enums: []Enum{
				{Name: "mlx5_ib_uapi_uar_alloc_type"},
				{Name: "mlx5_ib_uapi_devx_create_event_channel_flags"},
			},
			Structs: []Struct{
				{Name: "mlx5_ib_uapi_devx_async_cmd_hdr", Doc: "WrID is the cookie given with the command; the command's output follows."},
				{Name: "mlx5_ib_uapi_devx_async_event_hdr", Doc: "Cookie is the one given at subscription, in native byte order; without MLX5_IB_UAPI_DEVX_CR_EV_CH_FLAGS_OMIT_DATA the 64-byte EQE (Mlx5Eqe) follows."},
			},
		},
		{
			Name:     "mlx5_device.go",
			Header:   "<linux/mlx5/device.h>",
			Internal: true,
			Enums: []Enum{
				{Name: "mlx5_event", Only: []string{"MLX5_EVENT_TYPE_COMP", "MLX5_EVENT_TYPE_SQ_DRAINED", "MLX5_EVENT_TYPE_CQ_ERROR"}, Doc: "The event types mlx5go subscribes to (mlx5_eqe.type)."},
			},
			Structs: []Struct{
				{Name: "mlx5_eqe", Doc: "The event queue entry a DEVX event carries: the kernel copies the firmware's EQE as it is, so the layout is the PRM's (big-endian)."},
				{Name: "mlx5_eqe_cq_err", Doc: "The data of a CQ_ERROR EQE; the CQN is the low 24 bits of Cqn."},
				{Name: "mlx5_eqe_qp_srq", Doc: "The data of QP and SRQ events (SQ_DRAINED among them); the queue number is the low 24 bits of QpSrqN."},
			},
		},
	},
}
