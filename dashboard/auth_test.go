package dashboard_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/dashboard"
)

func TestParseTokens(t *testing.T) {
	t.Parallel()
	toks, err := dashboard.ParseTokens(strings.NewReader(tokensFile), "tokens")
	if err != nil {
		t.Fatal(err)
	}
	if toks.Len() != 3 {
		t.Fatalf("%d tokens, want 3", toks.Len())
	}
	for token, want := range map[string]dashboard.Principal{
		aliceToken: {Subject: "alice", Role: dashboard.RoleUser},
		bobToken:   {Subject: "bob", Role: dashboard.RoleUser},
		rootToken:  {Subject: "root", Role: dashboard.RoleAdmin},
	} {
		if got, ok := toks.Lookup(token); !ok || got != want {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v", token, got, ok, want)
		}
	}
	for _, bad := range []string{"", wrongToken, aliceToken + " ", "alice"} {
		if p, ok := toks.Lookup(bad); ok {
			t.Errorf("Lookup(%q) = %+v, want no match", bad, p)
		}
	}
}

func TestParseTokensComments(t *testing.T) {
	t.Parallel()
	file := "\n  # a comment\n\t\n0123456789abcdef\tsvc  user   \n# another\n"
	toks, err := dashboard.ParseTokens(strings.NewReader(file), "t")
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := toks.Lookup("0123456789abcdef"); !ok || p.Subject != "svc" || p.IsAdmin() {
		t.Errorf("Lookup = %+v, %v", p, ok)
	}
}

func TestParseTokensErrors(t *testing.T) {
	t.Parallel()
	const good = "0123456789abcdef alice user\n"
	tests := []struct {
		name string
		file string
		line int
		msg  string
	}{
		{"two fields", "# c\n0123456789abcdef alice\n", 2, "got 2 fields"},
		{"four fields", good + "0123456789abcdeX bob user extra\n", 2, "got 4 fields"},
		{"bad role", good + "\n0123456789abcdeX bob root\n", 3, `role "root"`},
		{"short token", "short alice user\n", 1, "shorter than 16"},
		{"duplicate token", good + "0123456789abcdef bob user\n", 2, "token of line 1"},
		{"two roles", good + "0123456789abcdeX alice admin\n", 2, `"alice" has role user on line 1`},
		{"control character", "0123456789abcdef ali\x01ce user\n", 1, "printable"},
		{"no entries", "# only a comment\n\n", 0, "no token entries"},
		{"empty file", "", 0, "no token entries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := dashboard.ParseTokens(strings.NewReader(tt.file), "/etc/cairn/tokens")
			var fe *dashboard.TokensFileError
			if !errors.As(err, &fe) {
				t.Fatalf("err %v, want a TokensFileError", err)
			}
			if fe.File != "/etc/cairn/tokens" || fe.Line != tt.line || !strings.Contains(fe.Msg, tt.msg) {
				t.Errorf("err %q (line %d), want line %d and %q", err, fe.Line, tt.line, tt.msg)
			}
			if prefix := fmt.Sprintf("/etc/cairn/tokens:%d: ", tt.line); tt.line > 0 && !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("err %q does not start with %q", err, prefix)
			}
			if strings.Contains(err.Error(), "0123456789abcde") {
				t.Errorf("err %q quotes a token", err)
			}
		})
	}
}

func TestLoadTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	if err := os.WriteFile(path, []byte(tokensFile), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := dashboard.LoadTokens(path)
	if err != nil || toks.Len() != 3 {
		t.Fatalf("LoadTokens: %v, %d tokens", err, toks.Len())
	}
	_, err = dashboard.LoadTokens(filepath.Join(dir, "missing"))
	var fe *dashboard.TokensFileError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing file: %v", err)
	}
}
