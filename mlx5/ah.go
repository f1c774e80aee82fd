package mlx5

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/mlx5go/mlx5go/internal/mlx5abi"
	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/wqe"
)

// AH is an address handle (ibv_ah): where a send on a UD QP goes (and,
// for a DCI, the DCT's port). It holds the address vector its sends carry.
type AH struct {
	pd *PD
	av wqe.AV
	// img is av encoded, which post copies into a WQE's address vector
	// segment (set by adoptAH, once av is final).
	img    wqe.AVImage
	handle seam.Handle
	kernel bool // made by the kernel (RoCE): Close destroys it there
	user   uint64
	name   string
	// dead: Close began; sends with the AH are refused (the poster's
	// check, without the lock).
	dead atomic.Bool

	mu     sync.Mutex
	closed bool
}

// gidTypeRoCEv2 is IB_UVERBS_GID_TYPE_ROCE_V2.
const gidTypeRoCEv2 = 2

// grhFlowLabelMask is IB_GRH_FLOWLABEL_MASK.
const grhFlowLabelMask = 0xfffff

// CreateAH makes an address handle for path (ibv_create_ah), as libmlx5's
// mlx5_create_ah does. On InfiniBand the address vector is built here
// (the destination LID, path bits and, with GRH, the GID) and the kernel
// is not asked: the port's link layer is the one the context learned when
// it opened. On RoCE a GRH is required; the kernel makes the AH and
// resolves the destination MAC, and for a RoCE v2 source GID the address
// vector carries the UDP source port: the flow label folded into 14 bits,
// or a random port of 0xc000 to 0xffff without a flow label. path.MAC is
// ignored: the kernel's MAC is used.
func (pd *PD) CreateAH(path AddressPath) (*AH, error) {
	const op = "create ah"
	if err := pd.checkOpen(op); err != nil {
		return nil, err
	}
	c, obj := pd.c, pdName(pd.pdn)
	if !c.speaksVerbs() {
		return nil, unsupported(op, obj, "the device makes no verbs objects")
	}
	if path.Port < 1 || int(path.Port) > max(c.caps.NumPorts, 1) {
		return nil, invalid(op, obj, "port %d (1 to %d)", path.Port, max(c.caps.NumPorts, 1))
	}
	linkLayer, flags, err := c.port(path.Port)
	if err != nil {
		return nil, opErr(op, obj, err)
	}
	eth := linkLayer == linkLayerEthernet
	if !path.GRH && (eth || flags&portGRHRequired != 0) {
		return nil, invalid(op, obj, "port %d needs a GRH (RoCE, or GRH required)", path.Port)
	}
	a := path.ah()
	ah := &AH{pd: pd}
	rate := wqe.IBAV(&wqe.AHAttr{StaticRate: path.StaticRate}).StatRateSL >> 4
	if !eth {
		ah.av = wqe.IBAV(&wqe.AHAttr{DLID: path.LID, SL: path.SL, SrcPathBits: path.SrcPathBits, StaticRate: path.StaticRate,
			IsGlobal: path.GRH, DGID: path.GID, FlowLabel: path.FlowLabel, SGIDIndex: path.SGIDIndex, HopLimit: path.HopLimit, TClass: path.TrafficClass})
		ah.name = fmt.Sprintf("AH to LID %#x", path.LID)
		if err := pd.adoptAH(ah); err != nil {
			return nil, err
		}
		return ah, nil
	}
	if c.uhw&mlx5abi.MLX5_USER_CMDS_SUPP_UHW_CREATE_AH == 0 {
		return nil, unsupported(op, obj, "the kernel does not make RoCE AHs (no MLX5_USER_CMDS_SUPP_UHW_CREATE_AH)")
	}
	gidType, err := c.gidType(path.Port, path.SGIDIndex)
	if err != nil {
		return nil, opErr(op, obj, err)
	}
	if gidType == gidTypeRoCEv2 {
		ah.av.RLID = udpSourcePort(path.FlowLabel)
	}
	// On RoCE the GRH bit is reserved (every packet has one) and the SL
	// takes bits 3:1.
	ah.av.StatRateSL = rate<<4 | (path.SL&7)<<1
	ah.av.TClass, ah.av.HopLimit = path.TrafficClass, path.HopLimit
	ah.av.GRHGidFl = uint32(path.SGIDIndex)<<20 | path.FlowLabel&grhFlowLabelMask
	ah.av.RGID = path.GID
	ah.user = c.newHandle(ah)
	var resp mlx5abi.Mlx5IbCreateAhResp
	h, err := c.dev.CreateAH(pd.handle, &a, ah.user, bytesOf(&resp))
	if err != nil {
		c.dropHandle(ah.user)
		return nil, opErr(op, obj, err)
	}
	ah.handle, ah.kernel, ah.name = h, true, fmt.Sprintf("AH %d", h)
	ah.av.RMAC = resp.Dmac
	if err := pd.adoptAH(ah); err != nil {
		return nil, err
	}
	return ah, nil
}

// gidTyper is a device that reads the type of one GID table entry
// (QUERY_GID_ENTRY); the kernel device is one.
type gidTyper interface {
	GIDType(port uint8, index uint32) (uint32, error)
}

// gidType is the type of the source GID of a RoCE AH, which libmlx5's
// mlx5_create_ah reads with ibv_query_gid_type: that entry alone (a
// netdev elsewhere in the table cannot fail it). A device that cannot
// read one entry is asked for the table.
func (c *Context) gidType(port, index uint8) (uint32, error) {
	if d, ok := c.dev.(gidTyper); ok {
		return d.GIDType(port, uint32(index))
	}
	gids, err := c.dev.QueryGIDTable()
	if err != nil {
		return 0, err
	}
	for _, g := range gids {
		if g.Port == uint32(port) && g.Index == uint32(index) {
			return g.Type, nil
		}
	}
	return 0, &reasonError{msg: fmt.Sprintf("port %d has no GID %d", port, index), errs: []error{ErrInvalid, unix.EINVAL}}
}

// portGRHRequired is IB_UVERBS_QPF_GRH_REQUIRED, a port flag.
const portGRHRequired = 1

// udpSourcePort is the RoCE v2 UDP source port libmlx5 puts in rlid: the
// flow label's high 6 bits folded onto its low 14 (ibv_flow_label_to_udp_sport),
// or a random port without one, in 0xc000 to 0xffff either way.
func udpSourcePort(flowLabel uint32) uint16 {
	fl := flowLabel & grhFlowLabelMask
	if fl == 0 {
		return uint16(0xc000 + rand.IntN(0x4000))
	}
	low := fl&0x3fff ^ fl&0xfc000>>14
	return uint16(low | 0xc000)
}

// adoptAH encodes the new AH's address vector, which is final now, and
// hands the AH to the context (closing it if the context is closing).
func (pd *PD) adoptAH(ah *AH) error {
	ah.img = ah.av.Image()
	if err := pd.c.adopt(ah); err != nil {
		ah.Close()
		return opErr("create ah", pdName(pd.pdn), err)
	}
	return nil
}

// Close destroys the AH (the kernel's, on RoCE). Sends posted with it must
// have completed; later sends with it are refused (ErrClosed). Closing
// twice is safe.
func (ah *AH) Close() error {
	if ah == nil || ah.pd == nil {
		return unusable("destroy ah", "AH", "PD.CreateAH", ah == nil)
	}
	ah.mu.Lock()
	defer ah.mu.Unlock()
	if ah.closed {
		return nil
	}
	c := ah.pd.c
	ah.dead.Store(true)
	if ah.kernel && !c.closedNow() {
		if err := c.dev.DestroyAH(ah.handle); err != nil {
			ah.dead.Store(false) // not destroyed: still usable
			return opErr("destroy ah", ah.name, err)
		}
	}
	if ah.user != 0 {
		c.dropHandle(ah.user)
		ah.user = 0
	}
	ah.closed = true
	ah.dead.Store(true)
	c.forget(ah)
	return nil
}

// postableOn reports whether a work request of a QP of context c may
// name ah: it is open and of a PD of c. Inlined into every post that
// takes an AH (a UD send, a DCI's DC address).
func (ah *AH) postableOn(c *Context) bool {
	return !ah.dead.Load() && ah.pd != nil && ah.pd.c == c
}
