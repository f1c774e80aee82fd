package ucma

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/ucmaabi"
)

func idOp(name string, id ID) string { return fmt.Sprintf("%s id %d", name, id) }

// CreateID creates an id in port space ps (RDMA_USER_CM_CMD_CREATE_ID).
// uid is the caller's name for it, which its events carry; qpType
// matters only for PortSpaceIB (the kernel derives it for the others).
func (f *File) CreateID(uid uint64, ps PortSpace, qpType QPType) (ID, error) {
	var resp ucmaabi.RdmaUcmCreateIdResp
	out := bytesOf(&resp)
	cmd := ucmaabi.RdmaUcmCreateId{Uid: uid, Response: addr(out), Ps: uint16(ps), QpType: uint8(qpType)}
	if err := f.command("create id", ucmaabi.RDMA_USER_CM_CMD_CREATE_ID, bytesOf(&cmd), out); err != nil {
		return 0, err
	}
	return ID(resp.Id), nil
}

// DestroyID destroys an id (RDMA_USER_CM_CMD_DESTROY_ID): a connection
// it holds is disconnected, a request it answers nothing to rejected, and
// the events of it not yet taken are dropped. It returns how many events
// of it GetEvent has taken (librdmacm waits for that many acks).
func (f *File) DestroyID(id ID) (eventsReported uint32, err error) {
	var resp ucmaabi.RdmaUcmDestroyIdResp
	out := bytesOf(&resp)
	cmd := ucmaabi.RdmaUcmDestroyId{Response: addr(out), Id: uint32(id)}
	if err := f.command(idOp("destroy", id), ucmaabi.RDMA_USER_CM_CMD_DESTROY_ID, bytesOf(&cmd), out); err != nil {
		return 0, err
	}
	return resp.EventsReported, nil
}

// Bind binds an id to a local address (RDMA_USER_CM_CMD_BIND): a port of
// 0 takes a free one; an unspecified address binds no device yet.
func (f *File) Bind(id ID, a netip.AddrPort) error {
	op := idOp("bind", id)
	cmd := ucmaabi.RdmaUcmBind{Id: uint32(id)}
	n, err := putSockaddr(&cmd.Addr, a)
	if err != nil {
		return fmt.Errorf("ucma: %s: %w", op, err)
	}
	cmd.AddrSize = n
	return f.command(op, ucmaabi.RDMA_USER_CM_CMD_BIND, bytesOf(&cmd), nil)
}

// BindIP is Bind with the legacy RDMA_USER_CM_CMD_BIND_IP, which kernels
// without AF_IB take (librdmacm uses it when AF_IB is unsupported).
func (f *File) BindIP(id ID, a netip.AddrPort) error {
	op := idOp("bind ip", id)
	cmd := ucmaabi.RdmaUcmBindIp{Id: uint32(id)}
	if err := putSockaddrIn6(&cmd.Addr, a); err != nil {
		return fmt.Errorf("ucma: %s: %w", op, err)
	}
	return f.command(op, ucmaabi.RDMA_USER_CM_CMD_BIND_IP, bytesOf(&cmd), nil)
}

func timeoutMs(d time.Duration) uint32 {
	ms := d.Milliseconds()
	switch {
	case ms <= 0 && d > 0:
		return 1
	case ms <= 0:
		return 0
	case ms > 1<<31:
		return 1 << 31
	}
	return uint32(ms)
}

// ResolveAddr starts resolving dst to a device and a destination
// hardware address (RDMA_USER_CM_CMD_RESOLVE_ADDR), binding the id first
// to src (an invalid src: the unspecified address of dst's family) if it
// is not bound. ADDR_RESOLVED or ADDR_ERROR follows, within timeout.
func (f *File) ResolveAddr(id ID, src, dst netip.AddrPort, timeout time.Duration) error {
	op := idOp("resolve addr", id)
	cmd := ucmaabi.RdmaUcmResolveAddr{Id: uint32(id), TimeoutMs: timeoutMs(timeout)}
	if src.Addr().IsValid() {
		n, err := putSockaddr(&cmd.SrcAddr, src)
		if err != nil {
			return fmt.Errorf("ucma: %s: source: %w", op, err)
		}
		cmd.SrcSize = n
	}
	n, err := putSockaddr(&cmd.DstAddr, dst)
	if err != nil {
		return fmt.Errorf("ucma: %s: destination: %w", op, err)
	}
	cmd.DstSize = n
	return f.command(op, ucmaabi.RDMA_USER_CM_CMD_RESOLVE_ADDR, bytesOf(&cmd), nil)
}

// ResolveRoute starts resolving the route to the resolved address
// (RDMA_USER_CM_CMD_RESOLVE_ROUTE): ROUTE_RESOLVED or ROUTE_ERROR
// follows, within timeout (the kernel refuses 0 with EINVAL).
func (f *File) ResolveRoute(id ID, timeout time.Duration) error {
	cmd := ucmaabi.RdmaUcmResolveRoute{Id: uint32(id), TimeoutMs: timeoutMs(timeout)}
	return f.command(idOp("resolve route", id), ucmaabi.RDMA_USER_CM_CMD_RESOLVE_ROUTE, bytesOf(&cmd), nil)
}

// QueryAddr answers the id's addresses, device and port
// (RDMA_USER_CM_CMD_QUERY, RDMA_USER_CM_QUERY_ADDR).
func (f *File) QueryAddr(id ID) (AddrInfo, error) {
	var resp ucmaabi.RdmaUcmQueryAddrResp
	out := bytesOf(&resp)
	cmd := ucmaabi.RdmaUcmQuery{Response: addr(out), Id: uint32(id), Option: ucmaabi.RDMA_USER_CM_QUERY_ADDR}
	if err := f.command(idOp("query addr", id), ucmaabi.RDMA_USER_CM_CMD_QUERY, bytesOf(&cmd), out); err != nil {
		return AddrInfo{}, err
	}
	return AddrInfo{Src: sockaddr(storageBytes(&resp.SrcAddr)[:resp.SrcSize]), Dst: sockaddr(storageBytes(&resp.DstAddr)[:resp.DstSize]),
		NodeGUID: be64(resp.NodeGuid), Port: resp.PortNum, PKey: be16(resp.Pkey), IBDevIndex: resp.IbdevIndex}, nil
}

// QueryRoute answers the id's route (RDMA_USER_CM_CMD_QUERY_ROUTE).
func (f *File) QueryRoute(id ID) (Route, error) {
	var resp ucmaabi.RdmaUcmQueryRouteResp
	out := bytesOf(&resp)
	cmd := ucmaabi.RdmaUcmQuery{Response: addr(out), Id: uint32(id)}
	if err := f.command(idOp("query route", id), ucmaabi.RDMA_USER_CM_CMD_QUERY_ROUTE, bytesOf(&cmd), out); err != nil {
		return Route{}, err
	}
	r := Route{Src: sockaddr(in6Bytes(&resp.SrcAddr)), Dst: sockaddr(in6Bytes(&resp.DstAddr)), NodeGUID: be64(resp.NodeGuid),
		Port: resp.PortNum, IBDevIndex: resp.IbdevIndex, Path0: pathOf(&resp.IbRoute[0])}
	for i := 0; i < int(resp.NumPaths) && i < len(resp.IbRoute); i++ {
		r.Paths = append(r.Paths, pathOf(&resp.IbRoute[i]))
	}
	return r, nil
}

func pathOf(p *ucmaabi.IbUserPathRec) PathRec {
	return PathRec{DGID: p.Dgid, SGID: p.Sgid, DLID: binary.BigEndian.Uint16(p.Dlid[:]), SLID: binary.BigEndian.Uint16(p.Slid[:]), RawTraffic: p.RawTraffic,
		FlowLabel: be32(p.FlowLabel), Reversible: p.Reversible, MTU: p.Mtu, PKey: binary.BigEndian.Uint16(p.Pkey[:]), HopLimit: p.HopLimit,
		TrafficClass: p.TrafficClass, NumbPath: p.NumbPath, SL: p.Sl, MTUSelector: p.MtuSelector,
		RateSelector: p.RateSelector, Rate: p.Rate, PacketLifeTimeSelector: p.PacketLifeTimeSelector,
		PacketLifeTime: p.PacketLifeTime, Preference: p.Preference}
}

// maxPaths bounds QueryPath's answer: primary, alternate and the inbound
// and outbound records of each, with room to spare (librdmacm asks 6).
const maxPaths = 6

// QueryPath answers the id's path records, packed
// (RDMA_USER_CM_CMD_QUERY, RDMA_USER_CM_QUERY_PATH).
func (f *File) QueryPath(id ID) ([]PathRecord, error) {
	size := unsafe.Sizeof(ucmaabi.RdmaUcmQueryPathResp{}) + maxPaths*unsafe.Sizeof(ucmaabi.IbPathRecData{})
	out := make([]byte, size)
	cmd := ucmaabi.RdmaUcmQuery{Response: addr(out), Id: uint32(id), Option: ucmaabi.RDMA_USER_CM_QUERY_PATH}
	if err := f.command(idOp("query path", id), ucmaabi.RDMA_USER_CM_CMD_QUERY, bytesOf(&cmd), out); err != nil {
		return nil, err
	}
	resp := (*ucmaabi.RdmaUcmQueryPathResp)(unsafe.Pointer(&out[0]))
	var recs []PathRecord
	for i := 0; i < int(resp.NumPaths) && i < maxPaths; i++ {
		d := (*ucmaabi.IbPathRecData)(unsafe.Pointer(&out[unsafe.Sizeof(*resp)+uintptr(i)*unsafe.Sizeof(ucmaabi.IbPathRecData{})]))
		r := PathRecord{Flags: d.Flags}
		copy(r.Packed[:], bytesOf(&d.PathRec))
		recs = append(recs, r)
	}
	return recs, nil
}

// Listen makes a bound (or, unbound, an any-address) id listen
// (RDMA_USER_CM_CMD_LISTEN). The kernel takes a backlog of 0 or beyond
// net.rdma_ucm.max_backlog (1024) as that maximum; it counts the connect
// requests queued and not yet taken by GetEvent, and drops more.
func (f *File) Listen(id ID, backlog int) error {
	if backlog < 0 {
		backlog = 0
	}
	cmd := ucmaabi.RdmaUcmListen{Id: uint32(id), Backlog: uint32(min(backlog, 1<<31-1))}
	return f.command(idOp("listen", id), ucmaabi.RDMA_USER_CM_CMD_LISTEN, bytesOf(&cmd), nil)
}

func putConnParam(dst *ucmaabi.RdmaUcmConnParam, p *ConnParam) error {
	if len(p.PrivateData) > MaxPrivateData {
		return fmt.Errorf("%d bytes of private data, the ABI carries %d", len(p.PrivateData), MaxPrivateData)
	}
	*dst = ucmaabi.RdmaUcmConnParam{QpNum: p.QPN, Qkey: p.QKey, PrivateDataLen: uint8(len(p.PrivateData)),
		ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth, FlowControl: p.FlowControl,
		RetryCount: p.RetryCount, RnrRetryCount: p.RNRRetryCount, Valid: 1}
	if p.SRQ {
		dst.Srq = 1
	}
	copy(dst.PrivateData[:], p.PrivateData)
	return nil
}

// Connect sends the connect request of a route-resolved id
// (RDMA_USER_CM_CMD_CONNECT): an IB CM REQ for a connected port space, a
// SIDR REQ for UD. CONNECT_RESPONSE (connected; the caller moves its QP
// to RTS and answers with Accept(id, 0, nil)), ESTABLISHED (UD), REJECTED
// or UNREACHABLE follows.
func (f *File) Connect(id ID, p *ConnParam, ece ECE) error {
	op := idOp("connect", id)
	var cmd ucmaabi.RdmaUcmConnect
	if err := putConnParam(&cmd.ConnParam, p); err != nil {
		return fmt.Errorf("ucma: %s: %w", op, err)
	}
	cmd.Id = uint32(id)
	cmd.Ece = ucmaabi.RdmaUcmEce{VendorId: ece.VendorID, AttrMod: ece.AttrMod}
	return f.command(op, ucmaabi.RDMA_USER_CM_CMD_CONNECT, bytesOf(&cmd), nil)
}

// Accept answers a connect request with p (RDMA_USER_CM_CMD_ACCEPT): an
// IB CM REP, or a SIDR REP for UD. From then on the id's events carry
// uid. With p nil it is the active side's answer to CONNECT_RESPONSE
// (the IB CM RTU: rdma_accept with no parameters, as librdmacm's
// ucma_process_conn_resp sends it).
func (f *File) Accept(id ID, uid uint64, p *ConnParam, ece ECE) error {
	op := idOp("accept", id)
	cmd := ucmaabi.RdmaUcmAccept{Uid: uid, Id: uint32(id), Ece: ucmaabi.RdmaUcmEce{VendorId: ece.VendorID, AttrMod: ece.AttrMod}}
	if p != nil {
		if err := putConnParam(&cmd.ConnParam, p); err != nil {
			return fmt.Errorf("ucma: %s: %w", op, err)
		}
	}
	return f.command(op, ucmaabi.RDMA_USER_CM_CMD_ACCEPT, bytesOf(&cmd), nil)
}

// Reject refuses a connect request (RDMA_USER_CM_CMD_REJECT) with reason
// (RejectConsumerDefined, or RejectVendorOptionNotSupported; 0 is the
// former; the kernel refuses others) and private data: an IB CM REJ, or a
// SIDR REP with status SIDRReject for UD.
func (f *File) Reject(id ID, reason uint8, privateData []byte) error {
	op := idOp("reject", id)
	if len(privateData) > MaxPrivateData {
		return fmt.Errorf("ucma: %s: %d bytes of private data, the ABI carries %d", op, len(privateData), MaxPrivateData)
	}
	cmd := ucmaabi.RdmaUcmReject{Id: uint32(id), PrivateDataLen: uint8(len(privateData)), Reason: reason}
	copy(cmd.PrivateData[:], privateData)
	return f.command(op, ucmaabi.RDMA_USER_CM_CMD_REJECT, bytesOf(&cmd), nil)
}

// Disconnect starts or answers a disconnect (RDMA_USER_CM_CMD_DISCONNECT):
// an IB CM DREQ from an established connection, a DREP to the peer's
// DREQ. DISCONNECTED follows when the peer answers (or the DREQ times
// out), then TIMEWAIT_EXIT.
func (f *File) Disconnect(id ID) error {
	cmd := ucmaabi.RdmaUcmDisconnect{Id: uint32(id)}
	return f.command(idOp("disconnect", id), ucmaabi.RDMA_USER_CM_CMD_DISCONNECT, bytesOf(&cmd), nil)
}

// InitQPAttr answers the attributes that move the id's QP to state
// (RDMA_USER_CM_CMD_INIT_QP_ATTR): the CM's path, QP numbers, PSNs,
// access and RDMA depths.
func (f *File) InitQPAttr(id ID, state QPState) (QPAttr, error) {
	var resp ucmaabi.IbUverbsQpAttr
	out := bytesOf(&resp)
	cmd := ucmaabi.RdmaUcmInitQpAttr{Response: addr(out), Id: uint32(id), QpState: uint32(state)}
	if err := f.command(idOp("init qp attr", id), ucmaabi.RDMA_USER_CM_CMD_INIT_QP_ATTR, bytesOf(&cmd), out); err != nil {
		return QPAttr{}, err
	}
	return QPAttr{Mask: resp.QpAttrMask, State: QPState(resp.QpState), CurState: QPState(resp.CurQpState),
		PathMTU: uint8(resp.PathMtu), PathMigState: uint8(resp.PathMigState), QKey: resp.Qkey, RQPSN: resp.RqPsn,
		SQPSN: resp.SqPsn, DestQPN: resp.DestQpNum, AccessFlags: resp.QpAccessFlags, AH: ahOf(&resp.AhAttr),
		AltAH: ahOf(&resp.AltAhAttr), MaxSendWR: resp.MaxSendWr, MaxRecvWR: resp.MaxRecvWr, MaxSendSGE: resp.MaxSendSge,
		MaxRecvSGE: resp.MaxRecvSge, MaxInlineData: resp.MaxInlineData, PKeyIndex: resp.PkeyIndex,
		AltPKeyIndex: resp.AltPkeyIndex, EnSQDAsyncNotify: resp.EnSqdAsyncNotify != 0, SQDraining: resp.SqDraining != 0,
		MaxRdAtomic: resp.MaxRdAtomic, MaxDestRdAtomic: resp.MaxDestRdAtomic, MinRNRTimer: resp.MinRnrTimer,
		Port: resp.PortNum, Timeout: resp.Timeout, RetryCnt: resp.RetryCnt, RNRRetry: resp.RnrRetry,
		AltPort: resp.AltPortNum, AltTimeout: resp.AltTimeout}, nil
}

// Option levels and names of SetOption (their values are the kernel's,
// which TestGoNamesAreTheKernels checks against internal/ucmaabi).
const (
	OptionLevelID = 0 // RDMA_OPTION_ID
	OptionLevelIB = 1 // RDMA_OPTION_IB

	OptionTOS        = 0 // RDMA_OPTION_ID_TOS, 1 byte: the type of service (RoCE traffic class)
	OptionReuseAddr  = 1 // RDMA_OPTION_ID_REUSEADDR, int: share a bound port
	OptionAFOnly     = 2 // RDMA_OPTION_ID_AFONLY, int: an IPv6 id takes no IPv4
	OptionAckTimeout = 3 // RDMA_OPTION_ID_ACK_TIMEOUT, 1 byte: the QP's local ACK timeout
	OptionIBPath     = 1 // RDMA_OPTION_IB_PATH, struct ib_path_rec_data[]: set the route
)

// SetOption sets an option of the id (RDMA_USER_CM_CMD_SET_OPTION);
// value is its bytes as the kernel reads them (an int is 4 bytes in host
// order).
func (f *File) SetOption(id ID, level, name uint32, value []byte) error {
	op := idOp(fmt.Sprintf("set option %d/%d", level, name), id)
	// The kernel copies optlen bytes from optval: value is pinned for the
	// call as a response would be.
	cmd := ucmaabi.RdmaUcmSetOption{Optval: addr(value), Id: uint32(id), Level: level, Optname: name, Optlen: uint32(len(value))}
	return f.write(op, header(ucmaabi.RDMA_USER_CM_CMD_SET_OPTION, bytesOf(&cmd), 0), value)
}

// Notify tells the CM of a QP event (RDMA_USER_CM_CMD_NOTIFY): a COMM_EST
// (enum ib_event_type 4) on a passive QP that received before the RTU
// establishes the connection, as rdma_notify does.
func (f *File) Notify(id ID, event uint32) error {
	cmd := ucmaabi.RdmaUcmNotify{Id: uint32(id), Event: event}
	return f.command(idOp("notify", id), ucmaabi.RDMA_USER_CM_CMD_NOTIFY, bytesOf(&cmd), nil)
}

// MigrateID moves id from the File from (where it lives) to f, with its
// queued events (RDMA_USER_CM_CMD_MIGRATE_ID, written to the new File);
// it returns how many of its events from had reported.
func (f *File) MigrateID(id ID, from *File) (eventsReported uint32, err error) {
	var resp ucmaabi.RdmaUcmMigrateResp
	out := bytesOf(&resp)
	cmd := ucmaabi.RdmaUcmMigrateId{Response: addr(out), Id: uint32(id), Fd: uint32(from.Fd())}
	if err := f.command(idOp("migrate", id), ucmaabi.RDMA_USER_CM_CMD_MIGRATE_ID, bytesOf(&cmd), out); err != nil {
		return 0, err
	}
	return resp.EventsReported, nil
}
