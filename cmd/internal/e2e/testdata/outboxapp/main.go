// Command outboxapp is a helper program for the outbox's kill -9 test
// (cmd/internal/e2e/outbox_test.go): an application with a workflow.Client
// whose outbox is a file.
//
// Usage:
//
//	outboxapp -redis ADDR -queue Q -outbox PATH enqueue -n N
//	outboxapp -redis ADDR -queue Q -outbox PATH flush [-block-after K]
//
// enqueue starts N runs of workflow "ordered" (run i with ordering key
// "k<i%5>", except every fourth run, which has none), prints "queued I ID
// KEY" for each, and exits; with Redis down they all queue. flush opens the
// client (its flusher starts at once), flushes until the outbox is empty,
// prints "drained" and exits. With -block-after K, once K runs were created
// by create.lua (counted when its reply arrives, before the entry leaves
// the outbox), it prints "blocked after K creates" and blocks until it is
// killed.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

func main() {
	addr := flag.String("redis", "", "Redis address")
	queue := flag.String("queue", "", "queue")
	path := flag.String("outbox", "", "outbox file")
	flag.Parse()
	if flag.NArg() < 1 {
		fail("want a command: enqueue or flush")
	}
	cmd := flag.NewFlagSet(flag.Arg(0), flag.ExitOnError)
	n := cmd.Int("n", 200, "runs to start")
	blockAfter := cmd.Int64("block-after", 0, "block after this many creates")
	if err := cmd.Parse(flag.Args()[1:]); err != nil {
		fail(err.Error())
	}
	rdb := redis.NewClient(&redis.Options{Addr: *addr, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	if *blockAfter > 0 {
		rdb.AddHook(&blocker{after: *blockAfter})
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := workflow.OpenClient(rdb, workflow.ClientConfig{Queue: *queue, Outbox: *path, Logger: log})
	if err != nil {
		fail(err.Error())
	}
	defer c.Close()
	ctx := context.Background()
	switch cmd.Name() {
	case "enqueue":
		for i := range *n {
			key := ""
			if i%4 != 0 {
				key = fmt.Sprintf("k%d", i%5)
			}
			run, err := c.Start(ctx, "ordered", map[string]int{"i": i}, &workflow.StartOptions{OrderingKey: key})
			if err != nil {
				fail(err.Error())
			}
			if !run.Queued {
				fail("run " + run.ID + " was not queued")
			}
			fmt.Printf("queued %d %s %s\n", i, run.ID, key)
		}
	case "flush":
		for {
			if _, err := c.FlushOutbox(ctx); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond) //nolint:forbidigo // a pause between tries while Redis comes back, not synchronisation
		}
		fmt.Println("drained")
	default:
		fail("unknown command " + cmd.Name())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "outboxapp:", msg)
	os.Exit(2)
}

// blocker blocks the process after the after-th create.lua
// (testkit.IsRunCreate, in the pipeline of Store.CreateRuns) that
// succeeded.
type blocker struct {
	after int64
	n     atomic.Int64
}

func (*blocker) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*blocker) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (b *blocker) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if cmd.Err() == nil && testkit.IsRunCreate(cmd) && b.n.Add(1) == b.after {
				fmt.Printf("blocked after %d creates\n", b.after)
				time.Sleep(time.Hour) // until killed (a select{} could end in the runtime's deadlock panic)
			}
		}
		return err
	}
}
