package cm_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mlx5go/mlx5go/cm"
	"github.com/mlx5go/mlx5go/mlx5"
)

// TestVerbsNilAndZero: a nil or zero VerbsDevice or VerbsQP, which
// OpenVerbs and CreateQP did not make, gets an error (mlx5.ErrInvalid
// saying so) from every call that does something, zero values from its
// getters and nil from Close, and a Dial given one fails the same way
// before it sends anything: never a panic.
func TestVerbsNilAndZero(t *testing.T) {
	const want = "nil or zero Verbs"
	for name, d := range map[string]*cm.VerbsDevice{"nil": nil, "zero": {}} {
		if d.Name() != "" || d.NodeGUID() != 0 {
			t.Errorf("%s VerbsDevice: name %q, GUID %#x, want none", name, d.Name(), d.NodeGUID())
		}
		if qp, err := d.CreateQP(mlx5.QPTypeRC); qp != nil || !isInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s VerbsDevice: CreateQP: %v, %v, want ErrInvalid saying %q", name, qp, err, want)
		}
		if err := d.Close(); err != nil {
			t.Errorf("%s VerbsDevice: Close: %v", name, err)
		}
	}
	srv, cli := pair(t)
	ctx := testCtx(t)
	l := srv.listen(t, ctx)
	defer l.Close()
	for name, q := range map[string]*cm.VerbsQP{"nil": nil, "zero": {}} {
		if q.QPN() != 0 || q.String() != "VerbsQP" {
			t.Errorf("%s VerbsQP: QPN %#x, %q", name, q.QPN(), q.String())
		}
		if err := q.Modify(&mlx5.QPAttr{State: mlx5.QPStateInit}, mlx5.QPAttrState); !isInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s VerbsQP: Modify: %v, want ErrInvalid saying %q", name, err, want)
		}
		if _, err := q.Query(mlx5.QPAttrState); !isInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s VerbsQP: Query: %v, want ErrInvalid saying %q", name, err, want)
		}
		if err := q.Close(); err != nil {
			t.Errorf("%s VerbsQP: Close: %v", name, err)
		}
		dctx, cancel := context.WithTimeout(ctx, mustCome)
		_, err := cli.m.Dial(dctx, "tcp", l.Addr().String(), &cm.DialOptions{QP: q})
		cancel()
		if !isInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s VerbsQP: Dial: %v, want ErrInvalid saying %q", name, err, want)
		}
	}
	waitIDs(t, srv.c, 1) // the listener's: the dials sent nothing
}
