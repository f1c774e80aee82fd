// Package model is the software ConnectX: a seam.Device that answers the
// DEVX calls of package mlx5 as the Linux kernel (mlx5_ib's DEVX rules) and
// a ConnectX's firmware (PRM commands, statuses, capability profiles for
// ConnectX-5, ConnectX-6 Dx and ConnectX-7) would, so that every flow of the
// driver runs without hardware.
//
// It has a data path too: a goroutine per context watches the mapped UAR
// pages for doorbells, runs the posted send WQEs (NOP, SEND, RDMA WRITE and
// READ between RC QPs of the HCA, UMR with KLM, repeat-block and signature
// translations, SET_PSV) through the mkeys, with sig's engine for
// signature mkeys, and writes CQEs into the CQs' UMEMs. It raises the
// DEVX events a context can subscribe to on an event channel: CQ_ERROR
// when a CQ overruns, SQ_DRAINED when a send queue stopped by a signature
// error (drain_sigerr) has drained.
//
// It is written from the PRM's semantics and the kernel's devx.c, and it
// parses the bytes it is given with prm's layout tables: it shares no
// encoding code with the driver, so a wrong encoder fails a model test
// instead of agreeing with itself. It may import seam, prm and sig, never
// mlx5, wqe or doorbell; the driver imports it only in tests and the CLI.
// docs/MODEL.md lists what it implements, where each rule comes from, and
// which profile values are guesses.
//
//	dev, _ := model.New("cx6dx")
//	ctx := mlx5.NewContext(dev, mlx5.Caps{SQD2RTS: true})
package model
