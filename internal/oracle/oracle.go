// Package oracle reads the vectors that ../shared/oracle records from
// rdma-core's libibverbs and libmlx5, and compares the RDMA_VERBS_IOCTL calls
// mlx5go makes with the ones rdma-core made. It is for tests.
package oracle

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// Got is a call as mlx5go made it: the ioctl header's fields and, per
// attribute, its id, length, flags, data word and (for pointer attributes)
// the bytes it points to.
type Got struct {
	ObjectID, MethodID, Length, NumAttrs uint16
	DriverID                             uint32
	Attrs                                []GotAttr
}

// GotAttr is one attribute of a Got.
type GotAttr struct {
	ID, Len, Flags uint16
	Data           uint64
	Bytes          []byte // what a pointer attribute points to
}

// validOutput is UVERBS_ATTR_F_VALID_OUTPUT, which the kernel sets on
// outputs it wrote; the oracle records the flags as sent.
const validOutput = 1 << 1

// Attr is one recorded attribute.
type Attr struct {
	AttrID uint16 `json:"attr_id"`
	Name   string `json:"name"`
	Dir    string `json:"dir"`
	Len    uint16 `json:"len"`
	Flags  uint16 `json:"flags"`
	Inline bool   `json:"inline"`
	Hex    string `json:"hex"`
	OutHex string `json:"out_hex"`
}

// Call is one recorded kernel command.
type Call struct {
	Op        string `json:"op"`
	Object    string `json:"object"`
	Method    string `json:"method"`
	ObjectID  uint16 `json:"object_id"`
	MethodID  uint16 `json:"method_id"`
	HdrLength uint16 `json:"hdr_length"`
	NumAttrs  uint16 `json:"num_attrs"`
	DriverID  uint32 `json:"driver_id"`
	Attrs     []Attr `json:"attrs"`
}

// Case is one vector: its name, inputs, results and kernel commands.
type Case struct {
	Case       string          `json:"case"`
	Input      json.RawMessage `json:"input"`
	Result     json.RawMessage `json:"result"`
	KernelCmds []Call          `json:"kernel_cmds"`
}

// Lines calls each with every line of a JSON Lines vector file (lines of
// up to 16 MiB), failing t if the file cannot be read or holds no line.
// It is the one reader of the oracle's files: the packages' tests and the
// record readers below use it.
func Lines(t testing.TB, path string, each func(line []byte)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	n := 0
	for sc.Scan() {
		each(sc.Bytes())
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if n == 0 {
		t.Fatalf("%s: no records", path)
	}
}

// Records calls each with every record of a JSON Lines vector file,
// decoded into an R, that keep accepts (nil keeps them all): a family's
// records among a wrap file's others.
func Records[R any](t testing.TB, path string, keep func(*R) bool, each func(*R)) {
	t.Helper()
	Lines(t, path, func(line []byte) {
		var r R
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if keep == nil || keep(&r) {
			each(&r)
		}
	})
}

// Unhex decodes recorded bytes, failing t if they are not hex.
func Unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("oracle bytes %q: %v", s, err)
	}
	return b
}

// ParseNum parses a recorded number ("0x..." or decimal).
func ParseNum(s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("oracle number %q: %w", s, err)
	}
	return v, nil
}

// Num is ParseNum failing t for what is not a number.
func Num(t testing.TB, s string) uint64 {
	t.Helper()
	v, err := ParseNum(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Load returns the case named kase of a JSON Lines vector file.
func Load(t testing.TB, path, kase string) Case {
	t.Helper()
	var found *Case
	Lines(t, path, func(line []byte) {
		var c Case
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatal(err)
		}
		if found == nil && c.Case == kase {
			found = &c
		}
	})
	if found == nil {
		t.Fatalf("%s: no case %q", path, kase)
		return Case{}
	}
	return *found
}

// Find returns the case's first ioctl on object and method.
func (c Case) Find(t testing.TB, object, method string) Call {
	t.Helper()
	for _, k := range c.KernelCmds {
		if k.Op == "ioctl" && k.Object == object && k.Method == method {
			return k
		}
	}
	t.Fatalf("case %s has no %s %s", c.Case, object, method)
	return Call{}
}

// Bytes decodes an attribute's recorded input bytes.
func (a Attr) Bytes(t testing.TB) []byte {
	t.Helper()
	b, err := hex.DecodeString(a.Hex)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Compare checks got against want: header, and per attribute its id,
// length, flags and input bytes (inline or pointed to). Attributes named
// in varying are compared by length and flags only.
func Compare(t testing.TB, want Call, got Got, varying ...string) {
	t.Helper()
	name := want.Object + " " + want.Method
	if got.ObjectID != want.ObjectID || got.MethodID != want.MethodID {
		t.Errorf("%s: object/method %#x/%#x, rdma-core %#x/%#x", name, got.ObjectID, got.MethodID, want.ObjectID, want.MethodID)
	}
	if got.Length != want.HdrLength || got.NumAttrs != want.NumAttrs || got.DriverID != want.DriverID {
		t.Errorf("%s: header length %d, %d attrs, driver %d; rdma-core %d, %d, %d", name,
			got.Length, got.NumAttrs, got.DriverID, want.HdrLength, want.NumAttrs, want.DriverID)
	}
	if len(got.Attrs) != len(want.Attrs) {
		t.Fatalf("%s: %d attributes, rdma-core %d", name, len(got.Attrs), len(want.Attrs))
	}
	skip := map[string]bool{}
	for _, v := range varying {
		skip[v] = true
	}
	for i, wa := range want.Attrs {
		ga := got.Attrs[i]
		if ga.ID != wa.AttrID || ga.Len != wa.Len || ga.Flags&^validOutput != wa.Flags {
			t.Errorf("%s attr %d (%s): id %#x len %d flags %#x; rdma-core id %#x len %d flags %#x", name, i, wa.Name,
				ga.ID, ga.Len, ga.Flags, wa.AttrID, wa.Len, wa.Flags)
		}
		if wa.Dir != "in" || wa.Hex == "" || skip[wa.Name] {
			continue
		}
		var b []byte
		if wa.Inline {
			var v [8]byte
			binary.LittleEndian.PutUint64(v[:], ga.Data)
			b = v[:min(int(ga.Len), 8)]
		} else {
			b = ga.Bytes
			if b == nil {
				t.Errorf("%s attr %s: pointer %#x to memory the test cannot see", name, wa.Name, ga.Data)
				continue
			}
		}
		if h := hex.EncodeToString(b); h != wa.Hex {
			t.Errorf("%s attr %s: bytes\n %s\nrdma-core\n %s", name, wa.Name, h, wa.Hex)
		}
	}
}

// String describes a call for failure messages.
func (c Call) String() string { return fmt.Sprintf("%s %s (%d attrs)", c.Object, c.Method, c.NumAttrs) }
