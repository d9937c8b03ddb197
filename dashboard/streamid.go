package dashboard

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// streamID is a Redis stream entry ID, <ms>-<seq>: two unsigned 64-bit
// integers.
type streamID struct{ ms, seq uint64 }

func (id streamID) String() string {
	return strconv.FormatUint(id.ms, 10) + "-" + strconv.FormatUint(id.seq, 10)
}

// parseStreamID parses an entry ID as the API takes it: <ms>-<seq>, both
// decimal, at most 18446744073709551615 each. The sequence number is
// required: "after 1700000000000" could mean before or after the entries
// of that millisecond.
func parseStreamID(s string) (streamID, error) {
	ms, seq, ok := strings.Cut(s, "-")
	if !ok || !decimal(ms) || !decimal(seq) {
		return streamID{}, errors.New("malformed")
	}
	var id streamID
	var err1, err2 error
	id.ms, err1 = strconv.ParseUint(ms, 10, 64)
	id.seq, err2 = strconv.ParseUint(seq, 10, 64)
	if err1 != nil || err2 != nil {
		return streamID{}, errStreamIDRange
	}
	return id, nil
}

// decimal tells whether s is a non-empty string of decimal digits.
func decimal(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// streamIDParam parses the stream ID of parameter name ("after",
// "Last-Event-ID"), or returns the 400 problem that says what is wrong
// with it.
func streamIDParam(name, v string) (streamID, error) {
	id, err := parseStreamID(v)
	if err == nil {
		return id, nil
	}
	shown := v
	if len(shown) > 48 {
		shown = shown[:48] + "..."
	}
	switch {
	case errors.Is(err, errStreamIDRange):
		return streamID{}, problemf(http.StatusBadRequest, ProblemInvalidRequest,
			"%s %q: out of range; both parts of an ID <ms>-<seq> are unsigned 64-bit integers, at most %d",
			name, shown, uint64(math.MaxUint64))
	case decimal(v):
		return streamID{}, problemf(http.StatusBadRequest, ProblemInvalidRequest,
			"%s %q: the sequence number is missing; want an ID <ms>-<seq> like 1700000000000-0", name, shown)
	}
	return streamID{}, problemf(http.StatusBadRequest, ProblemInvalidRequest,
		"%s %q: want an ID <ms>-<seq> like 1700000000000-0", name, shown)
}
