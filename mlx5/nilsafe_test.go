package mlx5_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
	"github.com/mlx5go/mlx5go/model"
	"github.com/mlx5go/mlx5go/prm"
)

// The objects of package mlx5 follow os.File: a method called on a nil
// object, or on a zero value the package did not make (&mlx5.QP{}),
// returns an error wrapping ErrInvalid; on a closed object, ErrClosed
// (Close: nil, closing twice is safe). Never a panic. A method that
// returns no error (QPN, Size, Caps, ...) returns its zero value on a nil
// or zero object, and anything but a panic on a closed one. The tests
// below call every exported method of every exported type, found by
// reflection, with zero arguments, so that a method added later is
// covered without a change here; TestNilSafeCoversEveryType fails when a
// type with methods is added and not listed.

// apiObjects are the pointer types with a lifecycle: made by the package,
// closed by their Close or by their context's.
var apiObjects = []reflect.Type{
	reflect.TypeFor[*mlx5.AH](),
	reflect.TypeFor[*mlx5.AsyncCmdQueue](),
	reflect.TypeFor[*mlx5.Batch](),
	reflect.TypeFor[*mlx5.Buffer](),
	reflect.TypeFor[*mlx5.CQ](),
	reflect.TypeFor[*mlx5.Context](),
	reflect.TypeFor[*mlx5.CryptoLoginObj](),
	reflect.TypeFor[*mlx5.DEK](),
	reflect.TypeFor[*mlx5.DevxObj](),
	reflect.TypeFor[*mlx5.EventChannel](),
	reflect.TypeFor[*mlx5.MR](),
	reflect.TypeFor[*mlx5.Mkey](),
	reflect.TypeFor[*mlx5.PD](),
	reflect.TypeFor[*mlx5.QP](),
	reflect.TypeFor[*mlx5.SRQ](),
	reflect.TypeFor[*mlx5.UAR](),
	reflect.TypeFor[*mlx5.UMem](),
}

// apiValues are the types whose methods describe a value (String, Error,
// Unwrap): they have no closed state and must not panic on their zero
// value, nor, for *Error, on nil.
var apiValues = []reflect.Type{
	reflect.TypeFor[*mlx5.Error](),
	reflect.TypeFor[mlx5.Event](),
	reflect.TypeFor[mlx5.EventType](),
	reflect.TypeFor[mlx5.Opcode](),
	reflect.TypeFor[mlx5.QPState](),
	reflect.TypeFor[mlx5.QPType](),
	reflect.TypeFor[mlx5.WCOpcode](),
	reflect.TypeFor[mlx5.WCStatus](),
	reflect.TypeFor[mlx5.LoginState](),
	reflect.TypeFor[mlx5.LoginOptions](),
	reflect.TypeFor[mlx5.DEKState](),
	reflect.TypeFor[mlx5.DEKOptions](),
	reflect.TypeFor[mlx5.ClockInfo](),
	reflect.TypeFor[mlx5.DevxEvent](),
}

// TestNilSafeCoversEveryType: every exported type of package mlx5 with an
// exported method is in apiObjects or apiValues.
func TestNilSafeCoversEveryType(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	listed := map[string]bool{}
	for _, typ := range slices.Concat(apiObjects, apiValues) {
		if typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		listed[typ.Name()] = true
	}
	withMethods := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || !fn.Name.IsExported() {
				continue
			}
			recv := fn.Recv.List[0].Type
			if s, ok := recv.(*ast.StarExpr); ok {
				recv = s.X
			}
			if id, ok := recv.(*ast.Ident); ok && id.IsExported() {
				withMethods[id.Name] = true
			}
		}
	}
	if len(withMethods) == 0 {
		t.Fatal("found no exported methods")
	}
	for name := range withMethods {
		if !listed[name] {
			t.Errorf("mlx5.%s has exported methods but is in neither apiObjects nor apiValues", name)
		}
	}
}

// zeroArgs are the zero values of a method's parameters.
func zeroArgs(m reflect.Value) []reflect.Value {
	args := make([]reflect.Value, m.Type().NumIn())
	for i := range args {
		args[i] = reflect.Zero(m.Type().In(i))
	}
	return args
}

var (
	errorType = reflect.TypeFor[error]()
	batchType = reflect.TypeFor[*mlx5.Batch]()
)

// callEach calls every exported method of v with zero arguments and
// checks each error it returns with check (for a *Batch it returns, the
// error of the batch's Commit), and, unless anyResult, that every other
// result is its zero value. A panic fails the test.
func callEach(t *testing.T, what string, v reflect.Value, anyResult bool, check func(method string, err error) string) {
	t.Helper()
	typ := v.Type()
	if typ.NumMethod() == 0 {
		t.Fatalf("%s: %v has no methods", what, typ)
	}
	for i := range typ.NumMethod() {
		name := typ.Method(i).Name
		call := func() (res []reflect.Value, panicked any) {
			defer func() { panicked = recover() }()
			m := v.Method(i)
			return m.Call(zeroArgs(m)), nil
		}
		res, p := call()
		if p != nil {
			t.Errorf("%s.%s panics: %v", what, name, p)
			continue
		}
		for j, r := range res {
			switch {
			case r.Type() == errorType:
				err, _ := r.Interface().(error)
				if d := check(name, err); d != "" {
					t.Errorf("%s.%s: %s", what, name, d)
				}
			case r.Type() == batchType:
				b := r.Interface().(*mlx5.Batch)
				var err error
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Errorf("%s.%s: Commit of the batch it returns panics: %v", what, name, p)
						}
					}()
					err = b.Commit()
				}()
				if d := check(name, err); d != "" {
					t.Errorf("%s.%s, then Commit: %s", what, name, d)
				}
			case !anyResult && !r.IsZero():
				t.Errorf("%s.%s: result %d is %#v, want its zero value", what, name, j, r.Interface())
			}
		}
	}
}

// refusedAsInvalid is the check for a nil or zero object: ErrInvalid.
func refusedAsInvalid(method string, err error) string {
	if !errors.Is(err, mlx5.ErrInvalid) {
		return fmt.Sprintf("error %v, want ErrInvalid", err)
	}
	return apiErrorDefect(err)
}

// refusedAsClosed is the check for a closed object: ErrClosed, Close nil.
func refusedAsClosed(method string, err error) string {
	if method == "Close" {
		if err != nil {
			return fmt.Sprintf("closing again: %v, want nil", err)
		}
		return ""
	}
	if !errors.Is(err, mlx5.ErrClosed) {
		return fmt.Sprintf("error %v, want ErrClosed", err)
	}
	return apiErrorDefect(err)
}

// apiErrorDefect is mlx5.CheckAPIError's verdict as a string.
func apiErrorDefect(err error) string {
	var r errRecorder
	mlx5.CheckAPIError(&r, err)
	return r.msg
}

// errRecorder keeps what CheckAPIError reports.
type errRecorder struct {
	testing.TB
	msg string
}

func (r *errRecorder) Helper() {}
func (r *errRecorder) Errorf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
}

// TestNilObjects: every method of a nil object returns ErrInvalid (or a
// zero result), and does not panic.
func TestNilObjects(t *testing.T) {
	for _, typ := range apiObjects {
		callEach(t, "nil "+typ.String(), reflect.Zero(typ), false, refusedAsInvalid)
	}
	var c *mlx5.Context
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("NewContext(nil) panics: %v", p)
			}
		}()
		c = mlx5.NewContext(nil)
	}()
	if c != nil {
		callEach(t, "NewContext(nil)", reflect.ValueOf(c), false, refusedAsInvalid)
	}
}

// TestZeroObjects: every method of an object the package did not make
// (&mlx5.QP{}) returns ErrInvalid (or a zero result), and does not panic.
func TestZeroObjects(t *testing.T) {
	for _, typ := range apiObjects {
		callEach(t, "zero "+typ.String(), reflect.New(typ.Elem()), false, refusedAsInvalid)
	}
}

// TestValueMethods: the methods of values do not panic on the zero
// value, nor on a nil *Error.
func TestValueMethods(t *testing.T) {
	noCheck := func(string, error) string { return "" }
	for _, typ := range apiValues {
		if typ.Kind() == reflect.Pointer {
			callEach(t, "nil "+typ.String(), reflect.Zero(typ), true, noCheck)
			callEach(t, "zero "+typ.String(), reflect.New(typ.Elem()), true, noCheck)
			continue
		}
		callEach(t, "zero "+typ.String(), reflect.Zero(typ), true, noCheck)
	}
}

// liveObjects makes one object of each kind of apiObjects (but the
// Batch, which is a QP's) on c, in the order they may be closed.
func liveObjects(t *testing.T, c *mlx5.Context) []any {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	pd, err := c.AllocPD()
	must(err)
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 16, Events: true})
	must(err)
	srq, err := c.CreateSRQ(mlx5.SRQOptions{PD: pd, MaxWR: 4, MaxSGE: 1})
	must(err)
	qp, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4, MkeyConfigure: true, SigPipelining: true})
	must(err)
	onSRQ, err := c.CreateQP(mlx5.QPOptions{PD: pd, SendCQ: cq, RecvCQ: cq, SRQ: srq, MaxSendWR: 4})
	must(err)
	path, err := c.LoopbackPath(1)
	must(err)
	ah, err := pd.CreateAH(path)
	must(err)
	mkey, err := pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: 1, BlockSignature: true})
	must(err)
	buf, err := mlx5.AllocBuffer(1 << 14)
	must(err)
	t.Cleanup(func() { buf.Close() })
	mr, err := pd.RegMR(buf.Bytes()[:4096], mlx5.AccessLocalWrite)
	must(err)
	umem, err := c.RegUMem(buf.Bytes()[4096:8192], mlx5.AccessLocalWrite)
	must(err)
	in := prm.AllocPdIn.Layout().New()
	prm.MboxIn.Opcode.Set(in, prm.MLX5_CMD_OP_ALLOC_PD)
	obj, err := c.CreateObj(in, make([]byte, 16))
	must(err)
	uar, err := c.AllocUAR(mlx5.UARNonCached)
	must(err)
	acq, err := c.NewAsyncCmdQueue()
	must(err)
	evch, err := c.NewEventChannel(mlx5.EventChannelOptions{})
	must(err)
	objs := []any{qp, onSRQ, srq, cq, mkey, ah, mr, umem, obj, uar, acq, evch}
	// A DEK and a login object, as far as the profile's crypto allows: on
	// an engine in the wrapped import method (closedCrypto), a login
	// object with the credential of ID 0 and a DEK imported through it;
	// on one in plaintext, a plaintext DEK.
	caps, err := c.CryptoCaps()
	must(err)
	switch {
	case caps.WrappedImport != 0 && caps.Flags&mlx5.CryptoFlagWrappedOperational != 0:
		cred, err := model.KeyWrap(closedCrypto.ImportKEK, closedCrypto.Credential)
		must(err)
		login, err := c.CreateCryptoLogin(mlx5.LoginOptions{Credential: cred})
		must(err)
		key, err := model.KeyWrap(closedCrypto.ImportKEK, make([]byte, 32))
		must(err)
		dek, err := pd.CreateDEK(mlx5.DEKOptions{KeyBits: 128, Key: key, Login: login})
		must(err)
		objs = append(objs, dek, login)
	case caps.Engines != 0 && caps.WrappedImport == 0:
		dek, err := pd.CreateDEK(mlx5.DEKOptions{KeyBits: 128, Plaintext: true, Key: make([]byte, 32)})
		must(err)
		objs = append(objs, dek)
	}
	return append(objs, pd, buf)
}

// closedCrypto commissions TestClosedObjects' engine in the wrapped import
// method, so that it has both crypto objects: the credential and import
// KEK of ID 0.
var closedCrypto = model.CryptoOptions{Wrapped: true, Credential: make([]byte, 40), ImportKEK: make([]byte, 16)}

// TestClosedObjects: every method of a closed object returns ErrClosed
// (Close: nil), whether the object was closed by its own Close or by its
// context's, and does not panic. A Batch is closed when its QP is: Begin
// on a closed QP returns one.
func TestClosedObjects(t *testing.T) {
	for _, how := range []string{"by its Close", "by the context's Close"} {
		t.Run(how, func(t *testing.T) {
			c, err := mlx5test.OpenWithOptions("cx7", model.Options{Crypto: closedCrypto})
			if err != nil {
				t.Fatal(err)
			}
			objs := liveObjects(t, c)
			if how == "by its Close" {
				for _, o := range objs {
					if err := o.(interface{ Close() error }).Close(); err != nil {
						t.Fatalf("close %T: %v", o, err)
					}
				}
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if how == "by the context's Close" {
				objs[len(objs)-1].(*mlx5.Buffer).Close() // not the context's
			}
			objs = append(objs, c, objs[0].(*mlx5.QP).Begin())
			seen := map[reflect.Type]bool{}
			for _, o := range objs {
				v := reflect.ValueOf(o)
				seen[v.Type()] = true
				callEach(t, "closed "+v.Type().String(), v, true, refusedAsClosed)
			}
			for _, typ := range apiObjects {
				if !seen[typ] {
					t.Errorf("no closed %v was tried", typ)
				}
			}
		})
	}
}
