package mlx5

// SendQueue is the QP's send queue as the poster has it, for tests: the
// ring (the device's memory), the producer counter, the consumer counter
// the poller advances, and the ring's WQEBBs.
func SendQueue(qp *QP) (ring []byte, pi, tail uint16, size int) {
	return qp.sq.ring, qp.sq.pi, uint16(qp.sq.tail.Load()), len(qp.sq.slots)
}
