package mlx5

// inUse is i25-b's (mlx5/mkeycrypto.go): an EBUSY *Error while an mkey
// uses the DEK. This stub lets i25-c's branch build; the merge deletes it.
func (d *DEK) inUse() error { return nil }
