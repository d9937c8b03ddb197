package testkit

import (
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// IsRunCreate reports whether cmd is a call of retrystate's create.lua as
// Store.CreateRuns sends it: EVALSHA (or EVAL) with six keys, the first a
// run's hash (createArgs in retrystate/runs.go). Redis hooks that stand in
// for a fault at a run's creation recognise it with this.
func IsRunCreate(cmd redis.Cmder) bool {
	args := cmd.Args()
	return (cmd.Name() == "evalsha" || cmd.Name() == "eval") && len(args) > 3 &&
		fmt.Sprint(args[2]) == "6" && strings.Contains(fmt.Sprint(args[3]), ":run:")
}
