package mlx5

import (
	"errors"
	"fmt"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/uverbs"
	"golang.org/x/sys/unix"
)

// The context's own queries of the device, its ports and their GIDs, so
// that a user of the package needs no second uverbs.Open beside it. The
// answers are package uverbs' types, plain values returned as copies.

// DeviceAttr is the device's attributes as ibv_query_device_ex answers
// them, the extended ones included.
type DeviceAttr = uverbs.DeviceAttr

// PortAttr is a port's attributes (ibv_query_port).
type PortAttr = uverbs.PortAttr

// GIDEntry is one entry of a port's GID table (ibv_query_gid_ex).
type GIDEntry = uverbs.GIDEntry

// verbsQuerier is a device that answers the queries whole: the kernel's,
// through the context's uverbs context. Another device (the model)
// answers what package seam carries.
type verbsQuerier interface {
	queryDeviceAttr() (DeviceAttr, error)
	queryPortAttr(port uint8) (PortAttr, error)
	queryGIDEntry(port uint8, index uint32) (GIDEntry, error)
}

func (k *kernelDevice) queryDeviceAttr() (DeviceAttr, error) { return k.ctx.QueryDevice() }
func (k *kernelDevice) queryPortAttr(port uint8) (PortAttr, error) {
	return k.ctx.QueryPort(port)
}
func (k *kernelDevice) queryGIDEntry(port uint8, index uint32) (GIDEntry, error) {
	return k.ctx.QueryGIDEntry(uint32(port), index)
}

// QueryDevice asks the device for its attributes now (the extended
// query device, ibv_query_device_ex, without driver data): limits,
// capability flags, the ODP, RSS, tag matching and CQ moderation caps,
// the completion timestamp mask and the core clock, taking each extended
// field only where the kernel's response covers it. On a device of
// package mlx5test it holds what the model answers of them: AtomicCap,
// HCACoreClock, NodeGUID, PhysPortCnt (the ports GET_CONTEXT
// reported), ODPCaps, XRCODPCaps and CQModerationCaps.
func (c *Context) QueryDevice() (DeviceAttr, error) {
	const op = "query device"
	if err := c.checkOpen(op); err != nil {
		return DeviceAttr{}, err
	}
	if q, ok := c.dev.(verbsQuerier); ok {
		a, err := q.queryDeviceAttr()
		return a, c.queryErr(op, err)
	}
	s, err := c.dev.QueryDevice(nil)
	if err != nil {
		return DeviceAttr{}, c.queryErr(op, err)
	}
	return DeviceAttr{AtomicCap: uverbs.AtomicCap(s.AtomicCap), HCACoreClock: s.HCACoreClock, NodeGUID: s.NodeGUID,
		PhysPortCnt: uint8(c.caps.NumPorts), ODPCaps: uverbs.ODPCaps{General: s.ODP.General, RC: s.ODP.RC, UC: s.ODP.UC, UD: s.ODP.UD},
		XRCODPCaps:       s.ODP.XRC,
		CQModerationCaps: uverbs.CQModerationCaps{MaxCQCount: s.CQModerationCount, MaxCQPeriod: s.CQModerationPeriod}}, nil
}

// QueryPort asks the device for port's attributes now (ibv_query_port;
// ports are numbered from 1). Unlike what the context learned of its
// ports when it opened, the answer is the port's state at the call.
func (c *Context) QueryPort(port uint8) (PortAttr, error) {
	op := fmt.Sprintf("query port %d", port)
	if err := c.checkOpen(op); err != nil {
		return PortAttr{}, err
	}
	if port == 0 {
		return PortAttr{}, invalid(op, c.name, "ports are numbered from 1")
	}
	if q, ok := c.dev.(verbsQuerier); ok {
		a, err := q.queryPortAttr(port)
		return a, c.queryErr(op, err)
	}
	s, err := c.dev.QueryPort(port)
	if err != nil {
		return PortAttr{}, c.queryErr(op, err)
	}
	return PortAttr{State: s.State, MaxMTU: s.MaxMTU, ActiveMTU: s.ActiveMTU, GIDTableLen: s.GIDTableLen,
		PortCapFlags: s.PortCapFlags, MaxMsgSize: s.MaxMsgSz, LID: s.LID, SMLID: s.SMLID, LMC: s.LMC,
		LinkLayer: s.LinkLayer, Flags: s.Flags}, nil
}

// QueryGID asks for entry index of port's GID table (ibv_query_gid_ex):
// the GID, its type and, on the kernel, the interface index of its
// netdev. An index past the table, or a port the device lacks, is the
// kernel's EINVAL; an empty entry its ENODATA.
func (c *Context) QueryGID(port uint8, index uint32) (GIDEntry, error) {
	op := fmt.Sprintf("query gid (port %d, index %d)", port, index)
	if err := c.checkOpen(op); err != nil {
		return GIDEntry{}, err
	}
	if port == 0 {
		return GIDEntry{}, invalid(op, c.name, "ports are numbered from 1")
	}
	if q, ok := c.dev.(verbsQuerier); ok {
		e, err := q.queryGIDEntry(port, index)
		return e, c.queryErr(op, err)
	}
	pa, err := c.dev.QueryPort(port)
	if err != nil {
		return GIDEntry{}, c.queryErr(op, err)
	}
	if index >= pa.GIDTableLen {
		return GIDEntry{}, opErr(op, c.name, fmt.Errorf("the port's GID table has %d entries: %w", pa.GIDTableLen, unix.EINVAL))
	}
	t, err := c.dev.QueryGIDTable()
	if err != nil {
		return GIDEntry{}, c.queryErr(op, err)
	}
	return gidIn(t, port, index, op, c.name)
}

// gidIn is entry index of port in the table t: ENODATA if t, which holds
// the valid entries only, has none there.
func gidIn(t []seam.GIDEntry, port uint8, index uint32, op, name string) (GIDEntry, error) {
	for _, e := range t {
		if e.Port == uint32(port) && e.Index == index {
			return GIDEntry{GID: e.GID, Index: e.Index, Port: e.Port, Type: uverbs.GIDType(e.Type)}, nil
		}
	}
	return GIDEntry{}, opErr(op, name, fmt.Errorf("empty entry: %w", unix.ENODATA))
}

// queryErr is a query's error: ErrClosed if the context closed while it
// ran, else the device's error, on the context.
func (c *Context) queryErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if c.closingNow() || errors.Is(err, uverbs.ErrClosed) {
		return opErr(op, c.name, ErrClosed)
	}
	return opErr(op, c.name, err)
}
