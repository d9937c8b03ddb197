package embedded

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/testkit"
)

func TestKeysExpireInRealTime(t *testing.T) {
	s, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "v", 150*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx, "k").Result(); n != 1 {
		t.Fatal("key missing right after SET")
	}
	testkit.Eventually(t, 5*time.Second, "the key with a 150ms TTL to expire", func() bool {
		n, err := rdb.Exists(ctx, "k").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}

func TestSecondStoreOnSameAddrFails(t *testing.T) {
	s, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Start(s.Addr()); err == nil {
		t.Fatal("second store on the same address started")
	}
}
