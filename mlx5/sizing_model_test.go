package mlx5_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
	"golang.org/x/sys/unix"
)

// Issue 15, item 3: every size of QPOptions, CQOptions, SRQOptions and
// MkeyOptions is checked before any arithmetic is done with it. A huge,
// negative or overflowing value is ErrInvalid (EINVAL), never a panic
// and never a queue made of a wrapped product, and it leaves nothing
// behind on the device.

// hugeSizes are values that overflow a size's arithmetic or make no sense
// as one.
var hugeSizes = []int{-1, math.MinInt, math.MaxInt, 1<<60 + 1, 1<<62 + 1, 1 << 31, 1<<32 + 1, math.MaxInt32, math.MaxUint32}

// creation is one create call with an option set to a bad size.
type creation struct {
	name   string
	create func() (interface{ Close() error }, error)
}

// badSizeCreations are the create calls of the rig r, each with one size
// of its options set to v (the others sensible).
func badSizeCreations(r *rig, srq *mlx5.SRQ, v int) []creation {
	qp := func(field string, set func(o *mlx5.QPOptions)) creation {
		return creation{"QPOptions." + field, func() (interface{ Close() error }, error) {
			o := mlx5.QPOptions{PD: r.pd, SendCQ: r.cq, RecvCQ: r.cq, MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}
			set(&o)
			return made(r.c.CreateQP(o))
		}}
	}
	out := []creation{
		qp("MaxSendWR", func(o *mlx5.QPOptions) { o.MaxSendWR = v }),
		qp("MaxSendSGE", func(o *mlx5.QPOptions) { o.MaxSendSGE = v }),
		qp("MaxInlineData", func(o *mlx5.QPOptions) { o.MaxInlineData = v }),
		qp("MaxRecvWR", func(o *mlx5.QPOptions) { o.MaxRecvWR = v }),
		qp("MaxRecvSGE", func(o *mlx5.QPOptions) { o.MaxRecvSGE = v }),
		qp("MaxMkeyEntries", func(o *mlx5.QPOptions) { o.MkeyConfigure, o.MaxMkeyEntries = true, v }),
		qp("MaxRecvSGE (DEVX)", func(o *mlx5.QPOptions) { o.DEVX, o.MaxRecvSGE = true, v }),
		qp("MaxSendSGE (DEVX)", func(o *mlx5.QPOptions) { o.DEVX, o.MaxSendSGE = true, v }),
		qp("MaxSendWR (DCI)", func(o *mlx5.QPOptions) { o.Type, o.MaxRecvWR, o.MaxSendWR = mlx5.QPTypeDCI, 0, v }),
		qp("DCIStreams.LogConcurrent", func(o *mlx5.QPOptions) {
			o.Type, o.MaxRecvWR, o.DCIStreams = mlx5.QPTypeDCI, 0, &mlx5.DCIStreams{LogConcurrent: v}
		}),
		qp("DCIStreams.LogErrored", func(o *mlx5.QPOptions) {
			o.Type, o.MaxRecvWR, o.DCIStreams = mlx5.QPTypeDCI, 0, &mlx5.DCIStreams{LogErrored: v}
		}),
		qp("MaxRecvSGE (on an SRQ)", func(o *mlx5.QPOptions) { o.SRQ, o.MaxRecvWR, o.MaxRecvSGE = srq, 0, v }),
		qp("MaxSendWR (DCT)", func(o *mlx5.QPOptions) { o.Type, o.SRQ, o.MaxRecvWR, o.MaxSendWR = mlx5.QPTypeDCT, srq, 0, v }),
		{"CQOptions.Entries", func() (interface{ Close() error }, error) { return made(r.c.CreateCQ(mlx5.CQOptions{Entries: v})) }},
		{"CQOptions.Entries (DEVX)", func() (interface{ Close() error }, error) {
			return made(r.c.CreateCQ(mlx5.CQOptions{Entries: v, DEVX: true}))
		}},
		{"SRQOptions.MaxWR", func() (interface{ Close() error }, error) {
			return made(r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: v, MaxSGE: 1}))
		}},
		{"SRQOptions.MaxSGE", func() (interface{ Close() error }, error) {
			return made(r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: 8, MaxSGE: v}))
		}},
		{"SRQOptions.Limit", func() (interface{ Close() error }, error) {
			return made(r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: 8, MaxSGE: 1, Limit: v}))
		}},
		{"MkeyOptions.MaxEntries", func() (interface{ Close() error }, error) {
			return made(r.pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: v}))
		}},
		{"MkeyOptions.MaxEntries (signature)", func() (interface{ Close() error }, error) {
			return made(r.pd.CreateMkey(mlx5.MkeyOptions{MaxEntries: v, BlockSignature: true}))
		}},
	}
	return out
}

// made is a create's result as a closer: nil when it failed (not a nil
// pointer in an interface).
func made[T interface{ Close() error }](v T, err error) (interface{ Close() error }, error) {
	if err != nil {
		return nil, err
	}
	return v, nil
}

// tryCreate runs a create and turns a panic into an error.
func tryCreate(c creation) (obj interface{ Close() error }, err error) {
	defer func() {
		if p := recover(); p != nil {
			obj, err = nil, fmt.Errorf("panic: %v", p)
		}
	}()
	obj, err = c.create()
	if err == nil && obj == nil {
		err = errors.New("no object and no error")
	}
	return obj, err
}

func TestCreateRefusesHugeSizes(t *testing.T) {
	r := newRig(t, "cx7", model.Options{}, 64)
	srq, err := r.c.CreateSRQ(mlx5.SRQOptions{PD: r.pd, MaxWR: 8, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srq.Close()
	// The context keeps the BlueFlame page of a closed QP for the next:
	// made once, it is part of the baseline.
	r.qp(t, mlx5.QPOptions{MaxSendWR: 1}, false).Close()
	before := r.dev.Objects()
	for _, v := range hugeSizes {
		for _, c := range badSizeCreations(r, srq, v) {
			obj, err := tryCreate(c)
			if obj != nil {
				obj.Close()
			}
			switch {
			case err == nil:
				t.Errorf("%s %d: accepted", c.name, v)
			case !errors.Is(mlx5.Checked(t, err), mlx5.ErrInvalid) || !errors.Is(err, unix.EINVAL):
				t.Errorf("%s %d: %v, want ErrInvalid (EINVAL)", c.name, v, err)
			}
			if n := r.dev.Objects(); n != before {
				t.Errorf("%s %d: %d device objects after the refusal, %d before", c.name, v, n, before)
				before = n
			}
		}
	}
}
