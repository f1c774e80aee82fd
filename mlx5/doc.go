// Package mlx5 is the device: it opens an mlx5 RDMA device through package
// uverbs with the mlx5 provider's driver data, issues DEVX firmware commands,
// and composes prm, wqe, doorbell and sig into QPs, CQs, signature mkeys and
// their work requests, with the semantics of rdma-core's mlx5dv API.
//
// Beneath it lies the one seam of docs/ARCHITECTURE.md: everything mlx5
// exchanges with the kernel and the hardware is bytes (PRM mailboxes, WQEs,
// CQEs, doorbell records, UAR writes) plus the object handles the kernel
// returns, so a software device model can stand in for both in tests.
//
// Every error it returns is an *Error naming the operation and the object
// once, through which errors.Is finds the sentinel (ErrInvalid,
// ErrClosed, ...) and the errno. As with os.File, a method of a nil
// object, or of a zero value the package did not make (&QP{}), returns
// ErrInvalid (a method without an error, its zero value), and a closed
// object returns ErrClosed; docs/MLX5.md, "Errors".
//
// Its objects are opaque handles: no exported field, so no assignment
// changes what the driver checks or looks up. What a user may know of one
// comes out through its methods, as copies (Context.Caps, MR.LKey,
// Mkey.RKey, UAR.Page, ...); options and work requests go in as plain
// data.
//
// It may import uverbs, prm, wqe, doorbell and sig; nothing imports it but
// the command-line tools, hwtest and users.
package mlx5
