// Package doorbell handles mlx5 doorbell records, UAR pages and BlueFlame
// writes, with the memory barriers their ordering needs.
//
// It works on memory it is given (mmap'd UAR pages, off-heap doorbell
// records) and makes no syscalls. It imports only the standard library and
// nothing of uverbs or mlx5.
package doorbell
