package hwtest

import (
	"testing"

	"github.com/mlx5go/mlx5go/hwtest/flows"
)

// rdma-core's DC scenarios (tests/test_mlx5_dc.py): DCIs post to DCTs on
// verbs QPs, which need no privilege; the stream reset is a DEVX command,
// so DCStreamRecovery skips without DEVX. The stream flows skip on a
// device without DCI streams, as rdma-core's do.

// TestHWDCTraffic: SEND, RDMA WRITE, RDMA READ and atomics between two
// sides of two DCIs and a DCT each (flows.DCTraffic).
func TestHWDCTraffic(t *testing.T) { flows.DCTraffic(t, OpenConnectX(t)) }

// TestHWDCStreams: RDMA WRITEs rotating the DCIs' stream ids, and bursts
// over every stream with unsignaled work (flows.DCStreams).
func TestHWDCStreams(t *testing.T) { flows.DCStreams(t, OpenConnectX(t)) }

// TestHWDCStreamRecovery: remote access errors on streams, each reset
// while the DCI stays in RTS (flows.DCStreamRecovery).
func TestHWDCStreamRecovery(t *testing.T) { flows.DCStreamRecovery(t, OpenConnectX(t)) }

// TestHWDCQPRecovery: errored streams up to the DCI's limit take it to
// ERR; RESET and RTS bring it back (flows.DCQPRecovery).
func TestHWDCQPRecovery(t *testing.T) { flows.DCQPRecovery(t, OpenConnectX(t)) }

// TestHWDCScale: 4 DCIs of 8 streams reach 256 DCTs for 2 seconds while
// one target after another has its MR revoked and registered again; the
// figures are logged (flows.DCScale).
func TestHWDCScale(t *testing.T) {
	t.Log(flows.DCScale(t, OpenConnectX(t), flows.DCLoad{Seed: 16}))
}
