// Package pyverbs runs rdma-core's own programs and tests (ibv_devinfo,
// libibverbs + libmlx5 from C, pyverbs) on the software ConnectX of
// package model, through the bridge: the command in ./bridge (pure Go),
// which runs the program with the C shim in ./shim preloaded. It is a
// module of its own, so that the main module's go test ./... does not
// build the shim or need rdma-core.
package pyverbs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var profiles = []string{"cx5", "cx6dx", "cx7"}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// tools builds the bridge (pure Go) and the shim (C, with gcc) once per
// test binary, and returns their paths.
func tools(t *testing.T) (bridge, shim string) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("the shim is C, and gcc is not installed: apt-get install gcc")
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "mlx5bridge")
		if buildErr != nil {
			return
		}
		for _, c := range [][]string{
			{"go", "build", "-ldflags=-T=0x300000001000", "-o", filepath.Join(buildDir, "bridge"), "./bridge"},
			{"gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-shared", "-fPIC", "-pthread",
				"-o", filepath.Join(buildDir, "mlx5bshim.so"), "shim/mlx5bshim.c", "-ldl"},
		} {
			cmd := exec.Command(c[0], c[1:]...)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = &buildError{c[0], err, out}
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "bridge"), filepath.Join(buildDir, "mlx5bshim.so")
}

type buildError struct {
	tool string
	err  error
	out  []byte
}

func (e *buildError) Error() string { return e.tool + ": " + e.err.Error() + "\n" + string(e.out) }

// need skips unless the tools exist.
func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, x := range tools {
		if _, err := os.Stat(x); err != nil {
			if _, err := exec.LookPath(x); err != nil {
				t.Skipf("%s is not installed (Debian: apt-get install ibverbs-utils libibverbs-dev ibverbs-providers python3-pyverbs)", x)
			}
		}
	}
}

// run runs a program with the bridge preloaded on the given profile and
// returns its output; a failure or a run over the deadline fails t.
func run(t *testing.T, profile string, dir string, args ...string) string {
	t.Helper()
	bridge, shim := tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bridge, append([]string{"-profile", profile, "-shim", shim, "--"}, args...)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s on %s: %v\n%s", strings.Join(args, " "), profile, err, out.String())
	}
	return out.String()
}

func TestIbvDevices(t *testing.T) {
	need(t, "ibv_devices")
	for _, p := range profiles {
		out := run(t, p, "", "ibv_devices")
		if !strings.Contains(out, "mlx5_0") {
			t.Errorf("%s: ibv_devices does not list mlx5_0:\n%s", p, out)
		}
	}
}

// TestIbvDevinfo checks what ibv_devinfo -v prints against the model's
// profile: the part number, the port and its RoCE GIDs.
func TestIbvDevinfo(t *testing.T) {
	need(t, "ibv_devinfo")
	parts := map[string]string{"cx5": "4119", "cx6dx": "4125", "cx7": "4129"}
	for _, p := range profiles {
		out := run(t, p, "", "ibv_devinfo", "-v")
		for _, want := range []string{
			"hca_id:\tmlx5_0",
			"vendor_part_id:\t\t\t" + parts[p],
			"board_id:\t\t\tMLX5GO_MODEL_" + strings.ToUpper(p),
			"max_qp:\t\t\t\t262144",
			"state:\t\t\tPORT_ACTIVE (4)",
			"link_layer:\t\tEthernet",
			"RoCE v2",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: ibv_devinfo -v lacks %q:\n%s", p, want, out)
			}
		}
	}
}

// TestLoopback builds testdata/loopback.c against the installed
// libibverbs and runs it: two RC QPs connected to each other, an RDMA
// WRITE and a SEND with a completion event, moved by the model.
func TestLoopback(t *testing.T) {
	need(t, "/usr/include/infiniband/verbs.h", "/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so")
	bin := filepath.Join(t.TempDir(), "loopback")
	if out, err := exec.Command("gcc", "-O1", "-Wall", "-Werror", "-o", bin, "testdata/loopback.c", "-libverbs").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	for _, p := range profiles {
		out := run(t, p, "", bin)
		if !strings.HasSuffix(out, "ok\n") || !strings.Contains(out, "rdma write 4096 bytes: ok") {
			t.Errorf("%s: loopback:\n%s", p, out)
		}
	}
}

// green are the rdma-core test files that run on the model with no
// failure and no error (README.md, "Results"): TestSuite keeps them so.
var green = []string{"test_device", "test_pd", "test_cq_events", "test_qp", "test_mlx5_mkey",
	"test_mlx5_uar", "test_cqex", "test_mlx5_cq", "test_mlx5_raw_wqe", "test_mr", "test_mlx5_dc", "test_cq", "test_mlx5_devx",
	"test_qpex", "test_atomic", "test_odp", "test_mlx5_huge_page", "test_addr", "test_mlx5_timestamp",
	"test_parent_domain", "test_relaxed_ordering", "test_fork", "test_shared_pd"}

// skipping are the files whose every test skips on the model, each for
// its own reason (TestSuite logs them): no failure and no error either.
var skipping = []string{"test_rdmacm", "test_mlx5_rdmacm", "test_cuda_dmabuf",
	"test_mlx5_cuda_umem", "test_flow", "test_efa_srd", "test_efadv", "test_mlx5_dma_memcpy",
	"test_mlx5_lag_affinity", "test_mlx5_pp", "test_mlx5_query_port", "test_mlx5_sched",
	"test_mlx5_udp_sport", "test_mlx5_var", "test_mlx5_vfio", "test_rss_traffic", "test_tag_matching",
	"test_mlx5_dm_ops", "test_mlx5_dr", "test_mlx5_flow"}

// greenOn are green files on the profiles named, and skipping ones on the
// others: test_mlx5_crypto needs an AES-XTS engine (cx6dx and cx7; cx5
// has none), and runs once in each import mode (run_suite.sh's
// FILE:wrapped), so that every test of it runs on one or the other.
var greenOn = map[string][]string{
	"test_mlx5_crypto":         {"cx6dx", "cx7"},
	"test_mlx5_crypto:wrapped": {"cx6dx", "cx7"},
}

// knownErrors are the files that still end in errors, each with why
// (docs/MODEL.md, "rdma-core's suite on the model"). TestSuite runs and
// logs them, and fails once one is clean, so that it moves to green.
var knownErrors = map[string]string{}

// TestSuite runs rdma-core's own tests (Debian's python3-pyverbs) on the
// model, one process per file (run_suite.sh), and fails on any failure or
// error in the files of green.
func TestSuite(t *testing.T) {
	need(t, "/usr/bin/python3", "/usr/share/doc/rdma-core/tests/run_tests.py")
	if testing.Short() {
		t.Skip("the suite takes about a minute per profile")
	}
	bridge, shim := tools(t)
	var known []string
	for f := range knownErrors {
		known = append(known, f)
	}
	sort.Strings(known)
	for _, p := range []string{"cx5", "cx6dx", "cx7"} {
		t.Run(p, func(t *testing.T) {
			g, s := green, skipping
			for f, on := range greenOn {
				if slices.Contains(on, p) {
					g = append(slices.Clip(g), f)
				} else {
					s = append(slices.Clip(s), f)
				}
			}
			runSuite(t, bridge, shim, p, g, true)
			runSuite(t, bridge, shim, p, s, false)
			if len(known) > 0 {
				runSuite(t, bridge, shim, p, known, false)
			}
		})
	}
}

// runSuite runs the files on profile p and logs, per file, its counts
// and the reason of each skip. A file that fails or errors fails the
// test, unless knownErrors says why (and then a clean one fails it); so
// does one of a list that must pass (mustPass) and passes nothing.
func runSuite(t *testing.T, bridge, shim, p string, files []string, mustPass bool) {
	cmd := exec.Command("./run_suite.sh", append([]string{bridge, shim, p}, files...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run_suite.sh: %v\n%s", err, out)
	}
	var file string
	seen := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "test_") {
			t.Logf("%s", line)
			seen++
			f := strings.Fields(line)
			file = f[0]
			// FILE rc RC ran N passed P failed F errors E skipped S
			clean := len(f) == 13 && f[2] == "0" && f[8] == "0" && f[10] == "0"
			switch why, known := knownErrors[file]; {
			case known && clean:
				t.Errorf("%s: %s: clean now (known error: %s); move it out of knownErrors", p, line, why)
			case known:
				t.Logf("  %s: known error: %s", file, why)
			case !clean || mustPass && f[6] == "0":
				t.Errorf("%s: %s\n%s", p, line, out)
			}
			continue
		}
		if i := strings.Index(line, "... skipped "); i >= 0 {
			name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
			t.Logf("  %s %s: skipped %s", file, name, line[i+len("... skipped "):])
		}
	}
	if seen != len(files) {
		t.Errorf("%s: run_suite.sh reported %d files of %d\n%s", p, seen, len(files), out)
	}
}

// TestProgramDiesWithBridge: a program whose bridge is killed (a
// timeout's SIGKILL) is killed too, rather than left running without its
// device.
func TestProgramDiesWithBridge(t *testing.T) {
	bridge, shim := tools(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command(bridge, "-shim", shim, "--", "sh", "-c", `echo $$ > "$0"; exec sleep 60`, pidFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	for deadline := time.Now().Add(30 * time.Second); pid == 0; {
		if b, err := os.ReadFile(pidFile); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the program did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	for deadline := time.Now().Add(30 * time.Second); ; {
		// Signal 0 finds the process; a zombie of the sh's parent (the
		// bridge, gone) is reaped by init.
		if err := syscall.Kill(pid, 0); err != nil {
			return
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && bytes.Contains(b, []byte(") Z ")) {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the program (pid %d) outlived its bridge", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
