package mlx5

// SendRing is the QP's send queue buffer and its producer counter, for
// tests that check what a refused work request left there.
func SendRing(qp *QP) ([]byte, uint16) { return qp.sq.ring, qp.sq.pi }

// SendMaxWQE is the WQEBBs of the largest work request the QP takes.
func SendMaxWQE(qp *QP) int { return qp.sq.maxWQE }
