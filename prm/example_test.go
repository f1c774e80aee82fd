package prm_test

import (
	"errors"
	"fmt"

	"github.com/mlx5go/mlx5go/prm"
)

// Build CREATE_MKEY's input for a signature-capable indirect mkey, as
// libmlx5 does for mlx5dv_create_mkey with BLOCK_SIGNATURE (the mkey
// context printed is the one in the oracle's create_cmds.jsonl), and read
// a failed command's status.
func Example() {
	in := prm.CreateMkeyIn.Layout().New()
	prm.CreateMkeyIn.Opcode.Set(in, prm.MLX5_CMD_OP_CREATE_MKEY)

	mkc := prm.CreateMkeyIn.MemoryKeyMkeyEntry // the mkey context inside the mailbox
	prm.Mkc.Free.At(mkc).Set(in, 1)
	prm.Mkc.UmrEn.At(mkc).Set(in, 1)
	prm.Mkc.Lr.At(mkc).Set(in, 1)
	prm.Mkc.AccessMode10.At(mkc).Set(in, 2) // KLM
	prm.Mkc.Qpn.At(mkc).Set(in, 0xffffff)
	prm.Mkc.BsfEn.At(mkc).Set(in, 1)
	prm.Mkc.Pd.At(mkc).Set(in, 0x11)
	prm.Mkc.BsfOctwordSize.At(mkc).Set(in, 4)
	prm.Mkc.TranslationsOctwordSize.At(mkc).Set(in, 4)
	fmt.Printf("% x\n", in[16:48])

	// The firmware's answer: status BAD_PARAM_ERR, syndrome 0x1234abcd.
	out := prm.CreateMkeyOut.Layout().New()
	prm.CreateMkeyOut.Status.Set(out, uint64(prm.MLX5_CMD_STAT_BAD_PARAM_ERR))
	prm.CreateMkeyOut.Syndrome.Set(out, 0x1234abcd)
	err := prm.Check(in, out)
	fmt.Println(err)
	fmt.Println(errors.Is(err, prm.MLX5_CMD_STAT_BAD_PARAM_ERR))
	// Output:
	// 40 00 86 00 ff ff ff 00 00 00 00 00 40 00 00 11 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
	// firmware command CREATE_MKEY (opcode 0x200, op_mod 0x0): BAD_PARAM_ERR (0x3), syndrome 0x1234abcd
	// true
}
