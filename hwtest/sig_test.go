package hwtest

import (
	"testing"

	"github.com/mlx5go/mlx5go/hwtest/flows"
	"github.com/mlx5go/mlx5go/mlx5"
)

// TestHWCRC64XP10 settles CRC64_XP10's parameters (docs/SIG.md): the device
// generates signatures over known blocks with each seed, and exactly one
// candidate parameter set, in one byte order, must explain them all. The
// result is logged; paste it into docs/SIG.md and make it sig's default.
func TestHWCRC64XP10(t *testing.T) {
	c := OpenDEVX(t)
	for _, r := range flows.CRC64XP10(t, c, flows.VerbsObjects) {
		switch len(r.Matches) {
		case 0:
			t.Errorf("CRC64_XP10 is none of sig.Candidates: %v", r)
		case 1:
			t.Logf("settled: %v", r)
		default:
			t.Errorf("CRC64_XP10 not settled, several candidates explain every block: %v", r)
		}
	}
}

// TestHWT10DIF compares the device's T10-DIF insert, strip and check with
// sig's software engine (flows.T10DIF), on verbs QPs and on DEVX ones.
// Signature mkeys are DEVX objects, so both need DEVX.
func TestHWT10DIF(t *testing.T) { devxKinds(t, flows.T10DIF) }

// devxKinds runs flow on verbs QPs and on DEVX ones, on a context with
// DEVX both times (mkeys are DEVX objects).
func devxKinds(t *testing.T, flow func(*testing.T, *mlx5.Context, flows.Objects)) {
	t.Run("verbs", func(t *testing.T) { flow(t, OpenDEVX(t), flows.VerbsObjects) })
	t.Run("devx", func(t *testing.T) { flow(t, OpenDEVX(t), flows.DEVXObjects) })
}

// rdma-core's signature scenarios (tests/test_mlx5_mkey.py) and the
// examples of mlx5dv_wr_set_mkey_sig_block(3), compared with sig's
// software engine.

// TestHWT10DIFTraffic: T10-DIF over SEND (either side's mkey, or both),
// RDMA WRITE and READ, and bad tags found by the receiver and by the
// reader (flows.T10DIFTraffic).
func TestHWT10DIFTraffic(t *testing.T) { devxKinds(t, flows.T10DIFTraffic) }

// TestHWCRCSend: CRC32, CRC32C and CRC64_XP10 on the wire over SEND
// (flows.CRCSend). CRC64_XP10 is compared with sig's default parameters,
// which TestHWCRC64XP10 confirms or refutes.
func TestHWCRCSend(t *testing.T) { devxKinds(t, flows.CRCSend) }

// TestHWSigBadGuard: a CRC32 memory signature that was never generated
// is reported by Mkey.Check as a bad guard (flows.SigBadGuard).
func TestHWSigBadGuard(t *testing.T) { devxKinds(t, flows.SigBadGuard) }

// TestHWManPageCRC32: a SEND from a CRC32 memory domain, and a receive
// into one (flows.ManPageCRC32).
func TestHWManPageCRC32(t *testing.T) { devxKinds(t, flows.ManPageCRC32) }

// Signature pipelining (needs a kernel with SQD to RTS and a verbs QP; the
// DEVX kind skips with the reason): rdma-core's good and bad cases, and a
// target's read path of 1,000 reads with about 1 % of the blocks corrupted.
func TestHWPipeliningGood(t *testing.T) { devxKinds(t, flows.PipeliningGood) }
func TestHWPipeliningBad(t *testing.T)  { devxKinds(t, flows.PipeliningBad) }
func TestHWTargetPipeline(t *testing.T) {
	devxKinds(t, func(t *testing.T, c *mlx5.Context, objs flows.Objects) {
		flows.TargetPipeline(t, c, objs, flows.TargetLoad{Reads: 1000, Seed: 12})
	})
}
