package mlx5

import "testing"

// BenchmarkPostMkeyConfigureNewTag is BenchmarkPostMkeyConfigure with the
// wire domain's reference tag changed before every configure, as a
// target that protects each I/O with its LBA does: the signature block is
// checked and encoded every time (the general builder), and the mkey
// never copies a template.
func BenchmarkPostMkeyConfigureNewTag(b *testing.B) { benchPostMkeyConfigure(b, true) }
