package embedded

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := rdb.Exists(ctx, "k").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("key with a 150ms TTL still exists after 5s")
		}
		time.Sleep(20 * time.Millisecond)
	}
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
