package httpstep_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/httpstep"
)

// TestResponseCapCountsHeaders: a 2xx whose headers are over the cap is
// not stored, whatever its body; nor are headers and body over it
// together. The default client's transport stops reading headers at the
// cap.
func TestResponseCapCountsHeaders(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		n, _ := strconv.Atoi(q.Get("headers"))
		for i := 0; n > 0; i++ {
			chunk := min(n, 4000)
			w.Header().Set(fmt.Sprintf("X-Big-%d", i), strings.Repeat("h", chunk))
			n -= chunk
		}
		b, _ := strconv.Atoi(q.Get("body"))
		_, _ = io.WriteString(w, strings.Repeat("b", b))
	}))
	defer srv.Close()
	do := func(opts httpstep.Options, headers, body int) (*httpstep.Response, error) {
		s := mustNew(t, httpstep.Spec{Method: "GET", URL: srv.URL + "/?headers={{.input.h}}&body={{.input.b}}"}, opts)
		return s.Do(context.Background(), attempt(fmt.Sprintf(`{"h": %d, "b": %d}`, headers, body), nil))
	}
	small := httpstep.Options{MaxBodyBytes: 20000}
	if resp, err := do(small, 10000, 5000); err != nil {
		t.Errorf("under the cap: %v", err)
	} else if body, ok := resp.Body.(string); !ok || len(body) != 5000 {
		t.Errorf("under the cap: body %T of %d bytes, want a string of 5000", resp.Body, len(body))
	}
	for _, tt := range []struct {
		headers, body int
		code          string
	}{
		{30000, 0, httpstep.CodeResponseTooLarge},
		{15000, 10000, httpstep.CodeResponseTooLarge},
		{0, 20001, httpstep.CodeBodyTooLarge},
	} {
		resp, err := do(small, tt.headers, tt.body)
		if resp != nil || !workflow.IsPermanent(err) || workflow.Code(err) != tt.code || !strings.Contains(err.Error(), "20000 bytes") {
			t.Errorf("headers %d, body %d: %v (code %q), want a permanent %s error", tt.headers, tt.body, err, workflow.Code(err), tt.code)
		}
	}
	// 5 MB of headers against the default 1 MiB cap: the transport stops
	// reading them; still a permanent http_response_too_large.
	resp, err := do(httpstep.Options{}, 5<<20, 2)
	if resp != nil || !workflow.IsPermanent(err) || workflow.Code(err) != httpstep.CodeResponseTooLarge {
		t.Errorf("5 MB of headers: %v (code %q), want a permanent %s error", err, workflow.Code(err), httpstep.CodeResponseTooLarge)
	}
}
