package abigen

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// Kernel is one kernel's BTF: vmlinux's and its modules', each module's
// split on top of vmlinux's, as /sys/kernel/btf holds them.
type Kernel struct {
	Suite   string // the Debian suite it was chosen from, e.g. bookworm
	Release string // uname -r, e.g. 6.1.0-56-amd64
	Package string // the Debian package and version, e.g. linux-image-6.1.0-56-amd64 6.1.192-2
	specs   map[string]*btf.Spec
}

// Describe names the kernel in generated files and failures.
func (k *Kernel) Describe() string {
	s := "Linux " + k.Release
	if k.Package != "" {
		s += " (Debian " + k.Suite + ", " + k.Package + ")"
	}
	return s
}

// NewKernel makes a Kernel of raw BTF blobs: vmlinux's, and each module's
// split BTF by module name.
func NewKernel(suite, release, pkg string, vmlinux []byte, modules map[string][]byte) (*Kernel, error) {
	base, err := btf.LoadSpecFromReader(bytes.NewReader(vmlinux))
	if err != nil {
		return nil, fmt.Errorf("vmlinux BTF of %s: %w", release, err)
	}
	k := &Kernel{Suite: suite, Release: release, Package: pkg, specs: map[string]*btf.Spec{"vmlinux": base}}
	for name, raw := range modules {
		s, err := btf.LoadSplitSpecFromReader(bytes.NewReader(raw), base)
		if err != nil {
			return nil, fmt.Errorf("%s BTF of %s: %w", name, release, err)
		}
		k.specs[name] = s
	}
	return k, nil
}

// RunningKernel is the running kernel's BTF (/sys/kernel/btf), for the
// modules named.
func RunningKernel(modules []string) (*Kernel, error) {
	rel, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return nil, err
	}
	k := &Kernel{Release: strings.TrimSpace(string(rel)), specs: map[string]*btf.Spec{}}
	for _, m := range modules {
		var s *btf.Spec
		if m == "vmlinux" {
			s, err = btf.LoadKernelSpec()
		} else {
			s, err = btf.LoadKernelModuleSpec(m)
		}
		if err != nil {
			return nil, fmt.Errorf("BTF of %s: %w", m, err)
		}
		k.specs[m] = s
	}
	return k, nil
}

// snapshotModule is the one "module" of a snapshot: every type the
// generator used, with their dependencies, in one standalone BTF.
const snapshotModule = "snapshot"

// LoadSnapshot reads a snapshot written by Snapshot.
func LoadSnapshot(suite, release, pkg string, raw []byte) (*Kernel, error) {
	s, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("BTF snapshot of %s: %w", release, err)
	}
	return &Kernel{Suite: suite, Release: release, Package: pkg, specs: map[string]*btf.Spec{snapshotModule: s}}, nil
}

// Snapshot marshals types (and what they refer to) into one standalone
// BTF blob, which LoadSnapshot reads back.
func Snapshot(types []btf.Type) ([]byte, error) {
	b, err := btf.NewBuilder(types, nil)
	if err != nil {
		return nil, err
	}
	return b.Marshal(nil, nil)
}

// errNotFound is a type no module of the kernel has.
var errNotFound = errors.New("not in BTF")

// find returns the first type named name for which ok is true, searching
// modules in order (a snapshot has every module's types in one).
func (k *Kernel) find(modules []string, name string, ok func(btf.Type) bool) (btf.Type, error) {
	if s := k.specs[snapshotModule]; s != nil {
		modules = []string{snapshotModule}
	}
	for _, m := range modules {
		s := k.specs[m]
		if s == nil {
			continue
		}
		types, _ := s.AnyTypesByName(name)
		for _, t := range types {
			if ok(t) {
				return t, nil
			}
		}
	}
	return nil, fmt.Errorf("%s: %s of %s: %w", name, strings.Join(modules, ", "), k.Describe(), errNotFound)
}

func (k *Kernel) findEnum(modules []string, name string) (*btf.Enum, error) {
	t, err := k.find(modules, name, func(t btf.Type) bool { _, ok := t.(*btf.Enum); return ok })
	if err != nil {
		return nil, err
	}
	return t.(*btf.Enum), nil
}

func (k *Kernel) findStruct(modules []string, name string) (*btf.Struct, error) {
	t, err := k.find(modules, name, func(t btf.Type) bool { s, ok := t.(*btf.Struct); return ok && s.Size > 0 })
	if err != nil {
		return nil, err
	}
	return t.(*btf.Struct), nil
}
