package prm

import (
	"errors"
	"fmt"
	"sort"
)

// Status is the status byte of a command's output mailbox
// (MLX5_CMD_STAT_*). A Status is also an error, so that a failed command's
// error can be tested with errors.Is(err, prm.MLX5_CMD_STAT_BAD_PARAM_ERR).
type Status uint8

// String returns the status's name without the MLX5_CMD_STAT_ prefix
// ("BAD_PARAM_ERR"), or its value in hex if it has no name.
func (s Status) String() string {
	for _, n := range statusNames {
		if n.Status == s {
			return n.Name
		}
	}
	return fmt.Sprintf("status %#x", uint8(s))
}

func (s Status) Error() string { return "mlx5 command status " + s.String() }

// OpcodeName returns the name of a command opcode without the
// MLX5_CMD_OP_ prefix ("QUERY_HCA_CAP"), or its value in hex.
func OpcodeName(op uint16) string {
	i := sort.Search(len(opcodeNames), func(i int) bool { return opcodeNames[i].Op >= op })
	if i < len(opcodeNames) && opcodeNames[i].Op == op {
		return opcodeNames[i].Name
	}
	return fmt.Sprintf("opcode %#x", op)
}

// CmdError is a firmware command that failed: the command's opcode and
// op_mod from its input mailbox, the status and syndrome from its output
// mailbox. errors.Is(err, s) holds for its Status s.
type CmdError struct {
	Opcode   uint16
	OpMod    uint16
	Status   Status
	Syndrome uint32
}

func (e *CmdError) Error() string {
	return fmt.Sprintf("firmware command %s (opcode %#x, op_mod %#x): %s (%#x), syndrome %#08x",
		OpcodeName(e.Opcode), e.Opcode, e.OpMod, e.Status.String(), uint8(e.Status), e.Syndrome)
}

// Unwrap returns the status.
func (e *CmdError) Unwrap() error { return e.Status }

// ErrMailbox reports a mailbox too short to hold the command header.
var ErrMailbox = errors.New("prm: mailbox shorter than the command header")

// Check returns nil if the output mailbox out reports MLX5_CMD_STAT_OK, and
// otherwise a *CmdError for the command whose input mailbox is in.
func Check(in, out []byte) error {
	if len(in) < 8 || len(out) < 8 {
		return ErrMailbox
	}
	st := Status(MboxOut.Status.Get(out))
	if st == MLX5_CMD_STAT_OK {
		return nil
	}
	return &CmdError{
		Opcode:   uint16(MboxIn.Opcode.Get(in)),
		OpMod:    uint16(MboxIn.OpMod.Get(in)),
		Status:   st,
		Syndrome: uint32(MboxOut.Syndrome.Get(out)),
	}
}

// QueryHCACapOpMod returns QUERY_HCA_CAP's op_mod for a capability type
// (MLX5_CAP_*): the type in bits 15:1, and bit 0 set for the current values
// (HCA_CAP_OPMOD_GET_CUR) rather than the maximum ones.
func QueryHCACapOpMod(capType uint16, cur bool) uint16 {
	m := capType << 1
	if cur {
		m |= HCA_CAP_OPMOD_GET_CUR
	}
	return m
}
