package redisurl_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairnhq/cairn/internal/embedded"
	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/redisurl"
)

// A Sentinel URL: the sentinels, the master's name and the database.
// String describes the deployment without its password, for logs.
func ExampleParse() {
	target, err := redisurl.Parse("redis-sentinel://:s3cr3t@10.0.0.1,10.0.0.2:26380/2?master=mymaster")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(target.Topology())
	fmt.Println(target)
	fmt.Println(target.Failover.Password == "s3cr3t")
	// Output:
	// sentinel
	// sentinel master mymaster via 10.0.0.1:26379,10.0.0.2:26380 db 2
	// true
}

// Errors say what is wrong, in one line, without the password; wrap them
// with where the URL came from.
func ExampleParse_errors() {
	for _, url := range []string{
		"localhost:6379",
		"redis://:s3cr3t@10.0.0.1:6379,10.0.0.2:6379",
		"redis-sentinel://:s3cr3t@10.0.0.1:26379",
		"redis-cluster://:s3cr3t@10.0.0.1:6379/1",
	} {
		_, err := redisurl.Parse(url)
		fmt.Println("CAIRN_REDIS_URL:", err)
	}
	// Output:
	// CAIRN_REDIS_URL: no scheme: want redis://, rediss://, redis-sentinel://, rediss-sentinel://, redis-cluster:// or rediss-cluster://
	// CAIRN_REDIS_URL: redis:// takes one host; for several, use redis-sentinel:// (Sentinel) or redis-cluster:// (Cluster)
	// CAIRN_REDIS_URL: no master name: add ?master=NAME (the name the sentinels monitor)
	// CAIRN_REDIS_URL: database "1": a Redis Cluster has only database 0; leave the path out
}

// The client of a URL, whatever its topology, for workflow.NewWorker and
// workflow.NewClient. (Here the URL is an embedded store's; in a service,
// the operator's CAIRN_REDIS_URL.)
func ExampleTarget_NewClient() {
	store, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	target, err := redisurl.Parse(store.URL())
	if err != nil {
		fmt.Println("CAIRN_REDIS_URL:", err)
		return
	}
	rdb := target.NewClient()
	defer rdb.Close()
	// CAIRN_REDIS_MIN_REPLICAS: 0 waits for no replica, and installs nothing.
	fmt.Println(redisurl.WaitForReplicas(rdb, 0, 500*time.Millisecond, slog.Default()) == nil)
	fmt.Println(target.Topology(), workflow.PingQueue(context.Background(), rdb, "orders"))
	// Output:
	// true
	// single <nil>
}
