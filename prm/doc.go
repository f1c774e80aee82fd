// Package prm describes mlx5 firmware command layouts from NVIDIA's
// Programmer's Reference Manual (PRM): each PRM struct is a table of fields
// (name, bit offset, width) with allocation-free accessors over big-endian
// mailboxes, plus the command opcodes, the command status and the typed
// error for a failed command.
//
// The tables in ifc.go are generated from the kernel's
// include/linux/mlx5/mlx5_ifc.h by internal/cmd/prmgen (go generate ./prm)
// and checked against the kernel's mlx5_ifc_*_bits types (BTF of
// mlx5_core and mlx5_ib) in the kernel lab; docs/PRM.md tells how. Every
// struct mlx5_ifc_NAME_bits is a variable NAME (CamelCase) whose members
// are Fields, and a Layout for tools:
//
//	in := make([]byte, prm.CreateMkeyIn.Layout().Size)
//	prm.CreateMkeyIn.Opcode.Set(in, prm.MLX5_CMD_OP_CREATE_MKEY)
//	mkc := prm.CreateMkeyIn.MemoryKeyMkeyEntry
//	prm.Mkc.AccessMode10.At(mkc).Set(in, 1)
//
// It is a pure encoder: no syscalls, no device. It imports only the
// standard library.
package prm

//go:generate go run ../internal/cmd/prmgen -o ifc.go
