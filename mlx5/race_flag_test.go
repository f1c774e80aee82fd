//go:build race

package mlx5_test

// raceEnabled says the tests run under the race detector, which slows the
// data path about tenfold: long tests run fewer operations then.
const raceEnabled = true
