package rdmacm

import (
	"fmt"

	"github.com/mlx5go/mlx5go/internal/seam"
	"golang.org/x/sys/unix"
)

// HCA is all the connection manager reads of the device under it. The
// model's HCA implements it; the answers do not change while the HCA
// lives, so the connection manager reads them without the HCA's lock.
type HCA interface {
	// NodeGUID is the device's node GUID: what QueryAddr reports for an
	// id with a device, and the seed of the ids' random PSNs and ports.
	NodeGUID() uint64
	// GIDTable is port 1's GID table. Its RoCE v2 GIDs are the addresses
	// of the netdev under the port, from which the core fills the table:
	// the link-local address made from the MAC (the default GID), one
	// IPv4 address (mapped into IPv6), one IPv6 address.
	GIDTable() []seam.GIDEntry
	// PathMTU is the netdev's MTU as an IB MTU (enum ib_mtu), which cma
	// gives a RoCE route (iboe_get_mtu).
	PathMTU() uint8
	// CAAckDelay is the device's local CA ACK delay (the HCA capability
	// local_ca_ack_delay), from which the IB CM derives a connection's
	// ACK timeout (cm_ack_timeout).
	CAAckDelay() uint8
}

// gidTypeRoCEv2 is IB_UVERBS_GID_TYPE_ROCE_V2 (enum ib_uverbs_gid_type).
const gidTypeRoCEv2 = 2

// Error is a command the connection manager refused, as the kernel
// would: the command, the errno it returns, and the kernel rule that
// refused it. errors.Is(err, unix.EINVAL) and the like hold.
type Error struct {
	Call  string     // "bind"
	Errno unix.Errno // what the command returns
	Rule  string     // the kernel rule, e.g. "cma_check_port: ..."
}

func (e *Error) Error() string {
	return fmt.Sprintf("model: rdma_cm: %s: %v (%s)", e.Call, e.Errno, e.Rule)
}

// Unwrap returns the errno.
func (e *Error) Unwrap() error { return e.Errno }

func kerr(call string, errno unix.Errno, rule string) error {
	return &Error{Call: call, Errno: errno, Rule: rule}
}
