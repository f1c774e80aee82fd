package mlx5

// LiveBuffers is the number of Buffer mappings (the user's and the
// queues') not yet unmapped.
func LiveBuffers() int64 { return liveBuffers.Load() }
