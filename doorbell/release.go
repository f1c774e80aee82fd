//go:build !amd64 || race

package doorbell

// release stores the record word w to p after every earlier load and
// store: here publish's store (on arm64 a DMB OSHST and a store-release);
// on amd64 without the race detector a plain store (release_amd64.go).
func release(p *uint32, w uint32) { publish(p, w) }
