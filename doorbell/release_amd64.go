//go:build !race

package doorbell

// release stores the record word w to p after every earlier load and
// store of this goroutine, as the device and other goroutines see them:
// CQ.SetCI's, whose CQE reads must be done before the device may reuse
// the CQEs. On amd64 a plain store does that: the CPU keeps a store
// after earlier loads and stores (TSO) and the compiler keeps it after
// them, so release is a MOV, where publish's XCHG would also fence the
// loads and stores after it, which nothing here needs. libmlx5's store of
// the consumer index on x86-64 is a MOV as well (its barriers there are
// compiler barriers). With the race detector, which does not see a plain
// store as a release, release is publish (release.go).
func release(p *uint32, w uint32) { *p = w }
