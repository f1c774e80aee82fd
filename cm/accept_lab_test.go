package cm_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mlx5go/mlx5go/cm"
	"github.com/mlx5go/mlx5go/internal/labenv"
	"github.com/mlx5go/mlx5go/mlx5"
)

// TestLabAcceptFailsOnSize: mlx5go's listener takes a request from
// Debian's ucmatose (udaddy for UD) and its Accept fails its checks (197
// bytes of private data, one more than a REP carries; a UD QP for an RC
// request; 137 bytes for a SIDR REP): the Accept answers with a reject,
// which the program reports at once (ucmatose: RDMA_CM_EVENT_REJECTED,
// reason 28, its exit status; udaddy: the SIDR reject, status 2), instead
// of waiting out its CM timeouts. The kernel's cm_ids and QPs come back.
func TestLabAcceptFailsOnSize(t *testing.T) {
	labenv.Require(t)
	noKernelLeak(t)
	m := labCM(t)
	r := openRXE(t)
	for _, c := range []struct {
		name, network, tool string
		opt                 func() *cm.AcceptOptions
		code                int
		report              string
	}{
		{"tcp 197 bytes", "tcp", "ucmatose", func() *cm.AcceptOptions {
			return &cm.AcceptOptions{QP: r.qp(t, mlx5.QPTypeRC), PrivateData: make([]byte, cm.MaxReplyData+1)}
		}, cm.RejectConsumerDefined, "RDMA_CM_EVENT_REJECTED, error: 28"},
		{"tcp UD QP", "tcp", "ucmatose", func() *cm.AcceptOptions {
			return &cm.AcceptOptions{QP: r.qp(t, mlx5.QPTypeUD)}
		}, cm.RejectConsumerDefined, "RDMA_CM_EVENT_REJECTED, error: 28"},
		{"udp 137 bytes", "udp", "udaddy", func() *cm.AcceptOptions {
			return &cm.AcceptOptions{QP: r.qp(t, mlx5.QPTypeUD), PrivateData: make([]byte, cm.MaxUDReplyData+1)}
		}, cm.SIDRReject, "RDMA_CM_EVENT_UNREACHABLE, error: 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := labCtx(t)
			addr := labAddr + ":0"
			if c.network == "udp" {
				addr = labAddr + ":7174" // udaddy's port
			}
			l, err := m.Listen(ctx, c.network, addr, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			opt := c.opt()
			done := serveOne(ctx, l, func(req *cm.Request) (*cm.Conn, error) { return req.Accept(ctx, opt) })
			var tl *tool
			if c.tool == "ucmatose" {
				tl = startTool(t, "ucmatose", "-s", labAddr, "-p", fmt.Sprint(l.Addr().(cm.Addr).AddrPort.Port()), "-C", "0")
			} else {
				tl = startTool(t, "udaddy", "-s", labAddr, "-C", "0")
			}
			res := <-done
			if !isInvalid(res.err) || !strings.Contains(res.err.Error(), "rejected") {
				t.Errorf("accept: %v, want ErrInvalid saying the request was rejected", res.err)
			}
			if res.c != nil {
				res.c.Close()
			}
			start := time.Now()
			code, out := tl.exit(t, 30*time.Second)
			if code != c.code || !strings.Contains(out, c.report) {
				t.Errorf("%s exited %d after %v, want it to report the reject (%q, exit status %d)", c.tool, code, time.Since(start).Round(time.Millisecond), c.report, c.code)
			}
			if a, err := opt.QP.Query(mlx5.QPAttrState); err != nil || a.State != mlx5.QPStateReset {
				t.Errorf("the failed accept's QP: %v, %v; want it left in RESET", a.State, err)
			}
		})
	}
}
