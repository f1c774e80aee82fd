package kernel

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The kernel's BTF on the host, without booting it: vmlinux's .BTF section
// from the compressed kernel image, and each module's .BTF section (split
// BTF on top of vmlinux's, as /sys/kernel/btf/MODULE holds it). The ABI
// generator (internal/cmd/abigen) reads them.

// VmlinuxBTF returns the raw BTF of the kernel image: the .BTF section of
// the vmlinux ELF inside vmlinuz, decompressed once and cached in the
// kernel's cache entry (lab-btf/vmlinux.btf), as /sys/kernel/btf/vmlinux
// holds it on the running kernel.
func (k *Kernel) VmlinuxBTF() ([]byte, error) {
	cached := filepath.Join(k.Root, "lab-btf", "vmlinux.btf")
	if b, err := os.ReadFile(cached); err == nil {
		return b, nil
	}
	image, err := os.ReadFile(k.Vmlinuz())
	if err != nil {
		return nil, err
	}
	payload, ext, err := bzImagePayload(image)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.vmlinuz, err)
	}
	vmlinux, err := decompress(k.vmlinuz, ext, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	b, err := sectionOf(bytes.NewReader(vmlinux), ".BTF")
	if err != nil {
		return nil, fmt.Errorf("vmlinux of %s: %w", k.Release, err)
	}
	if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
		return nil, err
	}
	return b, writeAtomic(cached, b)
}

// ModuleBTF returns the raw split BTF of module name (its .BTF section),
// decompressing the module first if the package compresses it.
func (k *Kernel) ModuleBTF(name string) ([]byte, error) {
	index, err := k.moduleIndex()
	if err != nil {
		return nil, err
	}
	rel, ok := index[Normalize(name)]
	if !ok {
		return nil, fmt.Errorf("module %s is not in %s: %w", name, k.Package, fs.ErrNotExist)
	}
	plain, err := k.plainModule(rel)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(plain)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := sectionOf(f, ".BTF")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	return b, nil
}

func sectionOf(r interface {
	ReadAt([]byte, int64) (int, error)
}, name string) ([]byte, error) {
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, err
	}
	sec := f.Section(name)
	if sec == nil {
		return nil, fmt.Errorf("no %s section", name)
	}
	return sec.Data()
}

// bzImagePayload returns the compressed vmlinux inside an x86 bzImage and
// the extension of its compression, from the boot protocol's setup header
// (Documentation/arch/x86/boot.rst, protocol 2.08 and later): setup_sects
// at 0x1f1, payload_offset and payload_length at 0x248. The protected-mode
// code starts after the setup sectors. An xz or zstd payload ends with 4
// bytes the kernel's build appends (size_append in scripts/Makefile.lib:
// the uncompressed size), which are not part of the stream.
func bzImagePayload(image []byte) ([]byte, string, error) {
	if len(image) < 0x250 || string(image[0x202:0x206]) != "HdrS" {
		return nil, "", errors.New("not a bzImage (no HdrS setup header)")
	}
	if version := binary.LittleEndian.Uint16(image[0x206:]); version < 0x208 {
		return nil, "", fmt.Errorf("boot protocol %#x has no payload fields", version)
	}
	setupSects := int(image[0x1f1])
	if setupSects == 0 {
		setupSects = 4
	}
	start := (setupSects+1)*512 + int(binary.LittleEndian.Uint32(image[0x248:]))
	end := start + int(binary.LittleEndian.Uint32(image[0x24c:]))
	if end > len(image) || end-start < 8 {
		return nil, "", fmt.Errorf("payload %d..%d outside the %d-byte image", start, end, len(image))
	}
	p := image[start:end]
	switch {
	case bytes.HasPrefix(p, []byte("\xfd7zXZ\x00")):
		return p[:len(p)-4], ".xz", nil
	case bytes.HasPrefix(p, []byte("\x28\xb5\x2f\xfd")):
		return p[:len(p)-4], ".zst", nil
	case bytes.HasPrefix(p, []byte("\x1f\x8b")):
		return p, ".gz", nil
	}
	return nil, "", fmt.Errorf("payload compressed in an unknown format (% x)", p[:min(len(p), 6)])
}
