// Command lab is the kernel lab: it boots a Debian kernel under QEMU with
// ib_uverbs, rdma_rxe, mlx5_core and mlx5_ib loaded and an rxe device up,
// runs the project's lab tests inside it, streams their output and exits
// non-zero if any test fails or the machine does not come up.
//
//	go run ./hwtest/lab                      # Debian 12's kernel, every package with TestLab*/BenchmarkLab*
//	go run ./hwtest/lab -kernel trixie       # Debian 13's kernel
//	go run ./hwtest/lab -kernel all          # bookworm, trixie and sid, one after the other
//	go run ./hwtest/lab ./uverbs             # only these packages
//	go run ./hwtest/lab -run TestLabBTF      # a subset of the lab tests
//
// Lab tests are the functions named TestLab* and BenchmarkLab*; outside the
// lab they skip (internal/labenv). A kernel is chosen by Debian suite: the
// one the suite's linux-image-amd64 depends on today (internal/lab/kernel),
// downloaded once and cached with the initramfs modules archive under the
// user cache directory (see -cache), so a warm run needs no network. See
// docs/LAB.md.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/mlx5go/mlx5go/internal/lab/cpio"
	"github.com/mlx5go/mlx5go/internal/lab/kernel"
	"github.com/mlx5go/mlx5go/internal/lab/proto"
	"github.com/mlx5go/mlx5go/internal/labenv"
)

// Modules the lab loads, in this order (dependencies are added from each
// module's .modinfo). rdma_ucm is the RDMA connection manager's
// /dev/infiniband/rdma_cm (with rdma_cm, ib_cm and iw_cm). crc32_generic must precede rdma_rxe, which needs the
// crc32 crypto algorithm to add a link but does not declare it.
// "a|b" loads the first of the two the kernel has: crc32_generic became
// crc32_cryptoapi in 6.15 (where rdma_rxe no longer needs it).
var labModules = []string{
	"crc32_generic|crc32_cryptoapi", "ib_core", "ib_uverbs", "udp_tunnel", "ip6_udp_tunnel", "rdma_rxe", "dummy",
	"mlxfw", "psample", "pci-hyperv-intf", "mlx5_core", "mlx5_ib", "rdma_ucm",
}

// The guest's network: a dummy netdev with an address from TEST-NET-1
// (RFC 5737). The VM has no NIC, so nothing leaves it.
const labAddress = "192.0.2.1/24"

type config struct {
	accel, cache, run, bench, benchtime string
	kernels                             []kernel.Choice
	timeout                             time.Duration
	memMB                               int
	quiet, keep                         bool
	pkgs                                []string
}

func main() {
	var c config
	defaultAccel := os.Getenv("MLX5GO_LAB_ACCEL")
	if defaultAccel == "" {
		defaultAccel = "tcg"
	}
	defaultCache := kernel.DefaultCache()
	defaultKernel := os.Getenv("MLX5GO_LAB_KERNEL")
	if defaultKernel == "" {
		defaultKernel = "bookworm"
	}
	kernels := flag.String("kernel", defaultKernel, "kernels to boot, comma-separated: a Debian suite (bookworm, trixie, sid), linux-image-ABI[=VERSION], SUITE/linux-image-ABI[=VERSION], or all for "+strings.Join(kernel.Suites, ",")+" (env MLX5GO_LAB_KERNEL)")
	flag.StringVar(&c.accel, "accel", defaultAccel, "QEMU accelerator: tcg, or kvm where it works (env MLX5GO_LAB_ACCEL)")
	flag.StringVar(&c.cache, "cache", defaultCache, "cache for kernels and module archives (env MLX5GO_LAB_CACHE)")
	flag.StringVar(&c.run, "run", "^TestLab", "test name pattern passed to every lab binary as -test.run")
	flag.StringVar(&c.bench, "bench", "^BenchmarkLab", "benchmark pattern passed as -test.bench (empty: none)")
	flag.StringVar(&c.benchtime, "benchtime", "500ms", "passed as -test.benchtime")
	flag.DurationVar(&c.timeout, "timeout", 20*time.Minute, "limit for the whole VM run")
	flag.IntVar(&c.memMB, "m", 1024, "guest memory in MiB")
	flag.BoolVar(&c.quiet, "q", false, "print only set-up steps, the output of failed binaries and the summary")
	flag.BoolVar(&c.keep, "keep", false, "keep the work directory (initramfs, console log)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./hwtest/lab [flags] [packages]\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	c.pkgs = flag.Args()
	var err error
	if c.kernels, err = parseKernels(*kernels); err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(2)
	}
	if len(c.pkgs) == 0 {
		c.pkgs = []string{"./..."}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, c)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// parseKernels parses -kernel: a comma-separated list of choices, "all"
// standing for the matrix.
func parseKernels(list string) ([]kernel.Choice, error) {
	var out []kernel.Choice
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "all" {
			for _, suite := range kernel.Suites {
				out = append(out, kernel.Choice{Suite: suite})
			}
			continue
		}
		ch, err := kernel.ParseChoice(s)
		if err != nil {
			return nil, err
		}
		out = append(out, ch)
	}
	return out, nil
}

// kernelResult is one kernel's run, for the closing summary.
type kernelResult struct {
	name                    string
	passed, failed, skipped int
	took                    time.Duration
	err                     error
}

func run(ctx context.Context, c config) error {
	start := time.Now()
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return errors.New("lab: qemu-system-x86_64 not found: install it with `apt-get install -y qemu-system-x86` (the README's test command does this)")
	}
	if c.accel != "tcg" && c.accel != "kvm" {
		return fmt.Errorf("lab: -accel %q: want tcg or kvm", c.accel)
	}
	if len(c.kernels) == 0 {
		c.kernels = []kernel.Choice{{Suite: kernel.Suites[0]}}
	}
	work, err := os.MkdirTemp("", "mlx5go-lab-")
	if err != nil {
		return err
	}
	if c.keep {
		logf("lab: work directory %s", work)
	} else {
		defer os.RemoveAll(work)
	}
	pkgs, err := labPackages(ctx, c.pkgs)
	if err != nil {
		return err
	}
	if len(pkgs) == 0 {
		return fmt.Errorf("lab: no package in %v has TestLab or BenchmarkLab functions", c.pkgs)
	}
	bins, err := buildBinaries(ctx, c, work, pkgs)
	if err != nil {
		return err
	}
	logf("lab: built %d test binaries in %.1fs", len(pkgs), time.Since(start).Seconds())

	var results []kernelResult
	for i, ch := range c.kernels {
		kstart := time.Now()
		dir := filepath.Join(work, fmt.Sprintf("k%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		r := runKernel(ctx, c, qemu, ch, bins, dir)
		r.took = time.Since(kstart)
		if r.err != nil {
			logf("%v", r.err)
		}
		results = append(results, r)
		if ctx.Err() != nil {
			break
		}
	}
	return matrixSummary(results, time.Since(start))
}

// runKernel resolves one kernel, boots it with the test binaries and
// reports what ran.
func runKernel(ctx context.Context, c config, qemu string, ch kernel.Choice, bins []proto.Binary, work string) kernelResult {
	res := kernelResult{name: ch.String()}
	start := time.Now()
	k, err := kernel.Resolve(ctx, c.cache, ch, logf)
	if err != nil {
		res.err = err
		return res
	}
	res.name = k.String()
	logf("lab: kernel %s", k)
	modArchive, modPaths, err := modulesArchive(k)
	if err != nil {
		res.err = fmt.Errorf("lab: %s: %w", k, err)
		return res
	}
	userArchive, userPkgs, err := userlandArchive(ctx, c, k)
	if err != nil {
		res.err = fmt.Errorf("lab: %s: %w", k, err)
		return res
	}
	logf("lab: userland %s", strings.Join(userPkgs, " "))
	runArchive := filepath.Join(work, "run.cpio")
	if err := writeRunArchive(runArchive, k, bins, modPaths); err != nil {
		res.err = err
		return res
	}
	initrd := filepath.Join(work, "initrd")
	if err := concat(initrd, modArchive, userArchive, runArchive); err != nil {
		res.err = err
		return res
	}
	logf("lab: %s prepared in %.1fs; booting (%s, %d binaries)", k.Release, time.Since(start).Seconds(), c.accel, len(bins))

	rep, err := boot(ctx, c, qemu, k, initrd, work)
	if err != nil {
		res.err = fmt.Errorf("%w (kernel %s)", err, k)
		return res
	}
	if c.quiet {
		// Quiet runs still show everything a failed binary said.
		for _, b := range rep.Binaries {
			if !b.Ended || b.Exit != 0 {
				for _, line := range b.Output {
					fmt.Printf("[%s] %s\n", b.Name, line)
				}
			}
		}
	}
	res.passed, res.failed, res.skipped = summary(k, rep)
	if err := rep.Err(); err != nil {
		if !rep.Done || len(rep.Binaries) == 0 {
			showConsole(filepath.Join(work, "console.log"))
		}
		res.err = fmt.Errorf("%w (kernel %s)", err, k)
		return res
	}
	for _, b := range rep.Binaries {
		if b.Passed == 0 && b.Failed == 0 {
			res.err = fmt.Errorf("lab: %s ran no test on %s (pattern %q matched nothing?)", b.Name, k, c.run)
			return res
		}
	}
	return res
}

// matrixSummary prints one line per kernel and the plain closing line CI
// reads, and fails if any kernel failed.
func matrixSummary(results []kernelResult, took time.Duration) error {
	var passed, failed, skipped int
	var bad []string
	if len(results) > 1 {
		fmt.Println("lab kernels:")
	}
	for _, r := range results {
		passed += r.passed
		failed += r.failed
		skipped += r.skipped
		status := "PASS"
		if r.err != nil {
			status = "FAIL"
			bad = append(bad, r.name)
		}
		if len(results) > 1 {
			fmt.Printf("  %-4s %-60s %3d passed %3d failed %3d skipped  %6.1fs\n", status, r.name, r.passed, r.failed, r.skipped, r.took.Seconds())
		}
	}
	fmt.Printf("lab: %d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if len(bad) > 0 {
		return fmt.Errorf("lab: FAIL on %s", strings.Join(bad, "; "))
	}
	logf("lab: PASS in %.1fs", took.Seconds())
	return nil
}

// modulesArchive returns a cpio of the modules the lab loads, cached next
// to the kernel and keyed on the module list, and their in-guest paths.
func modulesArchive(k *kernel.Kernel) (string, []string, error) {
	mods, builtin, err := k.ModuleOrder(labModules)
	if err != nil {
		return "", nil, fmt.Errorf("resolve modules: %w", err)
	}
	if len(builtin) > 0 {
		logf("lab: built into %s: %s", k.Release, strings.Join(builtin, " "))
	}
	guest := make([]string, len(mods))
	rels := make([]string, len(mods))
	for i, m := range mods {
		guest[i] = "/lib/modules/" + k.Release + "/" + filepath.ToSlash(m.Rel)
		rels[i] = m.Rel
	}
	sum := sha256.Sum256([]byte("cpio-v1\n" + strings.Join(rels, "\n")))
	path := filepath.Join(k.Root, "lab-modules-"+hex.EncodeToString(sum[:8])+".cpio")
	if _, err := os.Stat(path); err == nil {
		return path, guest, nil
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", nil, err
	}
	w := cpio.NewWriter(f)
	for i, m := range mods {
		if err := w.File(guest[i], 0o644, m.Path); err != nil {
			f.Close()
			return "", nil, err
		}
	}
	if err := w.Close(); err != nil {
		f.Close()
		return "", nil, err
	}
	if err := f.Close(); err != nil {
		return "", nil, err
	}
	return path, guest, os.Rename(tmp, path)
}

type labPkg struct {
	ImportPath, Dir, Name string
}

var labFuncRE = regexp.MustCompile(`(?m)^func (TestLab|BenchmarkLab)\w*\(`)

// labPackages lists the packages matching patterns that declare lab tests.
func labPackages(ctx context.Context, patterns []string) ([]labPkg, error) {
	mod, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Path}}").Output()
	if err != nil {
		return nil, fmt.Errorf("lab: go list -m: %w", err)
	}
	modPath := strings.TrimSpace(string(mod))
	args := append([]string{"list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .TestGoFiles \",\"}},{{join .XTestGoFiles \",\"}}"}, patterns...)
	out, err := exec.CommandContext(ctx, "go", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("lab: go list %v: %w", patterns, err)
	}
	var pkgs []labPkg
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			continue
		}
		has := false
		for _, file := range strings.Split(f[2], ",") {
			if file == "" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(f[1], file))
			if err != nil {
				return nil, err
			}
			if labFuncRE.Match(b) {
				has = true
				break
			}
		}
		if !has {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(f[0], modPath), "/")
		if rel == "" {
			rel = "root"
		}
		pkgs = append(pkgs, labPkg{ImportPath: f[0], Dir: f[1], Name: rel})
	}
	return pkgs, nil
}

func goBuild(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("lab: go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// buildBinaries builds the guest init and one test binary per package,
// once for every kernel of the run.
func buildBinaries(ctx context.Context, c config, work string, pkgs []labPkg) ([]proto.Binary, error) {
	initBin := filepath.Join(work, "init")
	if err := goBuild(ctx, "build", "-o", initBin, "github.com/mlx5go/mlx5go/hwtest/lab/guest"); err != nil {
		return nil, err
	}
	var bins []proto.Binary
	for _, p := range pkgs {
		bin := filepath.Join(work, strings.ReplaceAll(p.Name, "/", "-")+".test")
		if err := goBuild(ctx, "test", "-c", "-o", bin, p.ImportPath); err != nil {
			return nil, err
		}
		args := []string{"-test.v", "-test.run", c.run, "-test.timeout", "10m"}
		if c.bench != "" {
			args = append(args, "-test.bench", c.bench, "-test.benchmem", "-test.benchtime", c.benchtime)
		}
		bins = append(bins, proto.Binary{Name: p.Name, Path: bin, Dir: p.Dir, Args: args})
	}
	return bins, nil
}

// writeRunArchive writes the per-run archive: /init, /dev/console, the
// manifest, the test binaries and each package's testdata. bins hold host
// paths (Path: the binary, Dir: the package directory).
func writeRunArchive(dst string, k *kernel.Kernel, bins []proto.Binary, modules []string) error {
	m := proto.Manifest{
		Modules: modules,
		Netdev:  labenv.Netdev,
		Address: labAddress,
		RXE:     labenv.RXEDevice,
		Env:     []string{labenv.EnvVar + "=1"},
		Release: k.Release,
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	w := cpio.NewWriter(f)
	w.CharDev("dev/console", 0o600, 5, 1)
	for _, d := range []string{"proc", "sys", "tmp", "run"} {
		w.Dir(d, 0o755)
	}
	initBin := filepath.Join(filepath.Dir(bins[0].Path), "init")
	if err := w.File("init", 0o755, initBin); err != nil {
		return err
	}
	for _, b := range bins {
		guestBin := "/lab/bin/" + filepath.Base(b.Path)
		if err := w.File(guestBin, 0o755, b.Path); err != nil {
			return err
		}
		dir := "/lab/src/" + b.Name
		w.Dir(dir, 0o755)
		if err := addTree(w, filepath.Join(b.Dir, "testdata"), dir+"/testdata"); err != nil {
			return err
		}
		m.Binaries = append(m.Binaries, proto.Binary{Name: b.Name, Path: guestBin, Dir: dir, Args: b.Args})
	}
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := w.Bytes(proto.ManifestPath, 0o644, mj); err != nil {
		return err
	}
	return w.Close()
}

// addTree copies a host directory into the archive, if it exists.
func addTree(w *cpio.Writer, src, dst string) error {
	if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.ToSlash(filepath.Join(dst, rel))
		switch {
		case info.IsDir():
			return w.Dir(target, 0o755)
		case info.Mode().IsRegular():
			return w.File(target, 0o644, p)
		}
		return nil
	})
}

func concat(dst string, srcs ...string) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	for _, s := range srcs {
		in, err := os.Open(s)
		if err != nil {
			out.Close()
			return err
		}
		_, err = io.Copy(out, in)
		in.Close()
		if err != nil {
			out.Close()
			return err
		}
	}
	return out.Close()
}

// boot runs the VM and parses the result port as it streams.
func boot(ctx context.Context, c config, qemu string, k *kernel.Kernel, initrd, work string) (*proto.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	args := []string{"-nodefaults", "-display", "none", "-no-reboot", "-m", fmt.Sprint(c.memMB), "-smp", "2"}
	if c.accel == "kvm" {
		args = append(args, "-accel", "kvm", "-cpu", "host")
	} else {
		args = append(args, "-accel", "tcg,thread=multi", "-cpu", "max")
	}
	console := filepath.Join(work, "console.log")
	args = append(args,
		"-kernel", k.Vmlinuz(), "-initrd", initrd,
		"-append", "console=ttyS0 quiet loglevel=3 panic=-1 oops=panic",
		"-serial", "file:"+console, // ttyS0: the kernel's console
		"-serial", "stdio", // ttyS1: the guest's framed results
	)
	cmd := exec.CommandContext(ctx, qemu, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	bootStart := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("lab: start qemu: %w", err)
	}
	first := true
	rep, perr := proto.Parse(stdout, func(r *proto.Result, control bool, text string) {
		if first {
			logf("lab: guest up after %.1fs", time.Since(bootStart).Seconds())
			first = false
		}
		switch {
		case control:
			f := strings.Fields(text)
			if len(f) > 0 && (f[0] == proto.VerbSetup || f[0] == proto.VerbBegin || f[0] == proto.VerbEnd) {
				logf("lab: %s", text)
			}
		case r == nil || c.quiet:
		default:
			fmt.Printf("[%s] %s\n", r.Name, text)
		}
	})
	werr := cmd.Wait()
	if ctx.Err() == context.DeadlineExceeded {
		showConsole(console)
		return nil, fmt.Errorf("lab: the VM did not finish within %v", c.timeout)
	}
	if perr != nil {
		return nil, fmt.Errorf("lab: read results: %w", perr)
	}
	if werr != nil && !rep.Done {
		showConsole(console)
		return nil, fmt.Errorf("lab: qemu: %v\n%s", werr, stderr.String())
	}
	logf("lab: VM ran %.1fs", time.Since(bootStart).Seconds())
	return rep, nil
}

// summary prints one kernel's results, naming the kernel, and returns its
// counts.
func summary(k *kernel.Kernel, rep *proto.Report) (passed, failed, skipped int) {
	fmt.Printf("lab results on %s:\n", k)
	for _, b := range rep.Binaries {
		passed += b.Passed
		failed += b.Failed
		skipped += b.Skipped
		status := "PASS"
		if !b.Ended {
			status = "DIED"
		} else if b.Exit != 0 {
			status = "FAIL"
		}
		fmt.Printf("  %-4s %-24s %3d passed %3d failed %3d skipped  %6.1fs\n", status, b.Name, b.Passed, b.Failed, b.Skipped, b.Duration.Seconds())
	}
	fmt.Printf("  %s: %d passed, %d failed, %d skipped\n", k.Release, passed, failed, skipped)
	return passed, failed, skipped
}

func showConsole(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	logf("lab: last kernel console output:\n%s", b)
}
