// Package proto is the contract between the kernel lab's host runner
// (hwtest/lab) and its guest init (hwtest/lab/guest): the manifest the host
// puts in the initramfs, and the framing of what the guest sends back on its
// result serial port.
//
// Every line the guest writes to the result port is either a control line,
// starting with Marker, or a line of test output, starting with DataPrefix.
// Nothing else is ever written there (kernel messages go to the console
// port), so a verdict read from it is unambiguous. It imports only the
// standard library.
package proto

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// ManifestPath is where the host puts the manifest in the initramfs.
const ManifestPath = "/lab/manifest.json"

// Manifest tells the guest what to set up and what to run.
type Manifest struct {
	// Modules are absolute paths of .ko files inside the initramfs, in the
	// order they must be loaded (dependencies first).
	Modules []string `json:"modules"`
	// Netdev is the dummy network device to create and bring up, with
	// Address (CIDR) on it. RXE is the rdma_rxe link to add on it.
	Netdev  string `json:"netdev"`
	Address string `json:"address"`
	RXE     string `json:"rxe"`
	// Binaries are the test binaries to run, in order.
	Binaries []Binary `json:"binaries"`
	// Env is added to every test binary's environment.
	Env []string `json:"env"`
	// Release is the uname -r of the kernel the host booted; the guest
	// checks it (set-up step "kernel"), so a run names the kernel it
	// really ran on.
	Release string `json:"release"`
}

// Binary is one test binary and how to run it.
type Binary struct {
	Name string   `json:"name"` // package path within the module, e.g. "uverbs"
	Path string   `json:"path"` // executable inside the initramfs
	Dir  string   `json:"dir"`  // working directory (holds the package's testdata)
	Args []string `json:"args"`
}

// Framing of the result port.
const (
	Marker     = "@@mlx5go-lab "
	DataPrefix = "| "
)

// Control line verbs.
const (
	VerbSetup = "setup" // setup STEP ok|fail DETAIL...
	VerbBegin = "begin" // begin NAME
	VerbEnd   = "end"   // end NAME EXIT MILLISECONDS
	VerbDone  = "done"  // done
)

// Writer frames guest output.
type Writer struct{ W io.Writer }

func (w Writer) control(verb string, args ...string) {
	fmt.Fprintf(w.W, "%s%s %s\n", Marker, verb, strings.Join(args, " "))
}

// Setup reports one set-up step. err nil means it succeeded.
func (w Writer) Setup(step string, detail string, err error) {
	if err != nil {
		w.control(VerbSetup, step, "fail", oneLine(err.Error()))
		return
	}
	w.control(VerbSetup, step, "ok", oneLine(detail))
}

// Begin announces a test binary.
func (w Writer) Begin(name string) { w.control(VerbBegin, name) }

// Data frames one line of a test binary's output.
func (w Writer) Data(line string) { fmt.Fprintf(w.W, "%s%s\n", DataPrefix, line) }

// End reports a test binary's exit code and run time.
func (w Writer) End(name string, exit int, d time.Duration) {
	w.control(VerbEnd, name, strconv.Itoa(exit), strconv.FormatInt(d.Milliseconds(), 10))
}

// Done says the guest ran everything it was asked to.
func (w Writer) Done() { w.control(VerbDone) }

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// Step is a set-up step as reported by the guest.
type Step struct {
	Name   string
	OK     bool
	Detail string
}

// Result is one test binary's outcome.
type Result struct {
	Name     string
	Ended    bool
	Exit     int
	Duration time.Duration
	Passed   int // "--- PASS" lines
	Failed   int // "--- FAIL" lines
	Skipped  int // "--- SKIP" lines
	Output   []string
}

// Report is everything the guest said.
type Report struct {
	Setup    []Step
	Binaries []*Result
	Done     bool
}

// Event is called by Parse for every line as it arrives: the binary it
// belongs to (nil for control lines outside one) and the line's text.
type Event func(r *Result, control bool, text string)

// Parse reads the result port until EOF. Lines that are neither control nor
// data lines (a stray carriage return, line noise) are ignored, so output
// can't forge a verdict.
func Parse(rd io.Reader, ev Event) (*Report, error) {
	rep := &Report{}
	var cur *Result
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(line, DataPrefix):
			text := line[len(DataPrefix):]
			if cur != nil {
				cur.Output = append(cur.Output, text)
				t := strings.TrimSpace(text)
				switch {
				case strings.HasPrefix(t, "--- PASS"):
					cur.Passed++
				case strings.HasPrefix(t, "--- FAIL"):
					cur.Failed++
				case strings.HasPrefix(t, "--- SKIP"):
					cur.Skipped++
				}
			}
			if ev != nil {
				ev(cur, false, text)
			}
		case strings.HasPrefix(line, Marker):
			f := strings.Fields(line[len(Marker):])
			if len(f) == 0 {
				continue
			}
			switch f[0] {
			case VerbSetup:
				if len(f) >= 3 {
					rep.Setup = append(rep.Setup, Step{Name: f[1], OK: f[2] == "ok", Detail: strings.Join(f[3:], " ")})
				}
			case VerbBegin:
				if len(f) == 2 {
					cur = &Result{Name: f[1]}
					rep.Binaries = append(rep.Binaries, cur)
				}
			case VerbEnd:
				if len(f) == 4 && cur != nil && cur.Name == f[1] {
					cur.Ended = true
					cur.Exit, _ = strconv.Atoi(f[2])
					ms, _ := strconv.ParseInt(f[3], 10, 64)
					cur.Duration = time.Duration(ms) * time.Millisecond
				}
			case VerbDone:
				rep.Done = true
			}
			if ev != nil {
				ev(cur, true, line[len(Marker):])
			}
			if f[0] == VerbEnd {
				cur = nil
			}
		}
	}
	return rep, sc.Err()
}

// Err is the verdict: nil only if the guest finished, every set-up step
// succeeded, at least one binary ran, and every binary exited 0.
func (r *Report) Err() error {
	var problems []string
	for _, s := range r.Setup {
		if !s.OK {
			problems = append(problems, fmt.Sprintf("set-up step %s failed: %s", s.Name, s.Detail))
		}
	}
	for _, b := range r.Binaries {
		switch {
		case !b.Ended:
			problems = append(problems, fmt.Sprintf("%s did not finish", b.Name))
		case b.Exit != 0:
			problems = append(problems, fmt.Sprintf("%s exited %d (%d failed)", b.Name, b.Exit, b.Failed))
		}
	}
	if !r.Done {
		problems = append(problems, "the guest did not report completion (VM crashed, hung or never came up)")
	}
	if len(r.Binaries) == 0 && r.Done {
		problems = append(problems, "no test binary ran")
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("lab: %s", strings.Join(problems, "; "))
}
