package mlx5_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/sig"
)

// profileSigCaps are the signature caps each profile's general caps give
// under libmlx5's rules (docs/MODEL.md, the profiles' table): cx5 lacks
// sigerr_domain_and_sig_type, so it has none; cx6dx and cx7 have sho,
// sigerr_domain_and_sig_type, sig_block_4048, sig_crc32c and
// sig_crc64_xp10, so everything.
var profileSigCaps = map[string]sig.Caps{
	"cx5":   {},
	"cx6dx": {BlockSize: 0x1f, BlockProt: 3, T10DIFBG: 3, CRCType: 7},
	"cx7":   {BlockSize: 0x1f, BlockProt: 3, T10DIFBG: 3, CRCType: 7},
}

// Each profile's caps as derived, read with one QUERY_HCA_CAP per context
// however often they are asked for, on contexts with and without DEVX
// (mlx5_ib runs QUERY_HCA_CAP for both, and libmlx5 reads it on both).
func TestModelSigCaps(t *testing.T) {
	if got := model.Profiles(); !slices.Equal(got, []string{"cx5", "cx6dx", "cx7"}) {
		t.Fatalf("profiles %v: give profileSigCaps the new ones", got)
	}
	for _, p := range model.Profiles() {
		want := profileSigCaps[p]
		m, err := model.New(p)
		if err != nil {
			t.Fatal(err)
		}
		dev := &devxCalls{Device: m}
		c := mlx5.NewContext(dev)
		for range 3 {
			if got, err := c.SigCaps(); err != nil || got != want {
				t.Errorf("%s: SigCaps %+v, %v; want %+v", p, got, err, want)
			}
		}
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		if mk, err := pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true}); (err == nil) != want.Offload() {
			t.Errorf("%s: CreateMkey(BlockSignature): %v; caps %+v", p, err, want)
		} else if err == nil {
			mk.Close()
		}
		calls := dev.took()
		if n := slices.Index(calls, "GeneralCmd"); n < 0 || slices.Index(calls[n+1:], "GeneralCmd") >= 0 {
			t.Errorf("%s: DEVX calls %v, want one GeneralCmd (QUERY_HCA_CAP)", p, calls)
		}
		c.Close()

		nd, _ := onModelNoDEVX(t, p)
		if got, err := nd.SigCaps(); err != nil || got != want {
			t.Errorf("%s without DEVX: SigCaps %+v, %v; want %+v", p, got, err, want)
		}
	}
}

// Can the device protect 4096-byte blocks with T10-DIF and a CRC guard,
// or with CRC64_XP10? Ask its signature caps.
func ExampleContext_SigCaps() {
	for _, profile := range []string{"cx5", "cx7"} {
		c, err := mlx5test.Open(profile)
		if err != nil {
			panic(err)
		}
		caps, err := c.SigCaps()
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: offload %v, T10-DIF/CRC on 4096: %v, CRC64_XP10 on 4096: %v\n", profile, caps.Offload(),
			caps.SupportsT10DIF(sig.T10DIFGuardCRC, sig.BlockSize4096), caps.SupportsCRC(sig.CRCTypeCRC64XP10, sig.BlockSize4096))
		// A whole configuration: nil if the device can do it.
		attr := &sig.BlockAttr{
			Mem:  &sig.Domain{Type: sig.SigTypeCRC, BlockSize: sig.BlockSize4048, CRC: &sig.CRC{Type: sig.CRCTypeCRC32C}},
			Wire: &sig.Domain{Type: sig.SigTypeT10DIF, BlockSize: sig.BlockSize512, T10DIF: &sig.T10DIF{Guard: sig.T10DIFGuardCsum}},
		}
		fmt.Printf("%s: %v\n", profile, caps.Supports(attr))
		c.Close()
	}
	// Output:
	// cx5: offload false, T10-DIF/CRC on 4096: false, CRC64_XP10 on 4096: false
	// cx5: sig: mem.block_size = 0x2: not supported by the device
	// cx7: offload true, T10-DIF/CRC on 4096: true, CRC64_XP10 on 4096: true
	// cx7: <nil>
}
