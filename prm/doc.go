// Package prm describes mlx5 firmware command layouts from NVIDIA's
// Programmer's Reference Manual (PRM): each PRM struct is a table of fields
// (name, bit offset, width) with allocation-free accessors over big-endian
// mailboxes, plus the command header, status and syndrome.
//
// It is a pure encoder: no syscalls, no device. It imports only the standard
// library. Every declared field is checked against the kernel's
// mlx5_ifc_*_bits types (BTF of mlx5_core and mlx5_ib) in the kernel lab.
package prm
