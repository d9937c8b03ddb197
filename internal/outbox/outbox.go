// Package outbox is a durable, bounded FIFO of opaque entries in a local
// bbolt file: the store under workflow.Client's offline enqueue. It knows
// nothing about what an entry means; the client encodes its entries as JSON.
//
// The file holds four buckets:
//
//	meta      format ("cairn-outbox/1"), count and bytes of the queued entries
//	queue     8-byte big-endian sequence number -> entry, oldest first
//	dead      the dead letters: entries taken out of the queue because they
//	          could not be applied, by their original sequence number
//	aliases   a key -> a value (the client: a queued run ID -> the run its
//	          idempotency key named), oldest keys first
//
// Every change is one bbolt read-write transaction, which is written and
// fsynced before it returns: a process killed at any moment leaves the file
// as the last committed transaction left it. One process at a time opens the
// file read-write (bbolt takes an exclusive flock); Open waits up to
// Options.LockTimeout for it and then fails with ErrLocked.
package outbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Format is the format version written in the meta bucket; Open refuses a
// file of another format.
const Format = "cairn-outbox/1"

// Defaults of Options.
const (
	DefaultMaxEntries  = 10000
	DefaultMaxBytes    = 64 << 20
	DefaultMaxDead     = 1000
	DefaultMaxAliases  = 10000
	DefaultLockTimeout = 5 * time.Second
)

// Errors.
var (
	// ErrFull: the queue holds Options.MaxEntries entries or
	// Options.MaxBytes bytes; nothing was added.
	ErrFull = errors.New("outbox full")
	// ErrLocked: another process has the file open.
	ErrLocked = errors.New("outbox file in use by another process")
	// ErrNotFound: no queued entry has the sequence number.
	ErrNotFound = errors.New("outbox entry not found")
)

var (
	bucketMeta    = []byte("meta")
	bucketQueue   = []byte("queue")
	bucketDead    = []byte("dead")
	bucketAliases = []byte("aliases")

	keyFormat = []byte("format")
	keyCount  = []byte("count")
	keyBytes  = []byte("bytes")
)

// Options bound the outbox. A zero field takes its default.
type Options struct {
	// MaxEntries bounds the queued entries. Default DefaultMaxEntries.
	MaxEntries int
	// MaxBytes bounds the total size of the queued entries. Default
	// DefaultMaxBytes.
	MaxBytes int64
	// MaxDead bounds the dead letters: beyond it, the oldest is dropped
	// (Bury says how many). Default DefaultMaxDead.
	MaxDead int
	// MaxAliases bounds the aliases: beyond it, the one with the smallest
	// key is dropped. Default DefaultMaxAliases.
	MaxAliases int
	// LockTimeout bounds the wait for another process to close the file.
	// Default DefaultLockTimeout.
	LockTimeout time.Duration
	// ReadOnly opens the file for reading only: the lock is shared with
	// other readers, and a file that does not exist is an error
	// (os.ErrNotExist).
	ReadOnly bool
}

func (o *Options) defaults() {
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxDead <= 0 {
		o.MaxDead = DefaultMaxDead
	}
	if o.MaxAliases <= 0 {
		o.MaxAliases = DefaultMaxAliases
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
}

// Box is an open outbox file. Its methods are safe for concurrent use.
type Box struct {
	db   *bolt.DB
	opts Options
	path string
}

// Item is a queued entry or a dead letter.
type Item struct {
	Seq   uint64
	Value []byte
}

// Stats describe the queue.
type Stats struct {
	// Entries and Bytes are the queued entries and their total size.
	Entries int
	Bytes   int64
	// Dead is the number of dead letters.
	Dead int
	// Limits.
	MaxEntries int
	MaxBytes   int64
}

// Open opens (or creates, mode 0600) the outbox file at path.
func Open(path string, opts Options) (*Box, error) {
	opts.defaults()
	if opts.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, err
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.LockTimeout, ReadOnly: opts.ReadOnly})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (waited %s for it)", ErrLocked, path, opts.LockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("outbox %s: %w", path, err)
	}
	b := &Box{db: db, opts: opts, path: path}
	if opts.ReadOnly {
		err = db.View(func(tx *bolt.Tx) error { return checkFormat(tx.Bucket(bucketMeta)) })
	} else {
		err = db.Update(initBuckets)
	}
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("outbox %s: %w", path, err)
	}
	return b, nil
}

func initBuckets(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		var err error
		if meta, err = tx.CreateBucket(bucketMeta); err != nil {
			return err
		}
		if err := meta.Put(keyFormat, []byte(Format)); err != nil {
			return err
		}
	}
	if err := checkFormat(meta); err != nil {
		return err
	}
	for _, name := range [][]byte{bucketQueue, bucketDead, bucketAliases} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return nil
}

func checkFormat(meta *bolt.Bucket) error {
	if meta == nil {
		return fmt.Errorf("not a Cairn outbox (no %q bucket)", bucketMeta)
	}
	if f := meta.Get(keyFormat); !bytes.Equal(f, []byte(Format)) {
		return fmt.Errorf("not a Cairn outbox of format %s (format %q)", Format, f)
	}
	return nil
}

// Path returns the file's path.
func (b *Box) Path() string { return b.path }

// Close closes the file.
func (b *Box) Close() error { return b.db.Close() }

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

func getInt(meta *bolt.Bucket, key []byte) int64 {
	v := meta.Get(key)
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v)) //nolint:gosec // written by putInt from a non-negative int64
}

func putInt(meta *bolt.Bucket, key []byte, n int64) error {
	return meta.Put(key, seqKey(uint64(max(n, 0))))
}

// account adds dn entries and db bytes to the queue's counters.
func account(tx *bolt.Tx, dn, db int64) error {
	meta := tx.Bucket(bucketMeta)
	if err := putInt(meta, keyCount, getInt(meta, keyCount)+dn); err != nil {
		return err
	}
	return putInt(meta, keyBytes, getInt(meta, keyBytes)+db)
}

// Append adds value at the tail of the queue and returns its sequence
// number, or ErrFull (wrapped, saying which bound) when it would exceed a
// bound.
func (b *Box) Append(value []byte) (uint64, error) {
	var seq uint64
	err := b.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		n, size := getInt(meta, keyCount), getInt(meta, keyBytes)
		if n >= int64(b.opts.MaxEntries) {
			return fmt.Errorf("%w: it holds %d entries, its limit", ErrFull, n)
		}
		if size+int64(len(value)) > b.opts.MaxBytes {
			return fmt.Errorf("%w: %d bytes queued, and %d more would pass its limit of %d", ErrFull, size,
				len(value), b.opts.MaxBytes)
		}
		q := tx.Bucket(bucketQueue)
		var err error
		if seq, err = q.NextSequence(); err != nil {
			return err
		}
		if err := q.Put(seqKey(seq), value); err != nil {
			return err
		}
		return account(tx, 1, int64(len(value)))
	})
	return seq, err
}

// First returns the oldest queued entry; ok is false when the queue is
// empty.
func (b *Box) First() (it Item, ok bool, err error) {
	err = b.db.View(func(tx *bolt.Tx) error {
		k, v := tx.Bucket(bucketQueue).Cursor().First()
		if k == nil {
			return nil
		}
		it, ok = Item{Seq: binary.BigEndian.Uint64(k), Value: bytes.Clone(v)}, true
		return nil
	})
	return it, ok, err
}

// Update replaces the value of the queued entry seq (ErrNotFound if there
// is none). Its new size counts against MaxBytes only for the queue's
// accounting: an update is never refused for size.
func (b *Box) Update(seq uint64, value []byte) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		q := tx.Bucket(bucketQueue)
		old := q.Get(seqKey(seq))
		if old == nil {
			return ErrNotFound
		}
		d := int64(len(value) - len(old))
		if err := q.Put(seqKey(seq), value); err != nil {
			return err
		}
		return account(tx, 0, d)
	})
}

// Delete removes the queued entry seq (a no-op if there is none) and, when
// aliasKey is not empty, records aliasKey -> aliasValue in the same
// transaction.
func (b *Box) Delete(seq uint64, aliasKey, aliasValue []byte) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		if err := remove(tx, seq); err != nil {
			return err
		}
		if len(aliasKey) == 0 {
			return nil
		}
		return b.putAlias(tx, aliasKey, aliasValue)
	})
}

func remove(tx *bolt.Tx, seq uint64) error {
	q := tx.Bucket(bucketQueue)
	old := q.Get(seqKey(seq))
	if old == nil {
		return nil
	}
	n := int64(len(old))
	if err := q.Delete(seqKey(seq)); err != nil {
		return err
	}
	return account(tx, -1, -n)
}

// Bury moves the queued entry seq to the dead letters with value (what the
// caller wants to keep of it: the entry and why it died). When the dead
// letters then pass MaxDead, the oldest are dropped: dropped is how many.
func (b *Box) Bury(seq uint64, value []byte) (dropped int, err error) {
	err = b.db.Update(func(tx *bolt.Tx) error {
		dropped = 0
		if err := remove(tx, seq); err != nil {
			return err
		}
		d := tx.Bucket(bucketDead)
		if err := d.Put(seqKey(seq), value); err != nil {
			return err
		}
		for countKeys(d) > b.opts.MaxDead {
			k, _ := d.Cursor().First()
			if err := d.Delete(k); err != nil {
				return err
			}
			dropped++
		}
		return nil
	})
	return dropped, err
}

// Requeue moves every dead letter back to the tail of the queue, oldest
// first, with new sequence numbers; value gives the entry to queue for a
// dead letter's value. It moves as many as fit (the bounds of Append) and
// returns how many it moved; ErrFull when not all fitted.
func (b *Box) Requeue(value func(dead []byte) []byte) (moved int, err error) {
	err = b.db.Update(func(tx *bolt.Tx) error {
		moved = 0
		d, q, meta := tx.Bucket(bucketDead), tx.Bucket(bucketQueue), tx.Bucket(bucketMeta)
		var keys [][]byte
		var vals [][]byte
		_ = d.ForEach(func(k, v []byte) error {
			keys, vals = append(keys, bytes.Clone(k)), append(vals, value(v))
			return nil
		})
		for i, k := range keys {
			n, size := getInt(meta, keyCount), getInt(meta, keyBytes)
			if n >= int64(b.opts.MaxEntries) || size+int64(len(vals[i])) > b.opts.MaxBytes {
				return nil
			}
			seq, err := q.NextSequence()
			if err != nil {
				return err
			}
			if err := q.Put(seqKey(seq), vals[i]); err != nil {
				return err
			}
			if err := account(tx, 1, int64(len(vals[i]))); err != nil {
				return err
			}
			if err := d.Delete(k); err != nil {
				return err
			}
			moved++
		}
		return nil
	})
	if err == nil {
		if st, serr := b.Stats(); serr == nil && st.Dead > 0 {
			err = fmt.Errorf("%w: %d dead letters did not fit and stay", ErrFull, st.Dead)
		}
	}
	return moved, err
}

// DropDead deletes every dead letter and returns how many there were.
func (b *Box) DropDead() (n int, err error) {
	err = b.db.Update(func(tx *bolt.Tx) error {
		n = countKeys(tx.Bucket(bucketDead))
		if err := tx.DeleteBucket(bucketDead); err != nil {
			return err
		}
		_, err := tx.CreateBucket(bucketDead)
		return err
	})
	return n, err
}

// countKeys counts a bucket's keys, changes of the transaction included
// (Bucket.Stats reads only what was committed).
func countKeys(b *bolt.Bucket) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n
}

func (b *Box) putAlias(tx *bolt.Tx, key, value []byte) error {
	a := tx.Bucket(bucketAliases)
	if err := a.Put(key, value); err != nil {
		return err
	}
	for countKeys(a) > b.opts.MaxAliases {
		k, _ := a.Cursor().First()
		if err := a.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// Alias returns the value recorded for key, or nil.
func (b *Box) Alias(key []byte) ([]byte, error) {
	var v []byte
	err := b.db.View(func(tx *bolt.Tx) error {
		v = bytes.Clone(tx.Bucket(bucketAliases).Get(key))
		return nil
	})
	return v, err
}

// Queued returns the queued entries, oldest first.
func (b *Box) Queued() ([]Item, error) { return b.list(bucketQueue) }

// Dead returns the dead letters, oldest first.
func (b *Box) Dead() ([]Item, error) { return b.list(bucketDead) }

func (b *Box) list(bucket []byte) ([]Item, error) {
	var out []Item
	err := b.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			out = append(out, Item{Seq: binary.BigEndian.Uint64(k), Value: bytes.Clone(v)})
			return nil
		})
	})
	return out, err
}

// Stats returns the queue's size and the number of dead letters.
func (b *Box) Stats() (Stats, error) {
	st := Stats{MaxEntries: b.opts.MaxEntries, MaxBytes: b.opts.MaxBytes}
	err := b.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		st.Entries, st.Bytes = int(getInt(meta, keyCount)), getInt(meta, keyBytes)
		st.Dead = countKeys(tx.Bucket(bucketDead))
		return nil
	})
	return st, err
}

// Len returns the number of queued entries (one read of a counter).
func (b *Box) Len() (int, error) {
	var n int
	err := b.db.View(func(tx *bolt.Tx) error {
		n = int(getInt(tx.Bucket(bucketMeta), keyCount))
		return nil
	})
	return n, err
}
