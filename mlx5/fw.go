package mlx5

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// checkOutput turns a DEVX call's result into the caller's error: the
// kernel's error as it is, unless it is EREMOTEIO (the firmware failed)
// or nil, in which case the output mailbox's status decides.
func checkOutput(op string, in, out []byte, err error) error {
	if err != nil && !errors.Is(err, unix.EREMOTEIO) {
		return err // the kernel's, naming the call
	}
	if ferr := firmwareStatus(in, out); ferr != nil {
		if err != nil {
			return fmt.Errorf("mlx5: %s: %w (%w)", op, ferr, err)
		}
		return fmt.Errorf("mlx5: %s: %w", op, ferr)
	}
	return err
}

// FirmwareError is a firmware command that failed: the output mailbox's
// status and syndrome, and the command's opcode and op_mod.
type FirmwareError struct {
	Opcode   uint16
	OpMod    uint16
	Status   uint8
	Syndrome uint32
}

func (e *FirmwareError) Error() string {
	return fmt.Sprintf("firmware command %#x (op_mod %#x): status %#x, syndrome %#08x", e.Opcode, e.OpMod, e.Status, e.Syndrome)
}

// firmwareStatus reads the output mailbox's header: status (byte 0) and
// syndrome (bytes 4-7, big-endian). in, if given, names the command: its
// opcode (bytes 0-1) and op_mod (bytes 6-7).
func firmwareStatus(in, out []byte) error {
	if len(out) < 8 || out[0] == 0 {
		return nil
	}
	e := &FirmwareError{Status: out[0], Syndrome: uint32(out[4])<<24 | uint32(out[5])<<16 | uint32(out[6])<<8 | uint32(out[7])}
	if len(in) >= 8 {
		e.Opcode = uint16(in[0])<<8 | uint16(in[1])
		e.OpMod = uint16(in[6])<<8 | uint16(in[7])
	}
	return e
}
