// Package mlx5test opens mlx5 contexts on a software ConnectX, for the
// tests of code that uses package mlx5, much as net/http/httptest serves
// HTTP in the test's own process. No RDMA device, kernel module or
// privilege is needed.
//
// The device is mlx5go's model of a ConnectX (package model, described in
// docs/MODEL.md): it answers the kernel's verbs and DEVX calls as Linux
// 6.1's mlx5_ib and the firmware do, reads the work queue entries and
// doorbells the driver writes with its own parsers, moves the data between
// the registered buffers, computes block signatures, and writes
// completions. A context opened here is an ordinary *mlx5.Context: PDs,
// MRs, CQs, QPs of every type, SRQs, AHs, signature mkeys, events and DEVX
// calls work on it as on a ConnectX, DC traffic and DCI streams too. What
// the model does not do (atomics on RC and UC, XRC, ...) is listed in
// docs/MODEL.md.
package mlx5test

import (
	"fmt"
	"testing"

	"github.com/mlx5go/mlx5go/internal/mlx5hook"
	"github.com/mlx5go/mlx5go/mlx5"
	"github.com/mlx5go/mlx5go/model"
)

// DefaultProfile is the ConnectX Open makes when given no profile: a
// ConnectX-7.
const DefaultProfile = "cx7"

// Profiles lists the ConnectX models a context can be opened on ("cx5",
// "cx6dx", "cx7"); they differ in their capabilities, as the devices do.
func Profiles() []string { return model.Profiles() }

// Open makes a software ConnectX of the named profile ("" for
// DefaultProfile) and opens a context on it, with DEVX. Closing the
// context releases the device.
func Open(profile string) (*mlx5.Context, error) {
	return OpenWithOptions(profile, model.Options{})
}

// OpenWithOptions is Open on a software ConnectX made with options: one
// without DEVX (model.Options.NoDEVX), or one told where a signature
// pipelining QP stops (model.Options.SigStop, docs/MODEL.md).
func OpenWithOptions(profile string, opt model.Options) (*mlx5.Context, error) {
	if profile == "" {
		profile = DefaultProfile
	}
	dev, err := model.NewWithOptions(profile, opt)
	if err != nil {
		return nil, fmt.Errorf("mlx5test: %w", err)
	}
	c := newContext(dev)
	remember(c, dev)
	return c, nil
}

// newContext opens an mlx5 context on a software ConnectX's context.
func newContext(dev *model.Device) *mlx5.Context {
	return mlx5hook.NewContext(dev).(*mlx5.Context)
}

// New is Open for a test or benchmark: it fails tb if the device cannot
// be made, and closes the context when tb ends.
func New(tb testing.TB, profile string) *mlx5.Context {
	tb.Helper()
	c, err := Open(profile)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("mlx5test: close: %v", err)
		}
	})
	return c
}
