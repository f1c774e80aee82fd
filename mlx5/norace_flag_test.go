//go:build !race

package mlx5_test

// raceEnabled: see race_flag_test.go.
const raceEnabled = false
