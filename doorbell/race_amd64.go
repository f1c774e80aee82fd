//go:build race

package doorbell

// raceEnabled: built with the race detector, which sees the Go memory
// model's edges only (sync/atomic), not the CPU's ordering.
const raceEnabled = true
