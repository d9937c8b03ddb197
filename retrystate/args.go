package retrystate

import "github.com/cairnhq/cairn/tasks"

// The KEYS and ARGV of each script, by name. A script's header lists them
// in order, by name (lua/README.md), and the script reads them so, in
// order: "local RUN, next_task = unpack(KEYS)". Here each script has a
// struct whose fields carry those names (tag key for a key, arg for an
// argument) and whose method args returns the values in the header's
// order. TestScriptArgsFollowTheHeaders holds each struct's order to its
// script's header, and TestScriptsReadTheirArgsByName the script's reads.

// luaArgs is the KEYS and ARGV of one call of a script.
type luaArgs interface {
	args() (keys []string, argv []any)
}

// runArgs are the first key and the first three arguments of every
// run-level script: the run's hash, its ID, the queue's key prefix and now
// (Unix ms).
type runArgs struct {
	Run    string `key:"RUN"`
	RunID  string `arg:"RUN_ID"`
	Prefix string `arg:"PREFIX"`
	Now    int64  `arg:"NOWS"`
}

// createLua is create.lua's. A run of a template (Steps empty) sends
// neither its steps nor its sagas; the tail from FirstMsg on is sent only
// as far as it holds something.
type createLua struct {
	runArgs
	Idem          string           `key:"idem"`
	LegacyIdem    string           `key:"legacy_idem"`
	FirstTask     string           `key:"first_task"`
	Pending       string           `key:"pending"`
	Seed          string           `key:"seed"`
	Workflow      string           `arg:"workflow"`
	Input         string           `arg:"input"`
	Owner         string           `arg:"owner"`
	IdemKey       string           `arg:"idempotency_key"`
	Def           string           `arg:"def"`
	RunTimeout    int64            `arg:"run_timeout"`
	MaxIterations int              `arg:"max_iterations"`
	Steps         []createStepLua  `arg:"steps"`
	OrdKey        string           `arg:"ord_key"`
	OrdLimit      int              `arg:"ord_limit"`
	OrdBlock      string           `arg:"ord_block"`
	MaxRunning    int              `arg:"max_running"`
	FirstMsg      []byte           `arg:"first_msg"`
	OnFailure     string           `arg:"on_failure"`
	Comps         []createCompLua  `arg:"comps"`
	Groups        []createGroupLua `arg:"groups"`
	Trace         string           `arg:"trace"`
}

// createStepLua is one step's block of create.lua's ARGV.
type createStepLua struct {
	Name          string `arg:"name"`
	Optional      string `arg:"optional"`
	MaxAttempts   int    `arg:"max_attempts"`
	MaxCrashes    int    `arg:"max_crashes"`
	Timeout       int64  `arg:"timeout_ms"`
	Policy        string `arg:"policy"`
	RunTimeout    int64  `arg:"run_timeout_ms"`
	MaxIterations int    `arg:"max_iterations"`
	Kind          string `arg:"kind"`
	Signal        string `arg:"signal"`
	Wait          int64  `arg:"wait_ms"`
	Breaker       string `arg:"breaker"`
}

// createCompLua is one compensation's block of create.lua's ARGV.
type createCompLua struct {
	Index       int    `arg:"index"`
	MaxAttempts int    `arg:"max_attempts"`
	MaxCrashes  int    `arg:"max_crashes"`
	Timeout     int64  `arg:"timeout_ms"`
	Policy      string `arg:"policy"`
	Breaker     string `arg:"breaker"`
}

// createGroupLua is one grouped step's block of create.lua's ARGV.
type createGroupLua struct {
	Index    int    `arg:"index"`
	Group    string `arg:"group"`
	Optional string `arg:"optional"`
}

func (a createLua) args() ([]string, []any) {
	argv := make([]any, 0, 11+12*len(a.Steps)+16)
	argv = append(argv, a.RunID, a.Prefix, a.Now, a.Workflow, a.Input, a.Owner, a.IdemKey, a.Def, a.RunTimeout,
		a.MaxIterations, len(a.Steps))
	for _, s := range a.Steps {
		argv = append(argv, s.Name, s.Optional, s.MaxAttempts, s.MaxCrashes, s.Timeout, s.Policy, s.RunTimeout,
			s.MaxIterations, s.Kind, s.Signal, s.Wait, s.Breaker)
	}
	argv = append(argv, a.OrdKey, a.OrdLimit, a.OrdBlock, a.MaxRunning)
	switch {
	case a.OnFailure != "" || len(a.Comps) > 0 || len(a.Groups) > 0 || a.Trace != "":
		argv = append(argv, a.FirstMsg, a.OnFailure, len(a.Comps))
		for _, c := range a.Comps {
			argv = append(argv, c.Index, c.MaxAttempts, c.MaxCrashes, c.Timeout, c.Policy, c.Breaker)
		}
		argv = append(argv, len(a.Groups))
		for _, g := range a.Groups {
			argv = append(argv, g.Index, g.Group, g.Optional)
		}
		if a.Trace != "" {
			argv = append(argv, a.Trace)
		}
	case a.FirstMsg != nil:
		argv = append(argv, a.FirstMsg)
	}
	return []string{a.Run, a.Idem, a.LegacyIdem, a.FirstTask, a.Pending, a.Seed}, argv
}

// beginLua is begin.lua's. Trace is "1" or "" (not sent).
type beginLua struct {
	runArgs
	Task      string `arg:"task"`
	Token     string `arg:"token"`
	FenceTTL  int64  `arg:"fence_ttl"`
	Index     int    `arg:"index"`
	Retention int64  `arg:"retention"`
	Worker    string `arg:"worker"`
	Trace     string `arg:"trace"`
}

func (a beginLua) args() ([]string, []any) {
	argv := []any{a.RunID, a.Prefix, a.Now, a.Task, a.Token, a.FenceTTL, a.Index, a.Retention}
	if a.Worker != "" || a.Trace != "" {
		argv = append(argv, a.Worker)
	}
	if a.Trace != "" {
		argv = append(argv, a.Trace)
	}
	return []string{a.Run}, argv
}

// checkpointLua is compdone.lua's, and the first part of complete.lua's.
type checkpointLua struct {
	runArgs
	NextTask    string `key:"next_task"`
	Pending     string `key:"pending"`
	Token       string `arg:"token"`
	Index       int    `arg:"index"`
	Output      string `arg:"output"`
	Retention   int64  `arg:"retention"`
	NextID      string `arg:"next_id"`
	NextMsg     []byte `arg:"next_msg"`
	InlineToken string `arg:"inline_token"`
	InlineTTL   int64  `arg:"inline_ttl"`
}

func (a checkpointLua) args() ([]string, []any) {
	return []string{a.Run, a.NextTask, a.Pending}, []any{a.RunID, a.Prefix, a.Now, a.Token, a.Index, a.Output,
		a.Retention, a.NextID, a.NextMsg, a.InlineToken, a.InlineTTL}
}

// completeLua is complete.lua's: a checkpoint's, then the acknowledgement
// of the delivery's task.
type completeLua struct {
	checkpointLua
	InlineWorker string `arg:"inline_worker"`
	ackLua
}

func (a completeLua) args() ([]string, []any) {
	keys, argv := a.checkpointLua.args()
	if a.InlineWorker != "" || a.AckID != "" {
		argv = append(argv, a.InlineWorker)
	}
	return a.add(keys, argv)
}

// ackLua is the tail of the KEYS and ARGV of complete.lua and fail.lua:
// when AckID is set, the keys and arguments of task_done (tasks.DoneArgs)
// for the task whose delivery ran the attempt; AckUnique is sent only when
// set.
type ackLua struct {
	AckActive      string `key:"ack_active"`
	AckLease       string `key:"ack_lease"`
	AckTask        string `key:"ack_task"`
	AckDay         string `key:"ack_day"`
	AckTotal       string `key:"ack_total"`
	AckCompleted   string `key:"ack_completed"`
	AckUnique      string `key:"ack_unique"`
	AckID          string `arg:"ack_id"`
	AckStatsExpiry int64  `arg:"ack_stats_expiry"`
	AckKeepUntil   string `arg:"ack_keep_until"`
	AckMsg         string `arg:"ack_msg"`
}

// add appends the acknowledgement's keys and arguments, if any.
func (a ackLua) add(keys []string, argv []any) ([]string, []any) {
	if a.AckID == "" {
		return keys, argv
	}
	keys = append(keys, a.AckActive, a.AckLease, a.AckTask, a.AckDay, a.AckTotal, a.AckCompleted)
	if a.AckUnique != "" {
		keys = append(keys, a.AckUnique)
	}
	return keys, append(argv, a.AckID, a.AckStatsExpiry, a.AckKeepUntil, a.AckMsg)
}

// withAck is c with the acknowledgement a (nil: none).
func withAck(c checkpointLua, a *tasks.DoneArgs) completeLua {
	return completeLua{checkpointLua: c, ackLua: ackOf(a)}
}

// ackOf is the acknowledgement a (nil: none).
func ackOf(a *tasks.DoneArgs) ackLua {
	if a == nil {
		return ackLua{}
	}
	return ackLua{AckActive: a.Active, AckLease: a.Lease, AckTask: a.Task, AckDay: a.Day, AckTotal: a.Total,
		AckCompleted: a.Completed, AckUnique: a.Unique, AckID: a.ID, AckStatsExpiry: a.StatsExpiry,
		AckKeepUntil: a.KeepUntil, AckMsg: a.Msg}
}

// failLua is fail.lua's.
type failLua struct {
	runArgs
	RetryTask string `key:"retry_task"`
	Pending   string `key:"pending"`
	Scheduled string `key:"scheduled"`
	Token     string `arg:"token"`
	Index     int    `arg:"index"`
	Message   string `arg:"message"`
	Class     string `arg:"class"`
	Delay     int64  `arg:"delay_ms"`
	Retention int64  `arg:"retention"`
	Code      string `arg:"code"`
	RetryID   string `arg:"retry_id"`
	RetryMsg  []byte `arg:"retry_msg"`
	ackLua
}

func (a failLua) args() ([]string, []any) {
	return a.add([]string{a.Run, a.RetryTask, a.Pending, a.Scheduled}, []any{a.RunID, a.Prefix, a.Now, a.Token,
		a.Index, a.Message, a.Class, a.Delay, a.Retention, a.Code, a.RetryID, a.RetryMsg})
}

// snoozeLua is snooze.lua's.
type snoozeLua struct {
	runArgs
	NextTask  string `key:"next_task"`
	Pending   string `key:"pending"`
	Scheduled string `key:"scheduled"`
	Token     string `arg:"token"`
	Index     int    `arg:"index"`
	Delay     int64  `arg:"delay_ms"`
	NextID    string `arg:"next_id"`
	NextMsg   []byte `arg:"next_msg"`
	Retention int64  `arg:"retention"`
}

func (a snoozeLua) args() ([]string, []any) {
	return []string{a.Run, a.NextTask, a.Pending, a.Scheduled}, []any{a.RunID, a.Prefix, a.Now, a.Token, a.Index,
		a.Delay, a.NextID, a.NextMsg, a.Retention}
}

// gotoLua is goto.lua's.
type gotoLua struct {
	runArgs
	NextTask   string `key:"next_task"`
	Pending    string `key:"pending"`
	Token      string `arg:"token"`
	Index      int    `arg:"index"`
	TargetName string `arg:"target_name"`
	NextID     string `arg:"next_id"`
	NextMsg    []byte `arg:"next_msg"`
	Retention  int64  `arg:"retention"`
}

func (a gotoLua) args() ([]string, []any) {
	return []string{a.Run, a.NextTask, a.Pending}, []any{a.RunID, a.Prefix, a.Now, a.Token, a.Index, a.TargetName,
		a.NextID, a.NextMsg, a.Retention}
}

// releaseLua is release.lua's.
type releaseLua struct {
	runArgs
	NextTask string `key:"next_task"`
	Pending  string `key:"pending"`
	Token    string `arg:"token"`
	Index    int    `arg:"index"`
	NextID   string `arg:"next_id"`
	NextMsg  []byte `arg:"next_msg"`
}

func (a releaseLua) args() ([]string, []any) {
	return []string{a.Run, a.NextTask, a.Pending}, []any{a.RunID, a.Prefix, a.Now, a.Token, a.Index, a.NextID,
		a.NextMsg}
}

// cancelLua is cancel.lua's.
type cancelLua struct {
	runArgs
	Actor      string `arg:"actor"`
	Retention  int64  `arg:"retention"`
	Compensate string `arg:"compensate"`
}

func (a cancelLua) args() ([]string, []any) {
	return []string{a.Run}, []any{a.RunID, a.Prefix, a.Now, a.Actor, a.Retention, a.Compensate}
}

// renewLua is renew.lua's (a script of its own: no run-level arguments).
type renewLua struct {
	Run    string `key:"run"`
	Fences string `key:"fences"`
	Token  string `arg:"token"`
	Now    int64  `arg:"now"`
	TTL    int64  `arg:"ttl"`
	RunID  string `arg:"run_id"`
	Index  int    `arg:"index"`
}

func (a renewLua) args() ([]string, []any) {
	return []string{a.Run, a.Fences}, []any{a.Token, a.Now, a.TTL, a.RunID, a.Index}
}

// redispatchLua is redispatch.lua's.
type redispatchLua struct {
	runArgs
	MaxAuto   int   `arg:"max_auto"`
	Retention int64 `arg:"retention"`
}

func (a redispatchLua) args() ([]string, []any) {
	return []string{a.Run}, []any{a.RunID, a.Prefix, a.Now, a.MaxAuto, a.Retention}
}

// repairLua is repair.lua's.
type repairLua struct {
	runArgs
	Task    string `arg:"task"`
	Trouble string `arg:"trouble"`
	MaxAuto int    `arg:"max_auto"`
	Grace   int64  `arg:"grace_ms"`
}

func (a repairLua) args() ([]string, []any) {
	return []string{a.Run}, []any{a.RunID, a.Prefix, a.Now, a.Task, a.Trouble, a.MaxAuto, a.Grace}
}

// timeoutLua is timeout.lua's.
type timeoutLua struct {
	runArgs
	Retention int64 `arg:"retention"`
}

func (a timeoutLua) args() ([]string, []any) {
	return []string{a.Run}, []any{a.RunID, a.Prefix, a.Now, a.Retention}
}

// operateLua is operate.lua's.
type operateLua struct {
	runArgs
	Action    string `arg:"action"`
	StepName  string `arg:"step_name"`
	Actor     string `arg:"actor"`
	Retention int64  `arg:"retention"`
}

func (a operateLua) args() ([]string, []any) {
	return []string{a.Run}, []any{a.RunID, a.Prefix, a.Now, a.Action, a.StepName, a.Actor, a.Retention}
}

// restoreLua is restore.lua's.
type restoreLua struct {
	runArgs
	Audit       string `key:"audit"`
	FromStep    string `arg:"from_step"`
	Actor       string `arg:"actor"`
	AuditMaxLen int    `arg:"audit_maxlen"`
}

func (a restoreLua) args() ([]string, []any) {
	return []string{a.Run, a.Audit}, []any{a.RunID, a.Prefix, a.Now, a.FromStep, a.Actor, a.AuditMaxLen}
}

// gateLua is gate.lua's: the run-level arguments without a run (RunID is
// ""), and the gate's line as its key.
type gateLua struct {
	Line   string `key:"line"`
	RunID  string `arg:"RUN_ID"`
	Prefix string `arg:"PREFIX"`
	Now    int64  `arg:"NOWS"`
	Gate   string `arg:"G"`
}

func (a gateLua) args() ([]string, []any) {
	return []string{a.Line}, []any{a.RunID, a.Prefix, a.Now, a.Gate}
}

// waitLua is wait.lua's.
type waitLua struct {
	runArgs
	WakeTask   string `key:"wake_task"`
	Pending    string `key:"pending"`
	Scheduled  string `key:"scheduled"`
	Action     string `arg:"action"`
	Index      int    `arg:"index"`
	Task       string `arg:"task"`
	Retention  int64  `arg:"retention"`
	Until      string `arg:"until_ms"`
	UntilError string `arg:"until_error"`
	WakeID     string `arg:"wake_id"`
	WakeMsg    []byte `arg:"wake_msg"`
}

func (a waitLua) args() ([]string, []any) {
	return []string{a.Run, a.WakeTask, a.Pending, a.Scheduled}, []any{a.RunID, a.Prefix, a.Now, a.Action, a.Index,
		a.Task, a.Retention, a.Until, a.UntilError, a.WakeID, a.WakeMsg}
}

// signalLua is signal.lua's.
type signalLua struct {
	runArgs
	Name       string `arg:"name"`
	Payload    string `arg:"payload"`
	SignalID   string `arg:"signal_id"`
	Retention  int64  `arg:"retention"`
	MaxPending int    `arg:"max_pending"`
}

func (a signalLua) args() ([]string, []any) {
	return []string{a.Run}, []any{a.RunID, a.Prefix, a.Now, a.Name, a.Payload, a.SignalID, a.Retention,
		a.MaxPending}
}

// unlockLua is unlock.lua's.
type unlockLua struct {
	Lock  string `key:"lock"`
	Token string `arg:"token"`
	TTL   int64  `arg:"ttl"`
}

func (a unlockLua) args() ([]string, []any) { return []string{a.Lock}, []any{a.Token, a.TTL} }

// peekLua is peek.lua's.
type peekLua struct {
	Run string `key:"run"`
}

func (a peekLua) args() ([]string, []any) { return []string{a.Run}, nil }

// journalLua is journal.lua's.
type journalLua struct {
	Run  string `key:"run"`
	Temp string `key:"temp"`
}

func (a journalLua) args() ([]string, []any) { return []string{a.Run, a.Temp}, nil }
