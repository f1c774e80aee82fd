package mlx5

import "time"

// mustCome bounds a wait for something that must come: see the external
// tests' mustCome.
const mustCome = 60 * time.Second
