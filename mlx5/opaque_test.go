package mlx5_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/mlx5test"
)

// handleTypes are package mlx5's handles: the objects it makes and reads
// back. What a user may know of one comes out through its methods, as
// copies; an exported field would let one assignment change what the
// driver checks or looks up (Context.Caps sized QPs, Mkey.LKey found the
// mkey of a signature error).
var handleTypes = []reflect.Type{
	reflect.TypeFor[mlx5.AH](),
	reflect.TypeFor[mlx5.AsyncCmdQueue](),
	reflect.TypeFor[mlx5.EventChannel](),
	reflect.TypeFor[mlx5.Batch](),
	reflect.TypeFor[mlx5.Buffer](),
	reflect.TypeFor[mlx5.CQ](),
	reflect.TypeFor[mlx5.CryptoLoginObj](),
	reflect.TypeFor[mlx5.DEK](),
	reflect.TypeFor[mlx5.Context](),
	reflect.TypeFor[mlx5.DevxObj](),
	reflect.TypeFor[mlx5.MR](),
	reflect.TypeFor[mlx5.Mkey](),
	reflect.TypeFor[mlx5.PD](),
	reflect.TypeFor[mlx5.QP](),
	reflect.TypeFor[mlx5.SRQ](),
	reflect.TypeFor[mlx5.UAR](),
	reflect.TypeFor[mlx5.UMem](),
}

// TestHandlesOpaque: no handle of package mlx5 has an exported field,
// and every type with a lifecycle (apiObjects) is a handle listed here.
func TestHandlesOpaque(t *testing.T) {
	listed := map[reflect.Type]bool{}
	for _, h := range handleTypes {
		listed[h] = true
		for _, f := range reflect.VisibleFields(h) {
			if f.IsExported() {
				t.Errorf("mlx5.%s has the exported field %s: a handle gives its values out through methods", h.Name(), f.Name)
			}
		}
	}
	for _, o := range apiObjects {
		if !listed[o.Elem()] {
			t.Errorf("mlx5.%s is not in handleTypes", o.Elem().Name())
		}
	}
}

// TestCapsCopy: Context.Caps is a copy. Changing it, down or up, changes
// neither what the context answers next nor what CreateQP, CreateAH and
// CreateSRQ accept: they check the device's limits. (On a context whose
// Caps was a field, the same assignments made CreateQP refuse 256 send
// work requests: "a send queue holds at most 1 WQEBBs".)
func TestCapsCopy(t *testing.T) {
	c := mlx5test.New(t, "cx7")
	want := c.Caps()
	caps := c.Caps()
	caps.MaxSendWQEBB, caps.MaxRecvWR, caps.MaxSRQRecvWR, caps.NumPorts = 1, 1, 1, 0
	caps.MaxDCIStreams = mlx5.DCIStreams{}
	raised := c.Caps()
	raised.MaxRecvWR, raised.NumPorts = 1<<20, 8
	if got := c.Caps(); got != want {
		t.Fatalf("Caps after changing a copy: %+v, want %+v", got, want)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(mlx5.CQOptions{Entries: 64})
	if err != nil {
		t.Fatal(err)
	}
	// Within the device's limits, beyond the changed copy's.
	qp, err := c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeRC, PD: pd, SendCQ: cq, RecvCQ: cq,
		MaxSendWR: 256, MaxSendSGE: 1, MaxRecvWR: 256, MaxRecvSGE: 1})
	if err != nil {
		t.Errorf("CreateQP within the device's limits: %v", err)
	} else {
		qp.Close()
	}
	srq, err := c.CreateSRQ(mlx5.SRQOptions{PD: pd, MaxWR: 256, MaxSGE: 1})
	if err != nil {
		t.Errorf("CreateSRQ within the device's limits: %v", err)
	} else {
		srq.Close()
	}
	// Beyond the device's limit, as before.
	_, err = c.CreateQP(mlx5.QPOptions{Type: mlx5.QPTypeRC, PD: pd, SendCQ: cq, RecvCQ: cq,
		MaxSendWR: 1, MaxSendSGE: 1, MaxRecvWR: want.MaxRecvWR + 1, MaxRecvSGE: 1})
	if !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("CreateQP with MaxRecvWR %d (the device's %d): %v, want ErrInvalid", want.MaxRecvWR+1, want.MaxRecvWR, err)
	}
	if _, err := pd.CreateAH(mlx5.AddressPath{Port: uint8(want.NumPorts) + 1}); !errors.Is(err, mlx5.ErrInvalid) {
		t.Errorf("CreateAH on port %d of %d: %v, want ErrInvalid", want.NumPorts+1, want.NumPorts, err)
	}
}
