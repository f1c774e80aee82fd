// Package model is the software ConnectX: a seam.Device that answers the
// DEVX and verbs calls of package mlx5 as the Linux kernel (ib_uverbs and
// mlx5_ib of Linux 6.1: their rules, their errnos, mlx5's driver data) and
// a ConnectX's firmware (PRM commands, statuses, capability profiles for
// ConnectX-5, ConnectX-6 Dx and ConnectX-7) would, so that every flow of the
// driver runs without hardware. Its verbs objects (CQs, RC, UC, UD and DC
// QPs, SRQs, AHs) are created from struct mlx5_ib_create_* as libmlx5
// writes them, their queues in the caller's memory, which the model views
// in place. A context opens with DEVX (a uid of its own) or, with
// Options.NoDEVX, without, as the kernel opens one for a request without
// MLX5_IB_ALLOC_UCTX_DEVX: its DEVX methods answer as devx.c does without
// a uid, its verbs objects carry uid 0. The ConnectX-6 Dx and ConnectX-7
// profiles have an AES-XTS crypto engine: its firmware keeps DEKs and
// crypto logins in the plaintext or the wrapped import method
// (Options.Crypto), with the credentials and import KEKs a crypto officer
// provisions (Device.SetCryptoCredential, Device.SetImportKEK).
//
// It has a data path too: a goroutine per context watches the mapped UAR
// pages for doorbells and CQ arms, runs the posted send WQEs (NOP, SEND,
// RDMA WRITE and READ between RC QPs of the HCA, SEND and RDMA WRITE on UC,
// SEND on UD with its datagram segment, DCI WQEs to DCTs by number and DC
// access key, atomics included, with the DCI's stream channels, their
// errors and resets, UMR with KLM and repeat-block translations and
// signature and crypto BSFs, SET_PSV) through the mkeys, with sig's
// engine for signature mkeys and AES-XTS for crypto mkeys, before or after
// it as their BSF orders, takes receive WQEs from receive queues and SRQs,
// and writes CQEs into the CQs. It raises completion events on armed CQs
// (to a completion channel, or as DEVX COMP events) and the firmware's
// affiliated events, which reach DEVX event channels and the context's
// async event file: CQ_ERROR when a CQ overruns, SQ_DRAINED when a send
// queue stopped by a signature error (drain_sigerr) has drained, COMM_EST,
// access and invalid-request errors, last WQE reached, SRQ limit.
//
// It is written from the PRM's semantics and the kernel's devx.c, and it
// parses the bytes it is given with prm's layout tables: it shares no
// encoding code with the driver, so a wrong encoder fails a model test
// instead of agreeing with itself. It may import seam, prm, sig and
// internal/mlx5abi (driver-data layouts), never mlx5, wqe or doorbell; the driver imports it only in tests and the CLI.
// docs/MODEL.md lists what it implements, where each rule comes from, and
// which profile values are guesses.
//
//	ctx, _ := mlx5test.Open("cx6dx") // mlx5test.OpenWithOptions with Options
package model
