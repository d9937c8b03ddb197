package httpstep_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/httpstep"
)

// TestURLsInErrorsAreRedacted: query values and userinfo never appear in
// the step's errors, whichever way it fails; query keys do.
func TestURLsInErrorsAreRedacted(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-t0k3n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/fail":
			http.Error(w, "no", http.StatusBadGateway)
		case "/bad-location":
			w.Header().Set("Location", "http://x/%zz?sig="+secret)
			w.WriteHeader(http.StatusFound)
		case "/away":
			w.Header().Set("Location", "http://other.example.com/?sig="+secret)
			w.WriteHeader(http.StatusFound)
		case "/slow":
			<-r.Context().Done()
		}
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	host := hostOf(t, srv)

	tests := []struct {
		name, url, input string
		want             string // in the error
		check            func(error) bool
	}{
		{"status", "http://u:" + secret + "@" + host + "/fail?token={{.input.t}}&page=2", "",
			"GET http://" + host + "/fail?token=REDACTED&page=REDACTED: 502", workflow.IsTransient},
		{"refused connection", "http://" + closed + "/x?token={{.input.t}}", "",
			"http://" + closed + "/x?token=REDACTED", func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }},
		{"bad Location", "http://" + host + "/bad-location?k={{.input.t}}", "", "?k=REDACTED", workflow.IsTransient},
		{"refused redirect", "http://" + host + "/away?k={{.input.t}}", "",
			"redirect to http://other.example.com/?sig=REDACTED refused", workflow.IsPermanent},
		{"timeout", "http://" + host + "/slow?k={{.input.t}}", "", "/slow?k=REDACTED",
			func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
		{"not allowed", "http://{{.input.h}}/x?k={{.input.t}}", `"h": "evil.com:1"`, "evil.com:1", workflow.IsPermanent},
		{"userinfo", "{{.input.u}}", `"u": "http://u:` + secret + `@api.example.com/?k=1"`, "userinfo", workflow.IsPermanent},
		{"not http", "{{.input.u}}", `"u": "ftp://api.example.com/?k=` + secret + `"`, "?k=REDACTED", workflow.IsPermanent},
		{"unparsable", "{{.input.u}}", `"u": "http://api.example.com/%zz?k=` + secret + `"`, "invalid URL escape", workflow.IsPermanent},
	}
	for _, tt := range tests {
		in := `{"t": "` + secret + `"`
		if tt.input != "" {
			in += ", " + tt.input
		}
		in += "}"
		s := mustNew(t, httpstep.Spec{Method: "GET", URL: tt.url, AllowedHosts: []string{"api.example.com"}}, httpstep.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if tt.name == "timeout" {
			cancel()
			ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
		}
		_, err := s.Do(ctx, attempt(in, nil))
		cancel()
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error shows the secret: %v", tt.name, err)
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %q does not contain %q", tt.name, err, tt.want)
		}
		if !tt.check(err) {
			t.Errorf("%s: error %v lost its kind", tt.name, err)
		}
		// The *url.Error under it is rebuilt too.
		var ue *url.Error
		if errors.As(err, &ue) && (strings.Contains(ue.URL, secret) || strings.Contains(ue.Err.Error(), secret)) {
			t.Errorf("%s: the *url.Error under the error shows the secret: %q, %v", tt.name, ue.URL, ue.Err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://api.example.com/x?token=abc":              "https://api.example.com/x?token=REDACTED",
		"https://u:p@api.example.com/x?a=1&b=&c&&d=2#frag": "https://api.example.com/x?a=REDACTED&b=REDACTED&REDACTED&&d=REDACTED",
		"http://api.example.com:8080/a%2Fb":                "http://api.example.com:8080/a%2Fb",
		"https://u@api.example.com":                        "https://api.example.com",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := httpstep.RedactURL(u); got != want {
			t.Errorf("RedactURL(%s) = %s, want %s", in, got, want)
		}
	}
}
