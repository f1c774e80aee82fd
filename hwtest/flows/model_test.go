package flows_test

import (
	"flag"
	"os"
	"reflect"
	"sync"
	"time"

	"testing"

	"github.com/mlx5go/mlx5go/hwtest/flows"
	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/internal/mlx5hook"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/sig"
)

// onEveryProfile runs flow twice on a context of the software ConnectX of
// every profile, then checks that the flow left no object behind: the
// second run ends with as many objects in the model as the first (what
// remains are the context's own UAR pages, which it keeps for its QPs and
// CQs as libmlx5 does), and closing the context leaves none.
func onEveryProfile(t *testing.T, flow func(*testing.T, *mlx5.Context)) {
	onEveryProfileOpt(t, model.Options{}, flow)
}

// models maps the contexts onEveryProfileOpt opened to their software
// ConnectX, for the flows' model hooks.
var models sync.Map // *mlx5.Context -> *model.Device

// modelOf is the software ConnectX of a context onEveryProfileOpt opened.
func modelOf(c *mlx5.Context) *model.Device {
	dev, _ := models.Load(c)
	return dev.(*model.Device)
}

// onEveryProfileOpt is onEveryProfile on contexts opened with opt.
func onEveryProfileOpt(t *testing.T, opt model.Options, flow func(*testing.T, *mlx5.Context)) {
	for _, p := range model.Profiles() {
		t.Run(p, func(t *testing.T) {
			dev, err := model.NewWithOptions(p, opt)
			if err != nil && opt.Crypto.Wrapped {
				t.Skipf("no wrapped crypto: %v", err) // a profile without a crypto engine
			}
			if err != nil {
				t.Fatal(err)
			}
			c := mlx5hook.NewContext(dev).(*mlx5.Context)
			defer c.Close()
			models.Store(c, dev)
			defer models.Delete(c)
			t.Run("flow", func(t *testing.T) { flow(t, c) })
			shared := dev.Objects()
			t.Run("again", func(t *testing.T) { flow(t, c) })
			if n := dev.Objects(); n != shared {
				t.Errorf("%d objects in the model after the flow ran again, %d after it ran once", n, shared)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if n := dev.Objects(); n != 0 {
				t.Errorf("%d objects left in the model after the context closed", n)
			}
		})
	}
}

// The flows hwtest runs on a ConnectX, run on the software ConnectX, on
// verbs CQs and QPs and on DEVX ones.
func TestDEVXOnModel(t *testing.T)   { onEveryProfile(t, flows.DEVX) }
func TestBasicOnModel(t *testing.T)  { onEachKind(t, flows.Basic) }
func TestT10DIFOnModel(t *testing.T) { onEachKind(t, flows.T10DIF) }

// onEachKind runs flow with each kind of objects on every profile.
func onEachKind(t *testing.T, flow func(*testing.T, *mlx5.Context, flows.Objects)) {
	onEachKindOpt(t, model.Options{}, flow)
}

// onEachKindOpt is onEachKind on contexts opened with opt.
func onEachKindOpt(t *testing.T, opt model.Options, flow func(*testing.T, *mlx5.Context, flows.Objects)) {
	for _, objs := range []flows.Objects{flows.VerbsObjects, flows.DEVXObjects} {
		t.Run(objs.String(), func(t *testing.T) {
			onEveryProfileOpt(t, opt, func(t *testing.T, c *mlx5.Context) { flow(t, c, objs) })
		})
	}
}

// The CRC64_XP10 flow on the model: the model computes sig's default
// CRC64_XP10 parameters with the seed as initial value, so the flow must
// find that candidate (the published set for the all-ones seed, its init-0
// variant for seed 0) through the whole data path: signature mkey, UMR,
// RDMA WRITE, inserted signatures, CQ.
func TestCRC64XP10OnModel(t *testing.T) {
	onEachKind(t, func(t *testing.T, c *mlx5.Context, objs flows.Objects) {
		results := flows.CRC64XP10(t, c, objs)
		if len(results) != 2 {
			t.Fatalf("%d results, want one per seed", len(results))
		}
		for _, r := range results {
			want := sig.DefaultCRC64XP10
			want.Init = r.Seed
			found := false
			for _, m := range r.Matches {
				p := m.Candidate.Params64
				if p.Poly == want.Poly && p.RefIn == want.RefIn && p.RefOut == want.RefOut && p.XorOut == want.XorOut && p.Init == want.Init {
					found = true
				}
			}
			if !found {
				t.Errorf("%v: the model's parameters (%s with init %#x) are not among the matches", r, want.Name, want.Init)
			}
		}
	})
}

// rdma-core's mkey scenarios (tests/test_mlx5_mkey.py).
func TestMkeyLayoutsOnModel(t *testing.T)    { onEachKind(t, flows.MkeyLayouts) }
func TestMkeyPastLayoutOnModel(t *testing.T) { onEachKind(t, flows.MkeyPastLayout) }
func TestT10DIFTrafficOnModel(t *testing.T)  { onEachKind(t, flows.T10DIFTraffic) }
func TestCRCSendOnModel(t *testing.T)        { onEachKind(t, flows.CRCSend) }
func TestSigBadGuardOnModel(t *testing.T)    { onEachKind(t, flows.SigBadGuard) }
func TestManPageCRC32OnModel(t *testing.T)   { onEachKind(t, flows.ManPageCRC32) }

// Signature pipelining (mlx5dv_qp_cancel_posted_send_wrs(3)) on every
// profile, wherever in the window the man page allows the device stops
// (model.Options.SigStop: right after the failing WQE, right before the
// next fenced one, a fixed count between, and by seed): rdma-core's good
// and bad cases, and the target's read path.
func TestPipeliningGoodOnModel(t *testing.T) { onEachStop(t, flows.PipeliningGood) }
func TestPipeliningBadOnModel(t *testing.T)  { onEachStop(t, flows.PipeliningBad) }

// The target's read path: 1,000 reads with about 1 % of the blocks
// corrupted, as on a ConnectX (250 under qemu-user, where the test took
// three minutes), then 1,000 with 5 % so that stops with several failed
// reads and work run past a failure are sure to come. A stop right after
// the failing WQE runs nothing past it and finds one failed read; a stop
// right before the fenced response runs the window whole, and some stop
// finds more than one.
func TestTargetPipelineOnModel(t *testing.T) {
	reads := 1000
	if os.Getenv(labenv.QEMUUserVar) == "1" {
		reads = 250
	}
	onEachStop(t, func(t *testing.T, c *mlx5.Context, objs flows.Objects) {
		flows.TargetPipeline(t, c, objs, flows.TargetLoad{Reads: reads, Seed: 12})
	})
	for _, s := range sigStops {
		t.Run("5%/"+s.name, func(t *testing.T) {
			onEachKindOpt(t, model.Options{SigStop: s.stop}, func(t *testing.T, c *mlx5.Context, objs flows.Objects) {
				st := flows.TargetPipeline(t, c, objs, flows.TargetLoad{Reads: 1000, CorruptPercent: 5, Seed: 15})
				switch s.stop.Policy {
				case model.SigStopEarliest:
					if st.PastFailure != 0 || st.MaxFailed != 1 {
						t.Errorf("stopping right after the failing WQE: %+v; want nothing run past a failure, one failed read per stop", st)
					}
				case model.SigStopLatest:
					if st.PastFailure == 0 || st.MaxFailed < 2 {
						t.Errorf("stopping right before the fenced WQE: %+v; want work run past a failure and a stop with several failed reads", st)
					}
				}
			})
		})
	}
}

// sigStops are the stops the pipelining flows run under.
var sigStops = []struct {
	name string
	stop model.SigStop
}{
	{"earliest", model.SigStop{}},
	{"latest", model.SigStop{Policy: model.SigStopLatest}},
	{"after1", model.SigStop{Policy: model.SigStopAfter, After: 1}},
	{"after3", model.SigStop{Policy: model.SigStopAfter, After: 3}},
	{"seed1", model.SigStop{Policy: model.SigStopSeeded, Seed: 1}},
	{"seed2", model.SigStop{Policy: model.SigStopSeeded, Seed: 2}},
	{"seed3", model.SigStop{Policy: model.SigStopSeeded, Seed: 3}},
}

// onEachStop runs flow under each of sigStops, with each kind of objects
// on every profile.
func onEachStop(t *testing.T, flow func(*testing.T, *mlx5.Context, flows.Objects)) {
	for _, s := range sigStops {
		t.Run(s.name, func(t *testing.T) { onEachKindOpt(t, model.Options{SigStop: s.stop}, flow) })
	}
}

func TestRemoteInvalidateOnModel(t *testing.T) { onEachKind(t, flows.RemoteInvalidate) }

// rdma-core's crypto scenarios (tests/test_mlx5_crypto.py) on every
// profile, each in the two import modes a ConnectX leaves the factory
// with (model.Options.Crypto): plaintext keys, and wrapped keys with a
// credential and import KEK of ID 0 stored. cx5, which has no crypto,
// skips with the reason, and so does the login flow in plaintext mode.
func TestCryptoTrafficOnModel(t *testing.T)      { onCryptoModes(t, flows.CryptoTraffic) }
func TestCryptoSignatureOnModel(t *testing.T)    { onCryptoModes(t, flows.CryptoSignature) }
func TestCryptoWrappedLoginOnModel(t *testing.T) { onCryptoModes(t, flows.CryptoWrappedLogin) }
func TestCryptoDEKLifecycleOnModel(t *testing.T) { onCryptoModes(t, flows.CryptoDEKLifecycle) }
func TestCryptoBadKeytagOnModel(t *testing.T)    { onCryptoModes(t, flows.CryptoBadKeytag) }
func TestCryptoJobSizeOnModel(t *testing.T)      { onCryptoModes(t, flows.CryptoJobSize) }

// The model's crypto officer: the credential and import KEK of ID 0.
var (
	modelCredential = []byte("mlx5go's model credential, 40 bytes long")[:40]
	modelImportKEK  = []byte("an AES-256 import KEK, 32 bytes!")
)

// onCryptoModes runs a crypto flow with each kind of objects on every
// profile, in plaintext mode and in wrapped mode, with the model's hooks.
func onCryptoModes(t *testing.T, flow func(*testing.T, *mlx5.Context, flows.Objects, flows.CryptoSetup)) {
	for _, mode := range []struct {
		name string
		opt  model.CryptoOptions
	}{
		{"plaintext", model.CryptoOptions{}},
		{"wrapped", model.CryptoOptions{Wrapped: true, Credential: modelCredential, ImportKEK: modelImportKEK}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			onEachKindOpt(t, model.Options{Crypto: mode.opt}, func(t *testing.T, c *mlx5.Context, objs flows.Objects) {
				flow(t, c, objs, modelCryptoSetup(c, mode.opt.Wrapped))
			})
		})
	}
}

// modelCryptoSetup is the officer of a wrapped model, and the model's
// hooks: InjectDEKError, and deleting the credential of ID 0 (stored
// again at the test's cleanup).
func modelCryptoSetup(c *mlx5.Context, wrapped bool) flows.CryptoSetup {
	dev := modelOf(c)
	s := flows.CryptoSetup{CorruptDEK: func(t testing.TB, d *mlx5.DEK) {
		if err := dev.InjectDEKError(dekID(d)); err != nil {
			t.Fatal(err)
		}
	}}
	if wrapped {
		s.Officer = &flows.Officer{Credential: modelCredential, ImportKEK: modelImportKEK}
		s.RevokeCredential = func(t testing.TB) {
			if err := dev.DeleteCryptoCredential(0); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := dev.SetCryptoCredential(0, modelCredential); err != nil {
					t.Error(err)
				}
			})
		}
	}
	return s
}

// dekID is d's object number, which the model's InjectDEKError takes and
// mlx5 does not export (a DEK is an opaque handle): read from its field.
func dekID(d *mlx5.DEK) uint32 {
	return uint32(reflect.ValueOf(d).Elem().FieldByName("id").Uint())
}

// rdma-core's DC scenarios (tests/test_mlx5_dc.py) on every profile; the
// stream flows skip on cx5, which has no DCI streams.
func TestDCTrafficOnModel(t *testing.T)        { onEveryProfile(t, flows.DCTraffic) }
func TestDCStreamsOnModel(t *testing.T)        { onEveryProfile(t, flows.DCStreams) }
func TestDCStreamRecoveryOnModel(t *testing.T) { onEveryProfile(t, flows.DCStreamRecovery) }
func TestDCQPRecoveryOnModel(t *testing.T)     { onEveryProfile(t, flows.DCQPRecovery) }

// dcStreamOrders are the model's interleavings of a DCI's stream channels
// the stream flows run under besides the default (in send queue order but
// for channels that wait): seeded, so that completions of different
// streams come out of send queue order (model.Options.DCIStreamOrder).
var dcStreamOrders = []struct {
	name string
	opt  model.Options
}{
	{"seed1", model.Options{DCIStreamOrder: model.DCIStreamOrder{Policy: model.DCIStreamsSeeded, Seed: 1}}},
	{"seed2", model.Options{DCIStreamOrder: model.DCIStreamOrder{Policy: model.DCIStreamsSeeded, Seed: 2}}},
	{"seed3", model.Options{DCIStreamOrder: model.DCIStreamOrder{Policy: model.DCIStreamsSeeded, Seed: 3}}},
}

// The DC flows whose DCIs have streams, under each of dcStreamOrders
// (DCTraffic's DCIs have none: the order cannot change anything there).
func TestDCStreamsInterleavedOnModel(t *testing.T) { onEachStreamOrder(t, flows.DCStreams) }
func TestDCStreamRecoveryInterleavedOnModel(t *testing.T) {
	onEachStreamOrder(t, flows.DCStreamRecovery)
}
func TestDCQPRecoveryInterleavedOnModel(t *testing.T) { onEachStreamOrder(t, flows.DCQPRecovery) }

// onEachStreamOrder runs flow on every profile under each of
// dcStreamOrders.
func onEachStreamOrder(t *testing.T, flow func(*testing.T, *mlx5.Context)) {
	for _, o := range dcStreamOrders {
		t.Run(o.name, func(t *testing.T) { onEveryProfileOpt(t, o.opt, flow) })
	}
}

// The scale scenario's size and how long it posts new work on each
// profile with DCI streams (cx6dx and cx7): a second each in CI, longer
// and larger by hand (go test -race ./hwtest/flows -run DCScale -v
// -dcscale.time 60s -dcscale.dcts 1024).
var (
	dcScaleTime    = flag.Duration("dcscale.time", time.Second, "how long TestDCScaleOnModel posts new work on each profile")
	dcScaleDCTs    = flag.Int("dcscale.dcts", 256, "TestDCScaleOnModel's DCTs")
	dcScaleDCIs    = flag.Int("dcscale.dcis", 4, "TestDCScaleOnModel's DCIs")
	dcScaleStreams = flag.Int("dcscale.logstreams", 3, "TestDCScaleOnModel's streams a DCI, log2")
)

// TestDCScaleOnModel is the scale scenario (flows.DCScale): an initiator
// of 4 DCIs of 8 streams reaches 256 DCTs while one target after another
// has its MR revoked; run once on each profile (cx5 has no DCI streams
// and skips), its figures logged.
func TestDCScaleOnModel(t *testing.T) { dcScaleOnModel(t, model.Options{}, nil) }

// TestDCScaleInterleavedOnModel is TestDCScaleOnModel under each of
// dcStreamOrders: completions of different streams come out of send queue
// order.
func TestDCScaleInterleavedOnModel(t *testing.T) {
	for _, o := range dcStreamOrders {
		t.Run(o.name, func(t *testing.T) {
			dcScaleOnModel(t, o.opt, func(t *testing.T, st flows.DCScaleStats) {
				if st.OutOfOrder == 0 {
					t.Errorf("%v: no completion out of send queue order", st)
				}
			})
		})
	}
}

// TestDCScaleShortRun: a run too short for its chaos to revoke a target
// under load (1 ms: a slow machine, qemu-user, gets as little done in a
// second) goes on making work until it has seen a stream error and a
// reset, which are what it checks.
func TestDCScaleShortRun(t *testing.T) {
	dev, err := model.New("cx7")
	if err != nil {
		t.Fatal(err)
	}
	c := mlx5hook.NewContext(dev).(*mlx5.Context)
	defer c.Close()
	st := flows.DCScale(t, c, flows.DCLoad{Duration: time.Millisecond, DCTs: 64, Seed: 3})
	t.Log(st)
	if st.Errors == 0 || st.Resets == 0 {
		t.Errorf("%v: no stream error or reset", st)
	}
}

// dcScaleOnModel runs the scale scenario once on each profile, on
// contexts opened with opt, and check (if not nil) on its figures.
func dcScaleOnModel(t *testing.T, opt model.Options, check func(*testing.T, flows.DCScaleStats)) {
	for _, p := range model.Profiles() {
		t.Run(p, func(t *testing.T) {
			dev, err := model.NewWithOptions(p, opt)
			if err != nil {
				t.Fatal(err)
			}
			c := mlx5hook.NewContext(dev).(*mlx5.Context)
			defer c.Close()
			t.Run("run", func(t *testing.T) {
				st := flows.DCScale(t, c, flows.DCLoad{Duration: *dcScaleTime, DCTs: *dcScaleDCTs, DCIs: *dcScaleDCIs, LogStreams: *dcScaleStreams, Seed: 16})
				t.Log(st)
				if check != nil {
					check(t, st)
				}
			})
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if n := dev.Objects(); n != 0 {
				t.Errorf("%d objects left in the model after the context closed", n)
			}
		})
	}
}

func TestModelODP(t *testing.T) {
	onEveryProfile(t, func(t *testing.T, c *mlx5.Context) {
		before := modelOf(c).ODPStats()
		flows.ODP(t, c)
		after := modelOf(c).ODPStats()
		if after.Faults <= before.Faults || after.FaultErrors != before.FaultErrors+1 || after.PrefetchedPages <= before.PrefetchedPages {
			t.Errorf("ODP counts went from %+v to %+v: want faults, one fault error and prefetched pages", before, after)
		}
	})
}

// TestRCAtomicsOnModel: RC atomics, their errors, and UC's refusal
// (flows.RCAtomics).
func TestRCAtomicsOnModel(t *testing.T) { onEachKind(t, flows.RCAtomics) }
