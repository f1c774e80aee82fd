package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/prm"
	"github.com/mlx5go/mlx5go/sig"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Every capability mlx5probe shows is a field prm declares (and the lab
// checks against the kernel's BTF).
func TestCapGroupsNamePRMFields(t *testing.T) {
	l := prm.CmdHcaCap.Layout()
	for _, g := range capGroups {
		for _, name := range g.Fields {
			if _, ok := l.Field(name); !ok {
				t.Errorf("%s: cmd_hca_cap has no field %q", g.Name, name)
			}
		}
	}
}

func TestHCASectionReadsFields(t *testing.T) {
	caps := make([]byte, l4096)
	prm.CmdHcaCap.LogMaxQp.Set(caps, 17)
	prm.CmdHcaCap.DrainSigerr.Set(caps, 1)
	got := map[string]uint64{}
	for _, g := range hcaSection(caps) {
		for _, c := range g.Caps {
			got[c.Name] = c.Value
		}
	}
	if got["log_max_qp"] != 17 || got["drain_sigerr"] != 1 || got["log_max_cq"] != 0 {
		t.Errorf("read %v", got)
	}
}

const l4096 = 4096

// -sim probes the software ConnectX through the driver, as a real device.
func TestSimProfiles(t *testing.T) {
	for _, p := range model.Profiles() {
		var text, js bytes.Buffer
		if err := run(&text, options{sim: p}); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, want := range []string{"hca_id:\tmodel:" + p, "signature and UMR:", "drain_sigerr:", "log_max_dci_stream_channels:"} {
			if !strings.Contains(text.String(), want) {
				t.Errorf("%s: text output lacks %q", p, want)
			}
		}
		if err := run(&js, options{sim: p, json: true}); err != nil {
			t.Fatal(err)
		}
		var rep report
		if err := json.Unmarshal(js.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Devices) != 1 || len(rep.Devices[0].HCACaps) != len(capGroups) {
			t.Fatalf("%s: JSON %s", p, js.String())
		}
		// What the model's profile says must come out: cx5 has no
		// drain_sigerr, cx6dx and cx7 do (docs/MODEL.md).
		var drain uint64 = 99
		for _, g := range rep.Devices[0].HCACaps {
			for _, c := range g.Caps {
				if c.Name == "drain_sigerr" {
					drain = c.Value
				}
			}
		}
		if want := map[string]uint64{"cx5": 0, "cx6dx": 1, "cx7": 1}[p]; drain != want {
			t.Errorf("%s: drain_sigerr %d, want %d", p, drain, want)
		}
		// mlx5dv_query_device's dci_streams, as the kernel reports them:
		// none on cx5, 2^4/2^2 on cx6dx, 2^6/2^3 on cx7 (docs/MODEL.md).
		ds := rep.Devices[0].DCIStreams
		wantDS := map[string]dciStreamsReport{"cx5": {}, "cx6dx": {4, 2}, "cx7": {6, 3}}[p]
		if ds == nil || *ds != wantDS {
			t.Errorf("%s: dci_streams %+v, want %+v", p, ds, wantDS)
		}
		if !strings.Contains(text.String(), fmt.Sprintf("\tdci_streams (mlx5dv_query_device):\n\t\tmax_log_num_concurent:\t%d\n\t\tmax_log_num_errored:\t%d\n",
			wantDS.MaxLogNumConcurent, wantDS.MaxLogNumErrored)) {
			t.Errorf("%s: text output lacks dci_streams %+v", p, wantDS)
		}
		// The signature caps libmlx5 derives from them: none on cx5
		// (no sigerr_domain_and_sig_type), all on cx6dx and cx7.
		sc := rep.Devices[0].SigCaps
		want := map[string][4]uint64{"cx5": {}, "cx6dx": {0x1f, 3, 3, 7}, "cx7": {0x1f, 3, 3, 7}}[p]
		if sc == nil || [4]uint64{sc.BlockSize.Value, sc.BlockProt.Value, sc.T10DIFBG.Value, sc.CRCType.Value} != want {
			t.Errorf("%s: sig_caps %+v, want %#x", p, sc, want)
		}
	}
	if err := run(io.Discard, options{sim: "cx1"}); err == nil {
		t.Error("-sim cx1: no error for an unknown profile")
	}
}

// The signature caps are printed with mlx5dv.h's names, in bit order, and
// the bits no name covers; a zero field says NO SUPPORT.
func TestSigCapsSection(t *testing.T) {
	s := sigCapsSection(sig.Caps{BlockSize: 1<<sig.BlockSize512 | 1<<sig.BlockSize4096 | 1<<9, BlockProt: 1 << sig.SigTypeCRC,
		CRCType: 1<<sig.CRCTypeCRC32 | 1<<sig.CRCTypeCRC64XP10})
	want := sigCapsReport{
		BlockSize: flags{Value: 0x209, Names: []string{"MLX5DV_BLOCK_SIZE_CAP_512", "MLX5DV_BLOCK_SIZE_CAP_4096"}, Unknown: 0x200},
		BlockProt: flags{Value: 2, Names: []string{"MLX5DV_SIG_PROT_CAP_CRC"}},
		T10DIFBG:  flags{Value: 0, Names: []string{}},
		CRCType:   flags{Value: 5, Names: []string{"MLX5DV_SIG_CRC_TYPE_CAP_CRC32", "MLX5DV_SIG_CRC_TYPE_CAP_CRC64_XP10"}},
	}
	checkSection(t, "sigCapsSection", s, want, writeSigCaps,
		"\tsig_caps (mlx5dv_query_device):\n"+
			"\t\tblock_size:\t\t0x209\n\t\t\t\t\tMLX5DV_BLOCK_SIZE_CAP_512\n\t\t\t\t\tMLX5DV_BLOCK_SIZE_CAP_4096\n\t\t\t\t\tUnknown flags: 0x200\n"+
			"\t\tblock_prot:\t\t0x2\n\t\t\t\t\tMLX5DV_SIG_PROT_CAP_CRC\n"+
			"\t\tt10dif_bg:\t\t0x0\n\t\t\t\t\tNO SUPPORT\n"+
			"\t\tcrc_type:\t\t0x5\n\t\t\t\t\tMLX5DV_SIG_CRC_TYPE_CAP_CRC32\n\t\t\t\t\tMLX5DV_SIG_CRC_TYPE_CAP_CRC64_XP10\n",
		`{"block_size":{"value":521,"names":["MLX5DV_BLOCK_SIZE_CAP_512","MLX5DV_BLOCK_SIZE_CAP_4096"],"unknown":512},`+
			`"block_prot":{"value":2,"names":["MLX5DV_SIG_PROT_CAP_CRC"]},"t10dif_bg":{"value":0,"names":[]},`+
			`"crc_type":{"value":5,"names":["MLX5DV_SIG_CRC_TYPE_CAP_CRC32","MLX5DV_SIG_CRC_TYPE_CAP_CRC64_XP10"]}}`)
	// Each name's bit is 1 << the value of the enum it names, as mlx5dv.h
	// defines the *_CAP_* enums.
	for _, tb := range []struct {
		table []flagBit
		enum  []string
	}{
		{sigBlockSizeCaps, []string{"512", "520", "4048", "4096", "4160"}},
		{sigProtCaps, []string{"T10DIF", "CRC"}},
		{sigT10DIFBGCaps, []string{"CRC", "CSUM"}},
		{sigCRCTypeCaps, []string{"CRC32", "CRC32C", "CRC64_XP10"}},
	} {
		for i, b := range tb.table {
			if b.bit != 1<<i || !strings.HasSuffix(b.name, "_CAP_"+tb.enum[i]) {
				t.Errorf("%s: bit %#x, want 1<<%d named ..._CAP_%s", b.name, b.bit, i, tb.enum[i])
			}
		}
	}
}

// The whole -sim output of every profile, text and JSON, against golden
// files (go test ./cmd/mlx5probe -update rewrites them).
func TestSimGolden(t *testing.T) {
	for _, p := range model.Profiles() {
		for _, js := range []bool{false, true} {
			var b bytes.Buffer
			if err := run(&b, options{sim: p, json: js}); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			name := filepath.Join("testdata", "sim_"+p+map[bool]string{false: ".txt", true: ".json"}[js])
			if *update {
				if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("mlx5probe -sim %s (json %v) differs from %s:\n%s", p, js, name, b.String())
			}
		}
	}
}

// The crypto caps are printed as the signature caps are, with mlx5dv.h's
// names (whose values are mlx5's); the numbers as numbers.
func TestCryptoCapsSection(t *testing.T) {
	s := cryptoCapsSection(mlx5.CryptoCaps{FailedSelfTests: 0x11, Engines: mlx5.CryptoEngineAESXTSSingleBlock | mlx5.CryptoEngineAESXTSMultiBlock,
		LogMaxDEKs: 20, Flags: mlx5.CryptoFlagCrypto | mlx5.CryptoFlagWrappedOperational | 1<<5})
	want := cryptoCapsReport{
		FailedSelfTests:     0x11,
		CryptoEngines:       flags{Value: 6, Names: []string{"MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_SINGLE_BLOCK", "MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_MULTI_BLOCK"}},
		WrappedImportMethod: flags{Value: 0, Names: []string{}},
		LogMaxNumDEKs:       20,
		Flags:               flags{Value: 0x23, Names: []string{"MLX5DV_CRYPTO_CAPS_CRYPTO", "MLX5DV_CRYPTO_CAPS_WRAPPED_CRYPTO_OPERATIONAL"}, Unknown: 0x20},
	}
	checkSection(t, "cryptoCapsSection", s, want, writeCryptoCaps,
		"\tcrypto_caps (mlx5dv_query_device):\n"+
			"\t\tfailed_selftests:\t0x11\n"+
			"\t\tcrypto_engines:\t\t0x6\n\t\t\t\t\tMLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_SINGLE_BLOCK\n\t\t\t\t\tMLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_MULTI_BLOCK\n"+
			"\t\twrapped_import_method:\t0x0\n\t\t\t\t\tNO SUPPORT\n"+
			"\t\tlog_max_num_deks:\t20\n"+
			"\t\tflags:\t\t\t0x23\n\t\t\t\t\tMLX5DV_CRYPTO_CAPS_CRYPTO\n\t\t\t\t\tMLX5DV_CRYPTO_CAPS_WRAPPED_CRYPTO_OPERATIONAL\n\t\t\t\t\tUnknown flags: 0x20\n",
		`{"failed_selftests":17,"crypto_engines":{"value":6,"names":["MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_SINGLE_BLOCK","MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_MULTI_BLOCK"]},`+
			`"wrapped_import_method":{"value":0,"names":[]},"log_max_num_deks":20,`+
			`"flags":{"value":35,"names":["MLX5DV_CRYPTO_CAPS_CRYPTO","MLX5DV_CRYPTO_CAPS_WRAPPED_CRYPTO_OPERATIONAL"],"unknown":32}}`)
	for _, tb := range [][]flagBit{cryptoEngineCaps, cryptoWrappedImportCaps, cryptoFlagCaps} {
		for i, b := range tb {
			if b.bit != 1<<i {
				t.Errorf("%s: bit %#x, want 1<<%d as mlx5dv.h", b.name, b.bit, i)
			}
		}
	}
}

// checkSection compares a caps section with want, the text write prints
// of it with wantText, and its JSON with wantJSON.
func checkSection[S any](t *testing.T, name string, s *S, want S, write func(*textWriter, *S), wantText, wantJSON string) {
	t.Helper()
	if !reflect.DeepEqual(*s, want) {
		t.Errorf("%s = %+v\nwant %+v", name, *s, want)
	}
	var b bytes.Buffer
	write(&textWriter{w: &b}, s)
	if b.String() != wantText {
		t.Errorf("%s: text\n%q\nwant\n%q", name, b.String(), wantText)
	}
	js, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(js) != wantJSON {
		t.Errorf("%s: JSON %s\nwant %s", name, js, wantJSON)
	}
}
