// Package doorbell handles mlx5 doorbell records, UAR pages and BlueFlame
// writes, with the memory barriers their ordering needs.
//
// RQ publishes a receive queue's producer counter in its doorbell record.
// SQ publishes a send queue's producer counter and rings the QP's
// BlueFlame register: an 8-byte doorbell (Ring) or a BlueFlame copy of a
// small WQE (RingBF), alternating the register's two halves. CQ publishes a
// completion queue's consumer index and arms it through the UAR.
//
// It works on memory it is given (mmap'd UAR pages, off-heap doorbell
// records) and makes no syscalls, takes no locks and allocates nothing on
// the hot path. Each queue has a single poster: serializing posters is the
// caller's job. docs/DOORBELL.md gives the protocol, the ordering argument
// per architecture and how it is checked against libmlx5.
//
// It imports only the standard library and nothing of uverbs or mlx5.
package doorbell
