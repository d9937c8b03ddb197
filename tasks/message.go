package tasks

import (
	"errors"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
)

// Message is asynq's TaskMessage (v0.26, internal/proto/asynq.proto) as
// Cairn's own dequeue reads it from a task's record and writes it back when
// it retries or archives the task: the fields asynq's processor changes
// (Retried, ErrorMsg, LastFailedAt, CompletedAt) and those it decides by
// (Retry, Timeout, Deadline, Retention, UniqueKey); the others are kept as
// they were read, so a message written back holds every field it held.
type Message struct {
	Type         string
	Payload      []byte
	ID           string
	Queue        string
	Retry        int
	Retried      int
	ErrorMsg     string
	LastFailedAt int64
	// Timeout is in seconds (0: none); Deadline and CompletedAt in Unix
	// seconds (0: none); Retention in seconds.
	Timeout     int64
	Deadline    int64
	UniqueKey   string
	GroupKey    string
	Retention   int64
	CompletedAt int64
	// Headers is the message's headers (field 15), as asynq's task
	// carries them.
	Headers map[string]string
}

// Fields of asynq's TaskMessage beyond those asynqwire.go names.
const (
	fieldRetried      protowire.Number = 6
	fieldErrorMsg     protowire.Number = 7
	fieldDeadline     protowire.Number = 9
	fieldUniqueKey    protowire.Number = 10
	fieldLastFailedAt protowire.Number = 11
	fieldRetention    protowire.Number = 12
	fieldCompletedAt  protowire.Number = 13
	fieldGroupKey     protowire.Number = 14
	fieldHeaders      protowire.Number = 15
)

// ParseMessage decodes an asynq TaskMessage (every field of v0.26's; an
// unknown field is an error, since writing the message back would drop it).
func ParseMessage(b []byte) (*Message, error) {
	m := &Message{}
	bad := func(n int) (*Message, error) { return nil, errors.Join(ErrBadMessage, protowire.ParseError(n)) }
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return bad(n)
		}
		b = b[n:]
		switch wt {
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return bad(n)
			}
			b = b[n:]
			switch num {
			case fieldType:
				m.Type = string(v)
			case fieldPayload:
				m.Payload = append([]byte(nil), v...)
			case fieldID:
				m.ID = string(v)
			case fieldQueue:
				m.Queue = string(v)
			case fieldErrorMsg:
				m.ErrorMsg = string(v)
			case fieldUniqueKey:
				m.UniqueKey = string(v)
			case fieldGroupKey:
				m.GroupKey = string(v)
			case fieldHeaders:
				k, val, err := parseMapEntry(v)
				if err != nil {
					return nil, err
				}
				if m.Headers == nil {
					m.Headers = map[string]string{}
				}
				m.Headers[k] = val
			default:
				return nil, errors.Join(ErrBadMessage, errors.New("unknown length-delimited field"))
			}
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return bad(n)
			}
			b = b[n:]
			switch num {
			case fieldRetry:
				m.Retry = int(int32(v)) //nolint:gosec // protobuf int32: the low 32 bits
			case fieldRetried:
				m.Retried = int(int32(v)) //nolint:gosec // protobuf int32: the low 32 bits
			case fieldTimeout:
				m.Timeout = int64(v) //nolint:gosec // protobuf int64: two's complement
			case fieldDeadline:
				m.Deadline = int64(v) //nolint:gosec // protobuf int64: two's complement
			case fieldLastFailedAt:
				m.LastFailedAt = int64(v) //nolint:gosec // protobuf int64: two's complement
			case fieldRetention:
				m.Retention = int64(v) //nolint:gosec // protobuf int64: two's complement
			case fieldCompletedAt:
				m.CompletedAt = int64(v) //nolint:gosec // protobuf int64: two's complement
			default:
				return nil, errors.Join(ErrBadMessage, errors.New("unknown varint field"))
			}
		default:
			return nil, errors.Join(ErrBadMessage, errors.New("unexpected wire type"))
		}
	}
	if m.Type == "" || m.ID == "" {
		return nil, errors.Join(ErrBadMessage, errors.New("no task type or ID"))
	}
	return m, nil
}

// parseMapEntry reads one entry of a map<string, string> field.
func parseMapEntry(b []byte) (k, v string, err error) {
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 || wt != protowire.BytesType {
			return "", "", errors.Join(ErrBadMessage, errors.New("malformed header"))
		}
		b = b[n:]
		s, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return "", "", errors.Join(ErrBadMessage, protowire.ParseError(m))
		}
		b = b[m:]
		switch num { //nolint:exhaustive // a map entry's key (1) and value (2); others skipped
		case 1:
			k = string(s)
		case 2:
			v = string(s)
		}
	}
	return k, v, nil
}

// Encode returns the message in protobuf's wire format, as proto.Marshal
// writes asynq's TaskMessage: the fields in the order the .proto declares
// them, a field at its zero value left out.
func (m *Message) Encode() []byte {
	b := make([]byte, 0, 64+len(m.Payload)+len(m.ID)+len(m.ErrorMsg))
	str := func(num protowire.Number, s string) {
		if s != "" {
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendString(b, s)
		}
	}
	varint := func(num protowire.Number, v int64) {
		if v != 0 {
			b = protowire.AppendTag(b, num, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(v)) //nolint:gosec // two's complement, as protobuf writes int64
		}
	}
	str(fieldType, m.Type)
	if len(m.Payload) > 0 {
		b = protowire.AppendTag(b, fieldPayload, protowire.BytesType)
		b = protowire.AppendBytes(b, m.Payload)
	}
	keys := make([]string, 0, len(m.Headers))
	for k := range m.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var e []byte
		e = protowire.AppendTag(e, 1, protowire.BytesType)
		e = protowire.AppendString(e, k)
		e = protowire.AppendTag(e, 2, protowire.BytesType)
		e = protowire.AppendString(e, m.Headers[k])
		b = protowire.AppendTag(b, fieldHeaders, protowire.BytesType)
		b = protowire.AppendBytes(b, e)
	}
	str(fieldID, m.ID)
	str(fieldQueue, m.Queue)
	varint(fieldRetry, int64(int32(m.Retry)))     //nolint:gosec // protobuf int32
	varint(fieldRetried, int64(int32(m.Retried))) //nolint:gosec // protobuf int32
	str(fieldErrorMsg, m.ErrorMsg)
	varint(fieldLastFailedAt, m.LastFailedAt)
	varint(fieldTimeout, m.Timeout)
	varint(fieldDeadline, m.Deadline)
	str(fieldUniqueKey, m.UniqueKey)
	str(fieldGroupKey, m.GroupKey)
	varint(fieldRetention, m.Retention)
	varint(fieldCompletedAt, m.CompletedAt)
	return b
}
