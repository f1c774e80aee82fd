package cm_test

import (
	"reflect"
	"testing"

	"github.com/mlx5go/mlx5go/cm"
)

// TestHandlesOpaque: no handle of package cm has an exported field: what
// a user may know of a connection, a listener, a manager or a request
// comes out through its methods, so that no assignment changes what the
// package reads back. Options and results (DialOptions, UDPeer,
// RejectError, ...) are data.
func TestHandlesOpaque(t *testing.T) {
	for _, h := range []reflect.Type{
		reflect.TypeFor[cm.Conn](),
		reflect.TypeFor[cm.Listener](),
		reflect.TypeFor[cm.Manager](),
		reflect.TypeFor[cm.Request](),
	} {
		for _, f := range reflect.VisibleFields(h) {
			if f.IsExported() {
				t.Errorf("cm.%s has the exported field %s: a handle gives its values out through methods", h.Name(), f.Name)
			}
		}
	}
}
