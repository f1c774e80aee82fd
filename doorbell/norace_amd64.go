//go:build !race

package doorbell

// raceEnabled: built with the race detector (race.go).
const raceEnabled = false
