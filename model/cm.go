package model

import (
	"sync/atomic"

	"github.com/mlx5go/mlx5go/internal/seam"
	"github.com/mlx5go/mlx5go/model/internal/rdmacm"
	"github.com/mlx5go/mlx5go/prm"
	"golang.org/x/sys/unix"
)

// The RDMA connection manager of the HCA's netdev is package
// model/internal/rdmacm, which sees the HCA only through rdmacm.HCA
// (cmHCA below). What stays here is the device's side: opening it, as
// a process opens /dev/infiniband/rdma_cm, and the tests' views of it.

// nodeGUIDs numbers the HCAs' node GUIDs.
var nodeGUIDs atomic.Uint64

// nextNodeGUID is a node GUID for a new HCA: the Mellanox OUI (00:02:c9)
// in the top bytes, as mlx5_core's node GUIDs have it, and a serial
// number, so that every model HCA of a process has its own.
func nextNodeGUID() uint64 { return 0x0002c90300000000 | nodeGUIDs.Add(1) }

// cmHCA is the HCA as its connection manager reads it: the node GUID,
// port 1's GID table, the path MTU of the netdev's MTU, and the
// local_ca_ack_delay capability of the profile. None of them changes
// while the HCA lives, so none takes the HCA's lock.
type cmHCA struct{ h *hca }

func (c cmHCA) NodeGUID() uint64          { return c.h.guid }
func (c cmHCA) GIDTable() []seam.GIDEntry { return c.h.gidTable() }
func (c cmHCA) PathMTU() uint8            { return iboeMTU(portNetdevMTU) }
func (c cmHCA) CAAckDelay() uint8 {
	return uint8(c.h.prof.cap(prm.CmdHcaCap.LocalCaAckDelay))
}

// cmNet is the HCA's connection manager, nil if none was opened yet.
func (h *hca) cmNet() *rdmacm.Net {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cm
}

// OpenCM opens the connection manager of the context's HCA, as a process
// opens /dev/infiniband/rdma_cm: its ids connect to those of every other
// OpenCM of the HCA, of any context. docs/MODEL.md ("Connection manager")
// says what it models.
func (d *Device) OpenCM() (seam.CM, error) {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	if d.closed {
		return nil, kerr("open rdma_cm", unix.EBADF, "the context is closed")
	}
	if d.h.cm == nil {
		d.h.cm = rdmacm.New(cmHCA{d.h})
	}
	return d.h.cm.Open(), nil
}

// CMIDs counts the ids alive on the context's HCA: made by CreateID or
// for a connect request, not yet destroyed (an id in timewait that was
// destroyed is gone). Tests check that nothing leaks.
func (d *Device) CMIDs() int {
	if n := d.h.cmNet(); n != nil {
		return n.IDs()
	}
	return 0
}

// InjectCMDeviceRemoval does to the HCA's connection manager what the
// device's removal does (cma_process_remove, ucma_event_handler): every id
// on the device gets DEVICE_REMOVAL, its connection ends with no message
// to the peer (the peer is on the same device), and later commands on it
// fail with ENXIO, DestroyID excepted (ucma_close_id released its cm_id);
// addresses of the netdev then have no RDMA device behind them (ENODEV).
// The HCA's verbs and data path are left as they are: tests of how an
// application takes the event.
func (d *Device) InjectCMDeviceRemoval() {
	if n := d.h.cmNet(); n != nil {
		n.RemoveDevice()
	}
}
