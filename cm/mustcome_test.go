package cm_test

import "time"

// mustCome bounds a wait for something that must come (an event, a
// completion, a connection, ids or goroutines going): the wait ends as
// soon as it comes, so the bound costs nothing when all is well, and it
// is long enough that a loaded machine or qemu-user does not fail a test
// that is right, while a loss still fails it, a minute late.
const mustCome = 60 * time.Second
