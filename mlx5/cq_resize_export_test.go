package mlx5

// CQWaiting is the number of CQEs the device has written to the CQ's ring
// that Poll has not read (for the resize tests; no poller may run).
func CQWaiting(cq *CQ) int {
	size := uint32(1) << cq.logSize
	n := uint32(0)
	for n < size && owned(cqeAt(cq.ring, cq.logSize, cq.ci+n), cq.ci+n, cq.logSize) {
		n++
	}
	return int(n)
}
