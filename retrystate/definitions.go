package retrystate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A definition is stored once per version, not once per run. Publishing a
// workflow writes, besides its snapshot JSON (defs, for clients), its
// template: the fixed fields every run of it starts with (the steps' names,
// policies and limits, their compensations and groups, the run's limits),
// named as in the run hash, in the hash cairn:{q}:def:<sha>, where sha is
// the sha256 of the template (definitionSHA); and the version (that sha) in
// defv. A template never changes (a changed definition is another sha) and
// is never deleted: runs of any age refer to theirs (the run field def),
// and there is one per definition version, not per run.
//
// create.lua copies the template into a new run (the scripts read a live
// run's fixed fields from its own hash, as before), with Redis's COPY of
// the version's seed (keys.go's definition), and refuses a caller whose
// version is not the published one ("stale"). When the run ends
// successfully or is cancelled, compact_run (lua/lib/compact_run.lua) deletes those
// fields again, with every field that holds its default, and Store.Run
// fills them back from the template (fillCompact), so a finished run keeps
// only what is its own.

// templateFields returns the fixed fields create.lua writes for a run r
// (from its steps, limits, compensations, groups and on_failure; not its
// ID, input, owner, key, gates or times), named as in the run hash: the
// template of r's definition.
func templateFields(r NewRun) map[string]string {
	t := map[string]string{
		"steps":          strconv.Itoa(len(r.Steps)),
		"max_iterations": strconv.Itoa(r.MaxIterations),
		"run_timeout_ms": strconv.FormatInt(r.RunTimeout.Milliseconds(), 10),
	}
	sagas := r.Compensate
	for i, st := range r.Steps {
		p := stepPrefix(i)
		t[p+"name"] = st.Name
		t[p+"optional"] = boolArg(st.Optional)
		t[p+"max_attempts"] = strconv.Itoa(st.MaxAttempts)
		t[p+"max_crashes"] = strconv.Itoa(st.MaxCrashes)
		t[p+"timeout_ms"] = strconv.FormatInt(st.Timeout.Milliseconds(), 10)
		t[p+"policy"] = st.Policy
		t[p+"run_timeout_ms"] = strconv.FormatInt(st.RunTimeout.Milliseconds(), 10)
		t[p+"max_iterations"] = strconv.Itoa(st.MaxIterations)
		if st.Kind != KindBody {
			t[p+"kind"] = string(st.Kind)
			t[p+"signal"] = st.Signal
			t[p+"wait_ms"] = strconv.FormatInt(st.Wait.Milliseconds(), 10)
		}
		if b := st.Breaker.encode(); b != "" {
			t[p+"breaker"] = b
		}
		if c := st.Compensation; c != nil {
			sagas = true
			cp := stepPrefix(CompBase + i)
			t[p+"comp"] = "1"
			t[cp+"name"] = CompensationPrefix + st.Name
			t[cp+"max_attempts"] = strconv.Itoa(c.MaxAttempts)
			t[cp+"max_crashes"] = strconv.Itoa(c.MaxCrashes)
			t[cp+"timeout_ms"] = strconv.FormatInt(c.Timeout.Milliseconds(), 10)
			t[cp+"policy"] = c.Policy
			if b := c.Breaker.encode(); b != "" {
				t[cp+"breaker"] = b
			}
		}
		if st.Group != "" {
			sagas = true
			t[p+"group"] = st.Group
			t[p+"group_opt"] = boolArg(st.GroupOptional)
		}
	}
	if sagas {
		t["sagas"] = "1"
		if r.Compensate {
			t["on_failure"] = "compensate"
		}
	}
	return t
}

func stepPrefix(idx int) string { return "s" + strconv.Itoa(idx) + "." }

// definitionSHA returns the version of a template: the sha256, in hex, of
// its fields sorted by name, each name and value preceded by its length.
func definitionSHA(template map[string]string) string {
	names := make([]string, 0, len(template))
	for k := range template {
		names = append(names, k)
	}
	slices.Sort(names)
	h := sha256.New()
	for _, k := range names {
		v := template[k]
		_, _ = fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(v), v)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// PublishedDefinition is a definition a worker publishes.
type PublishedDefinition struct {
	Name string
	// JSON is the definition's snapshot, as clients read it.
	JSON string
	// Run holds the fixed part of the definition's runs: RunTimeout,
	// MaxIterations, Steps and Compensate (templateFields); its other
	// fields are not used.
	Run NewRun
}

// PublishDefinitions publishes definitions so that clients without the
// workflow code (the CLI, the dashboard) can start runs: for each, its
// template (written once: it is named by its contents), its snapshot JSON
// and its version, in one transaction. It returns the versions by name.
func (s *Store) PublishDefinitions(ctx context.Context, defs []PublishedDefinition) (map[string]string, error) {
	return s.publishDefinitions(ctx, defs, false)
}

// PublishNewDefinitions publishes, as PublishDefinitions does, those of defs
// of which no version is published: a workflow published meanwhile (by a
// worker) keeps the version it has. It returns the versions of defs.
func (s *Store) PublishNewDefinitions(ctx context.Context, defs []PublishedDefinition) (map[string]string, error) {
	return s.publishDefinitions(ctx, defs, true)
}

func (s *Store) publishDefinitions(ctx context.Context, defs []PublishedDefinition, onlyNew bool) (map[string]string, error) {
	versions := make(map[string]string, len(defs))
	if len(defs) == 0 {
		return versions, nil
	}
	pipe := s.rdb.TxPipeline()
	for _, d := range defs {
		t := templateFields(d.Run)
		sha := definitionSHA(t)
		versions[d.Name] = sha
		vals := make([]any, 0, 2*len(t))
		for k, v := range t {
			vals = append(vals, k, v)
		}
		pipe.HSet(ctx, s.keys.definition(sha), vals...)
		if onlyNew {
			// Publishers write both fields in one transaction, so both
			// are there or neither.
			pipe.HSetNX(ctx, s.keys.definitions(), d.Name, d.JSON)
			pipe.HSetNX(ctx, s.keys.definitionVersions(), d.Name, sha)
		} else {
			pipe.HSet(ctx, s.keys.definitions(), d.Name, d.JSON)
			pipe.HSet(ctx, s.keys.definitionVersions(), d.Name, sha)
		}
		s.templates.Store(sha, t)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("publish definitions: %w", err)
	}
	return versions, nil
}

// DefinitionVersion is a workflow's published definition.
type DefinitionVersion struct {
	// JSON is its snapshot.
	JSON string
	// SHA is its version, which names its template; "" when it was
	// published by a worker that published no versions (before templates).
	SHA string
	// Template is the template SHA names (templateFields); nil without
	// SHA. It must not be changed.
	Template map[string]string
}

// PublishedDefinition returns a workflow's published definition, or
// ErrUnknownWorkflow.
func (s *Store) PublishedDefinition(ctx context.Context, name string) (DefinitionVersion, error) {
	pipe := s.rdb.Pipeline()
	def := pipe.HGet(ctx, s.keys.definitions(), name)
	ver := pipe.HGet(ctx, s.keys.definitionVersions(), name)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return DefinitionVersion{}, err
	}
	if errors.Is(def.Err(), redis.Nil) {
		return DefinitionVersion{}, fmt.Errorf("%w %q", ErrUnknownWorkflow, name)
	}
	v := DefinitionVersion{JSON: def.Val(), SHA: ver.Val()}
	if v.SHA == "" {
		return v, nil
	}
	t, err := s.template(ctx, v.SHA)
	if err != nil {
		return DefinitionVersion{}, err
	}
	if t == nil { // published without its template: not by Cairn
		v.SHA = ""
	}
	v.Template = t
	return v, nil
}

// template returns the template of definition version sha (nil when there
// is none). Templates never change, so the store keeps those it has read.
// The map must not be changed.
func (s *Store) template(ctx context.Context, sha string) (map[string]string, error) {
	if t, ok := s.templates.Load(sha); ok {
		return t.(map[string]string), nil //nolint:forcetypeassert // only maps are stored
	}
	t, err := s.rdb.HGetAll(ctx, s.keys.definition(sha)).Result()
	if err != nil {
		return nil, fmt.Errorf("read definition %s: %w", sha, err)
	}
	if len(t) == 0 {
		return nil, nil
	}
	s.templates.Store(sha, t)
	return t, nil
}

// CreatedRun returns the run that CreateRun wrote for r, as Run would read
// it right after, without reading it: res is CreateRun's OutcomeCreated or
// OutcomeWaiting. (TestCreatedRunIsWhatCreateWrites holds it to
// create.lua.)
func (s *Store) CreatedRun(r NewRun, res CreateResult) *Run {
	h := make(map[string]string, 40+20*len(r.Steps))
	if r.Template != nil {
		maps.Copy(h, r.Template)
	} else {
		maps.Copy(h, templateFields(r))
	}
	now := strconv.FormatInt(ms(r.Now), 10)
	idemKey := ""
	if r.IdempotencyKey != "" {
		idemKey = strings.TrimPrefix(s.keys.idempotency(r.Owner, r.IdempotencyKey), s.keys.prefix)
	}
	maps.Copy(h, map[string]string{"workflow": r.Workflow, "status": string(StatusPending), "owner": r.Owner,
		"input": r.Input, "idempotency_key": r.IdempotencyKey, "idem_key": idemKey, "iterations": "0",
		"deadline": "0", "deadline_base": now, "created_at": now, "started_at": "0", "finished_at": "0",
		"failure_code": "", "failure_reason": "", "warning": "", "needs_attention": "0", "auto_recoveries": "0",
		"current": "0", "updated_at": now})
	if r.Def != "" {
		h["def"] = r.Def
	}
	n := atoi(h["steps"])
	for i := range n {
		p := stepPrefix(i)
		for k, v := range newStepFields {
			h[p+k] = v
		}
	}
	h["s0.attempt"], h["s0.task"] = "1", r.ID+"_s0_a1"
	rt := atoi(h["s0.run_timeout_ms"])
	if rt == 0 {
		rt = atoi(h["run_timeout_ms"])
	}
	if rt > 0 {
		h["deadline"] = strconv.FormatInt(ms(r.Now)+int64(rt), 10)
	}
	if r.OrderingKey != "" || r.MaxRunning > 0 {
		h["gated"], h["ord_key"] = "1", StoredOrderingKey(r.Owner, r.OrderingKey, r.OrderingShared)
		h["ord_limit"] = strconv.Itoa(r.OrderingLimit)
		h["ord_block"], h["wf_limit"], h["waiting"] = boolArg(r.OrderingBlock), strconv.Itoa(r.MaxRunning), ""
	}
	if res.Outcome == OutcomeWaiting {
		h["waiting"], h["s0.task"], h["deadline"] = string(res.WaitReason), "", "0"
	}
	run := recordFromHash(r.ID, h)
	run.Position = res.Position
	return run
}

// newStepFields are the fields create.lua gives every step, but its fixed
// ones (templateFields).
var newStepFields = map[string]string{"status": string(StepPending), "attempt": "0", "budget_base": "0",
	"retry_attempts": "0", "retry_state": string(RetryNone), "next_attempt_at": "0", "attempts_started": "0",
	"crashes": "0", "gen": "0", "task": "", "fence": "", "fence_expires_at": "0", "last_error": "",
	"last_error_class": "", "output": "", "started_at": "0", "finished_at": "0"}

// RegisterDefinitions publishes workflow definitions (name -> JSON) so that
// clients without the workflow code (the CLI, the dashboard) can start runs,
// as workers did before definitions had versions: without a version or a
// template, so the runs started from them carry their fixed fields
// themselves and are never compacted. Workers publish with
// PublishDefinitions.
func (s *Store) RegisterDefinitions(ctx context.Context, defs map[string]string) error {
	if len(defs) == 0 {
		return nil
	}
	vals := make([]any, 0, 2*len(defs))
	for name, def := range defs {
		vals = append(vals, name, def)
	}
	return s.rdb.HSet(ctx, s.keys.definitions(), vals...).Err()
}

// Definition returns the registered definition JSON of a workflow, or
// ErrUnknownWorkflow.
func (s *Store) Definition(ctx context.Context, name string) (string, error) {
	def, err := s.rdb.HGet(ctx, s.keys.definitions(), name).Result()
	if errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("%w %q", ErrUnknownWorkflow, name)
	}
	return def, err
}

// Definitions returns every registered definition, by workflow name.
func (s *Store) Definitions(ctx context.Context) (map[string]string, error) {
	return s.rdb.HGetAll(ctx, s.keys.definitions()).Result()
}
