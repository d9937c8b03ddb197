package webhookdelivery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/webhook"
)

// Notifier turns the queue's notification stream into webhook deliveries:
// it reads the stream with a consumer group (each entry goes to one of the
// workers running a Notifier), enqueues one asynq task of type
// tasks.TypeWebhook per entry, with a task ID derived from the entry, and
// then acknowledges the entry. Entries another worker read but did not
// acknowledge (it died) are claimed after Config.ClaimIdle. The stream is
// written atomically with each run transition, and the task is retried by
// asynq, so a notification survives any crash; delivery is at least once.
//
// A workflow.Worker with WorkerConfig.Webhook set runs a Notifier and
// handles the tasks with a Handler; use them directly with an asynq server
// of your own.
type Notifier struct {
	cfg      Config
	store    *retrystate.Store
	client   *asynq.Client
	queue    string
	consumer string
	log      *slog.Logger
	block    time.Duration // how long a read of the stream waits for entries
}

// NewNotifier returns a notifier of the notifications in store that
// enqueues their deliveries with client on queue. It does not validate cfg
// (see Config.Validate); a nil log is slog.Default().
func NewNotifier(store *retrystate.Store, client *asynq.Client, queue string, cfg Config, log *slog.Logger) *Notifier {
	if log == nil {
		log = slog.Default()
	}
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &Notifier{
		cfg: cfg.withDefaults(), store: store, client: client, queue: queue,
		consumer: fmt.Sprintf("%s_%d_%s", host, os.Getpid(), hex.EncodeToString(b[:])),
		log:      log.With("component", "webhook"),
		block:    notifyBlock,
	}
}

const (
	notifyBatch      = 100
	notifyBlock      = time.Second
	pruneEvery       = 10 * time.Minute
	pruneIdle        = time.Hour
	notifyMaxBackoff = 10 * time.Second
)

// Prepare creates the notification stream's consumer group the notifier
// reads with, if it does not exist: from then on, every notification is
// delivered (the group starts at the stream's end). Run does it too; call
// Prepare first to know that the notifications of what follows will be
// delivered.
func (n *Notifier) Prepare(ctx context.Context) error {
	return n.store.CreateNotifyGroup(ctx, n.cfg.Group)
}

// Run delivers notifications until ctx is done. While Redis is unreachable
// it keeps trying and logs it.
func (n *Notifier) Run(ctx context.Context) {
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, notifyMaxBackoff) {
		err := n.store.CreateNotifyGroup(ctx, n.cfg.Group)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		n.log.Error("cannot create the notification consumer group; retrying", attrError, err, "retry_in", backoff)
		if sleep(ctx, backoff) != nil {
			return
		}
	}
	n.log.Info("webhook notifier started", "url", n.cfg.redactedURL(), "group", n.cfg.Group, "consumer", n.consumer)
	var lastClaim, lastPrune time.Time
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		now := n.cfg.Clock.Now()
		var err error
		if now.Sub(lastClaim) >= n.cfg.ClaimIdle {
			lastClaim = now
			err = n.claim(ctx)
		}
		if err == nil && now.Sub(lastPrune) >= pruneEvery {
			lastPrune = now
			if k, perr := n.store.PruneNotifyConsumers(ctx, n.cfg.Group, n.consumer, pruneIdle); perr != nil {
				n.log.Debug("could not prune idle notification consumers", attrError, perr)
			} else if k > 0 {
				n.log.Info("pruned idle notification consumers", "count", k)
			}
		}
		if err == nil {
			var ns []retrystate.Notification
			ns, err = n.store.ReadNotifyGroup(ctx, n.cfg.Group, n.consumer, notifyBatch, n.block)
			if err == nil {
				err = n.enqueue(ctx, ns)
			}
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			continue
		}
		if ctx.Err() != nil {
			return
		}
		// Entries read but not enqueued stay pending; claim takes them
		// up again once they are ClaimIdle old.
		n.log.Warn("webhook notifier: redis error; retrying", attrError, err, "retry_in", backoff)
		if strings.Contains(err.Error(), "NOGROUP") { // the stream was deleted (a flushed Redis)
			if cerr := n.store.CreateNotifyGroup(ctx, n.cfg.Group); cerr != nil {
				n.log.Warn("cannot create the notification consumer group", attrError, cerr)
			}
		}
		if sleep(ctx, backoff) != nil {
			return
		}
		backoff = min(2*backoff, notifyMaxBackoff)
	}
}

// sleep waits for d or until ctx is done, and returns ctx's error then.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// claim takes over and enqueues the entries pending for ClaimIdle or more:
// those of dead consumers, and this one's that failed to enqueue.
func (n *Notifier) claim(ctx context.Context) error {
	cursor := "0-0"
	for {
		ns, next, err := n.store.ClaimNotifications(ctx, n.cfg.Group, n.consumer, n.cfg.ClaimIdle, cursor, notifyBatch)
		if err != nil {
			return err
		}
		if len(ns) > 0 {
			n.log.Info("claimed unacknowledged notifications", "count", len(ns))
		}
		if err := n.enqueue(ctx, ns); err != nil {
			return err
		}
		if next == "0-0" || next == "" || ctx.Err() != nil {
			return ctx.Err()
		}
		cursor = next
	}
}

// enqueue enqueues the delivery of each notification and acknowledges those
// enqueued. It stops at the first error: the rest stay pending.
func (n *Notifier) enqueue(ctx context.Context, ns []retrystate.Notification) error {
	done := make([]string, 0, len(ns))
	var err error
	for _, x := range ns {
		if err = n.enqueueOne(ctx, x); err != nil {
			break
		}
		done = append(done, x.ID)
	}
	if aerr := n.store.AckNotifications(ctx, n.cfg.Group, done...); aerr != nil && err == nil {
		err = aerr
	}
	return err
}

// payloadOf is the body of the delivery of x. The run's owner stays in the
// details, where the stream has it.
func payloadOf(x retrystate.Notification) webhook.Payload {
	return webhook.Payload{ID: x.ID, Type: x.Type, At: x.At.UTC(), RunID: x.RunID, Workflow: x.Workflow, Details: x.Fields}
}

func (n *Notifier) enqueueOne(ctx context.Context, x retrystate.Notification) error {
	if x.Type == "" { // trimmed from the stream before it was delivered
		n.log.Warn("notification trimmed from the stream before delivery", "delivery", x.ID)
		return nil
	}
	if !n.cfg.wants(x.Type) {
		return nil
	}
	body, err := json.Marshal(payloadOf(x))
	if err != nil {
		return err
	}
	id := tasks.WebhookID(x.ID)
	_, err = n.client.EnqueueContext(ctx, asynq.NewTask(tasks.TypeWebhook, body),
		tasks.WebhookOptions(n.queue, id, n.cfg.MaxRetry)...)
	switch {
	case errors.Is(err, asynq.ErrTaskIDConflict):
		n.log.Debug("webhook delivery already enqueued", attrRunID, x.RunID, "event", x.Type, "delivery", x.ID)
		return nil
	case err != nil:
		return fmt.Errorf("enqueue webhook delivery %s: %w", id, err)
	}
	n.log.Debug("webhook delivery enqueued", attrRunID, x.RunID, "event", x.Type, "delivery", x.ID, attrTaskID, id)
	return nil
}
