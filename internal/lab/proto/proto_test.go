package proto

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func frame(fn func(w Writer)) string {
	var b bytes.Buffer
	fn(Writer{W: &b})
	return b.String()
}

func TestRoundTripPass(t *testing.T) {
	s := frame(func(w Writer) {
		w.Setup("modules", "12 loaded", nil)
		w.Begin("uverbs")
		w.Data("=== RUN   TestLabX")
		w.Data("--- PASS: TestLabX (0.00s)")
		w.Data("--- SKIP: TestLabY (0.00s)")
		w.End("uverbs", 0, 1500*time.Millisecond)
		w.Done()
	})
	rep, err := Parse(strings.NewReader(s), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatalf("verdict: %v", err)
	}
	b := rep.Binaries[0]
	if b.Name != "uverbs" || !b.Ended || b.Passed != 1 || b.Skipped != 1 || b.Duration != 1500*time.Millisecond {
		t.Fatalf("result = %+v", b)
	}
}

func TestVerdictFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		in   func(w Writer)
		want string
	}{
		"binary failed": {func(w Writer) {
			w.Begin("a")
			w.Data("--- FAIL: TestLabA (0.00s)")
			w.End("a", 1, 0)
			w.Done()
		}, "a exited 1 (1 failed)"},
		"no done": {func(w Writer) {
			w.Begin("a")
			w.End("a", 0, 0)
		}, "did not report completion"},
		"unfinished binary": {func(w Writer) { w.Begin("a"); w.Done() }, "a did not finish"},
		"setup failed": {func(w Writer) {
			w.Setup("rxe", "", errors.New("EOPNOTSUPP"))
			w.Done()
		}, "set-up step rxe failed: EOPNOTSUPP"},
		"nothing ran": {func(w Writer) { w.Done() }, "no test binary ran"},
	} {
		t.Run(name, func(t *testing.T) {
			rep, err := Parse(strings.NewReader(frame(tc.in)), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = rep.Err()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("verdict = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// Output that imitates a control line cannot forge a verdict: it arrives
// framed as data.
func TestDataCannotForgeControl(t *testing.T) {
	s := frame(func(w Writer) {
		w.Begin("a")
		w.Data(Marker + "end a 0 0")
		w.Data(Marker + "done")
		w.End("a", 2, 0)
	})
	rep, err := Parse(strings.NewReader(s+"garbage line\r\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Done || rep.Binaries[0].Exit != 2 {
		t.Fatalf("forged: done=%v exit=%d", rep.Done, rep.Binaries[0].Exit)
	}
}
