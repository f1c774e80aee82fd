package ucmaabi

import (
	"testing"
	"unsafe"
)

// TestLayoutsMatchHeader compares the Go structs with the sizes and
// offsets gcc 12 gives the C structs of Debian 12's linux-libc-dev
// 6.1.192-2 (<rdma/rdma_user_cm.h> and the headers it includes), printed
// with sizeof and offsetof on amd64. The lab checks the same layouts
// against the running kernels' BTF (btf_lab_test.go); this test runs
// everywhere, arm64 included, where the layouts are the same (every
// field has its natural alignment and the structs are padded to it).
func TestLayoutsMatchHeader(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof(rdma_ucm_cmd_hdr)", unsafe.Sizeof(RdmaUcmCmdHdr{}), 8},
		{"sizeof(rdma_ucm_create_id)", unsafe.Sizeof(RdmaUcmCreateId{}), 24},
		{"sizeof(rdma_ucm_destroy_id)", unsafe.Sizeof(RdmaUcmDestroyId{}), 16},
		{"sizeof(rdma_ucm_bind_ip)", unsafe.Sizeof(RdmaUcmBindIp{}), 40},
		{"offsetof(rdma_ucm_bind_ip, id)", unsafe.Offsetof(RdmaUcmBindIp{}.Id), 36},
		{"sizeof(rdma_ucm_bind)", unsafe.Sizeof(RdmaUcmBind{}), 136},
		{"offsetof(rdma_ucm_bind, addr)", unsafe.Offsetof(RdmaUcmBind{}.Addr), 8},
		{"sizeof(rdma_ucm_resolve_ip)", unsafe.Sizeof(RdmaUcmResolveIp{}), 64},
		{"sizeof(rdma_ucm_resolve_addr)", unsafe.Sizeof(RdmaUcmResolveAddr{}), 272},
		{"offsetof(rdma_ucm_resolve_addr, dst_addr)", unsafe.Offsetof(RdmaUcmResolveAddr{}.DstAddr), 144},
		{"sizeof(rdma_ucm_query)", unsafe.Sizeof(RdmaUcmQuery{}), 16},
		{"sizeof(rdma_ucm_query_route_resp)", unsafe.Sizeof(RdmaUcmQueryRouteResp{}), 208},
		{"offsetof(rdma_ucm_query_route_resp, src_addr)", unsafe.Offsetof(RdmaUcmQueryRouteResp{}.SrcAddr), 136},
		{"offsetof(rdma_ucm_query_route_resp, num_paths)", unsafe.Offsetof(RdmaUcmQueryRouteResp{}.NumPaths), 192},
		{"offsetof(rdma_ucm_query_route_resp, ibdev_index)", unsafe.Offsetof(RdmaUcmQueryRouteResp{}.IbdevIndex), 200},
		{"sizeof(rdma_ucm_query_addr_resp)", unsafe.Sizeof(RdmaUcmQueryAddrResp{}), 280},
		{"offsetof(rdma_ucm_query_addr_resp, src_addr)", unsafe.Offsetof(RdmaUcmQueryAddrResp{}.SrcAddr), 16},
		{"offsetof(rdma_ucm_query_addr_resp, ibdev_index)", unsafe.Offsetof(RdmaUcmQueryAddrResp{}.IbdevIndex), 272},
		{"sizeof(rdma_ucm_query_path_resp)", unsafe.Sizeof(RdmaUcmQueryPathResp{}), 8},
		{"sizeof(ib_path_rec_data)", unsafe.Sizeof(IbPathRecData{}), 72},
		{"sizeof(ib_user_path_rec)", unsafe.Sizeof(IbUserPathRec{}), 64},
		{"sizeof(rdma_ucm_conn_param)", unsafe.Sizeof(RdmaUcmConnParam{}), 272},
		{"offsetof(rdma_ucm_conn_param, valid)", unsafe.Offsetof(RdmaUcmConnParam{}.Valid), 271},
		{"sizeof(rdma_ucm_ud_param)", unsafe.Sizeof(RdmaUcmUdParam{}), 304},
		{"offsetof(rdma_ucm_ud_param, private_data)", unsafe.Offsetof(RdmaUcmUdParam{}.PrivateData), 40},
		{"sizeof(rdma_ucm_connect)", unsafe.Sizeof(RdmaUcmConnect{}), 288},
		{"offsetof(rdma_ucm_connect, ece)", unsafe.Offsetof(RdmaUcmConnect{}.Ece), 280},
		{"sizeof(rdma_ucm_accept)", unsafe.Sizeof(RdmaUcmAccept{}), 296},
		{"offsetof(rdma_ucm_accept, id)", unsafe.Offsetof(RdmaUcmAccept{}.Id), 280},
		{"offsetof(rdma_ucm_accept, ece)", unsafe.Offsetof(RdmaUcmAccept{}.Ece), 288},
		{"sizeof(rdma_ucm_reject)", unsafe.Sizeof(RdmaUcmReject{}), 264},
		{"sizeof(rdma_ucm_init_qp_attr)", unsafe.Sizeof(RdmaUcmInitQpAttr{}), 16},
		{"sizeof(ib_uverbs_qp_attr)", unsafe.Sizeof(IbUverbsQpAttr{}), 144},
		{"offsetof(ib_uverbs_qp_attr, pkey_index)", unsafe.Offsetof(IbUverbsQpAttr{}.PkeyIndex), 124},
		{"offsetof(ib_uverbs_qp_attr, alt_timeout)", unsafe.Offsetof(IbUverbsQpAttr{}.AltTimeout), 138},
		{"sizeof(rdma_ucm_event_resp)", unsafe.Sizeof(RdmaUcmEventResp{}), 336},
		{"offsetof(rdma_ucm_event_resp, param)", unsafe.Offsetof(RdmaUcmEventResp{}.Param), 20},
		{"offsetof(rdma_ucm_event_resp, reserved)", unsafe.Offsetof(RdmaUcmEventResp{}.Reserved), 324},
		{"offsetof(rdma_ucm_event_resp, ece)", unsafe.Offsetof(RdmaUcmEventResp{}.Ece), 328},
		{"sizeof(rdma_ucm_set_option)", unsafe.Sizeof(RdmaUcmSetOption{}), 24},
		{"sizeof(rdma_ucm_migrate_id)", unsafe.Sizeof(RdmaUcmMigrateId{}), 16},
		{"sizeof(ib_uverbs_ah_attr)", unsafe.Sizeof(IbUverbsAhAttr{}), 32},
		{"sizeof(sockaddr_in6)", unsafe.Sizeof(SockaddrIn6{}), SizeofSockaddrIn6},
		{"sizeof(__kernel_sockaddr_storage)", unsafe.Sizeof(SockaddrStorage{}), SizeofSockaddrStorage},
	} {
		if c.got != c.want {
			t.Errorf("%s: Go %d, C %d", c.name, c.got, c.want)
		}
	}
}
