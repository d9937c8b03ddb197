package retrystate

import (
	"strings"
	"testing"
)

// TestCompleteInlinesPutTask: complete.lua writes the next step's task with
// an inline copy of put_task's pending branch (lua/lib/put_task.lua). tasks.CheckAsynqWire
// checks put_task against asynq's own enqueue, so the copy must be the same
// code, with complete.lua's names for put_task's arguments.
func TestCompleteInlinesPutTask(t *testing.T) {
	t.Parallel()
	common := mustRead("lua/lib/put_task.lua")
	start := strings.Index(common, "local function put_task(")
	if start < 0 {
		t.Fatal("lua/lib/put_task.lua has no put_task")
	}
	body := common[start:]
	const branch = "if due <= NOW then\n"
	i := strings.Index(body, branch)
	j := strings.Index(body, "\n  else\n")
	if i < 0 || j < i {
		t.Fatalf("put_task has no pending branch of the expected shape:\n%s", body)
	}
	pending := body[i+len(branch) : j+1]
	inline := strings.NewReplacer("task_key", "next_task", "pending_key", "pending", ", msg,", ", next_msg,").
		Replace(pending)
	if n := strings.Count(inline, "redis.call("); n != 2 {
		t.Fatalf("put_task's pending branch makes %d calls, want the HSET and the LPUSH:\n%s", n, pending)
	}
	if !strings.Contains(mustRead("lua/complete.lua"), inline) {
		t.Errorf("complete.lua does not write the next step's task as put_task does; want these lines in it:\n%s",
			inline)
	}
}
