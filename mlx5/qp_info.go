package mlx5

// What a QP and a context tell of themselves, for code that drives a QP
// it did not create (package cm moves a QP through its states with the
// connection manager's attributes).

// Type is the QP's transport type.
func (qp *QP) Type() QPType {
	if qp == nil {
		return 0
	}
	return qp.typ
}

// Context is the context the QP was created on (nil for a nil QP).
func (qp *QP) Context() *Context {
	if qp == nil {
		return nil
	}
	return qp.c
}

// DEVX reports whether the QP is a DEVX object (QPOptions.DEVX) rather
// than a verbs QP. The kernel resolves the peer's MAC of a verbs QP on
// RoCE; a DEVX QP must be given it (AddressPath.MAC).
func (qp *QP) DEVX() bool { return qp != nil && qp.c != nil && !qp.verbs }

// SRQ is the shared receive queue the QP receives from, or nil.
func (qp *QP) SRQ() *SRQ {
	if qp == nil {
		return nil
	}
	return qp.srq
}

// NodeGUID is the device's node GUID, as sysfs (node_guid, in groups of
// four hex digits), ibv_get_device_guid and the RDMA connection manager
// name the device: the kernel's answer to the device query.
func (c *Context) NodeGUID() (uint64, error) {
	const op = "query node guid"
	if err := c.checkOpen(op); err != nil {
		return 0, err
	}
	if !c.speaksVerbs() {
		return 0, unsupported(op, c.name, "the device makes no verbs objects")
	}
	a, err := c.dev.QueryDevice(nil)
	if err != nil {
		return 0, opErr(op, c.name, err)
	}
	return a.NodeGUID, nil
}
