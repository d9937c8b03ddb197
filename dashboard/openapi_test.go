package dashboard_test

import (
	"bytes"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/workflow"
)

// The OpenAPI document (openapi.json, served at dashboard.OpenAPIPath) is
// checked three ways: its paths and methods are exactly the server's
// routes (TestOpenAPIRoutes); it is well-formed (TestOpenAPIDocument: every
// $ref resolves, every operation has an operationId and a 2xx answer, path
// parameters match the path templates, every schema compiles as JSON Schema
// 2020-12, which OpenAPI 3.1 schemas are); and real answers of a server on
// redis-server validate against the schemas it gives for them
// (TestOpenAPIAnswers), strictly: an answer's object may not carry a
// property the document does not list. Validation uses
// github.com/santhosh-tekuri/jsonschema, a test-only dependency already
// used by workflow/yamldef.

// docURL is the URL the document is compiled under (never fetched).
const docURL = "https://cairn.invalid/openapi.json"

// httpMethods are the operations a path item may have.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// readDoc reads openapi.json as a generic JSON value.
func readDoc(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	doc, ok := v.(map[string]any)
	if !ok {
		t.Fatal("openapi.json is not a JSON object")
	}
	return doc
}

// pointerEscape escapes one token of a JSON pointer (RFC 6901).
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// lookup returns the value at JSON pointer ptr ("#/a/b") in doc.
func lookup(doc any, ptr string) (any, bool) {
	rest, ok := strings.CutPrefix(ptr, "#")
	if !ok {
		return nil, false
	}
	v := doc
	if rest == "" {
		return v, true
	}
	if !strings.HasPrefix(rest, "/") {
		return nil, false
	}
	for tok := range strings.SplitSeq(rest[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			if v, ok = x[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// deref follows the $ref of an object that is not a schema (a response, a
// parameter, a header): it returns the object and its pointer.
func deref(t *testing.T, doc any, v any, ptr string) (map[string]any, string) {
	t.Helper()
	for range 10 {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s is not an object", ptr)
		}
		r, ok := m["$ref"].(string)
		if !ok {
			return m, ptr
		}
		if v, ok = lookup(doc, r); !ok {
			t.Fatalf("%s: $ref %q does not resolve", ptr, r)
		}
		ptr = r
	}
	t.Fatalf("%s: $ref chain too long", ptr)
	return nil, ""
}

// mapAt returns the object at key k of m (nil when absent).
func mapAt(m map[string]any, k string) map[string]any {
	v, _ := m[k].(map[string]any)
	return v
}

// operations calls f for every operation of the document, with its method
// (upper case), path and pointer.
func operations(doc map[string]any, f func(method, path, ptr string, op map[string]any)) {
	paths := mapAt(doc, "paths")
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		item, _ := paths[path].(map[string]any)
		for _, m := range httpMethods {
			if op, ok := item[m].(map[string]any); ok {
				f(strings.ToUpper(m), path, "#/paths/"+pointerEscape(path)+"/"+m, op)
			}
		}
	}
}

// TestOpenAPIRoutes checks that the document describes exactly the routes
// the server registers: every route is a path and method of the
// document, and every path and method of the document is a route.
// asynqmon's routes (/monitoring) are not Cairn's API and are left out;
// so are the web UI's pages (Config.UI), which Routes does not list.
func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true})
	routes := map[string]bool{}
	monitoring := 0
	for _, pattern := range dashboard.Routes(e.srv) {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			method, path = "", pattern
		}
		if path == dashboard.MonitoringPath || strings.HasPrefix(path, dashboard.MonitoringPath+"/") {
			monitoring++
			continue
		}
		if method == "" || strings.Contains(path, "...}") || strings.Contains(path, "{$}") {
			t.Errorf("route %q: give it a method and a plain path, as the OpenAPI document needs", pattern)
			continue
		}
		routes[method+" "+path] = true
	}
	if monitoring == 0 {
		t.Error("no /monitoring route was listed: the test's server mounts asynqmon, so Routes misses routes")
	}
	if len(routes) < 20 {
		t.Fatalf("only %d routes listed: %v", len(routes), routes)
	}
	documented := map[string]bool{}
	operations(readDoc(t), func(method, path, _ string, _ map[string]any) { documented[method+" "+path] = true })
	for _, r := range slices.Sorted(maps.Keys(routes)) {
		if !documented[r] {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for _, d := range slices.Sorted(maps.Keys(documented)) {
		if !routes[d] {
			t.Errorf("openapi.json documents %s, which is not a route", d)
		}
	}

	// The document is served, to anyone, as it is in the source.
	resp := e.do(req{method: "GET", path: dashboard.OpenAPIPath})
	want, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if resp.status != http.StatusOK || resp.header.Get("Content-Type") != "application/json" || !bytes.Equal(resp.body, want) {
		t.Fatalf("GET %s without a token: %d %q, %d bytes; want 200 application/json, openapi.json (%d bytes)",
			dashboard.OpenAPIPath, resp.status, resp.header.Get("Content-Type"), len(resp.body), len(want))
	}
}

// TestOpenAPIDocument checks the document's structure.
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	doc := readDoc(t)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Errorf("openapi %q, want 3.1.x", v)
	}
	info := mapAt(doc, "info")
	if info["title"] == "" || info["version"] == "" {
		t.Errorf("info needs a title and a version: %v", info)
	}

	// Every $ref resolves, in the document.
	var walk func(v any, ptr string)
	walk = func(v any, ptr string) {
		switch x := v.(type) {
		case map[string]any:
			if r, ok := x["$ref"]; ok {
				s, _ := r.(string)
				if _, ok := lookup(doc, s); !ok || !strings.HasPrefix(s, "#/") {
					t.Errorf("%s: $ref %v does not resolve in the document", ptr, r)
				}
			}
			for k, e := range x {
				walk(e, ptr+"/"+pointerEscape(k))
			}
		case []any:
			for i, e := range x {
				walk(e, ptr+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(doc, "#")

	schemes := mapAt(mapAt(doc, "components"), "securitySchemes")
	if len(schemes) == 0 {
		t.Error("no security schemes")
	}
	checkSecurity := func(ptr string, v any) {
		reqs, ok := v.([]any)
		if !ok {
			t.Errorf("%s: security is not a list", ptr)
			return
		}
		for _, r := range reqs {
			for name := range asMap(r) {
				if _, ok := schemes[name]; !ok {
					t.Errorf("%s: security scheme %q is not defined", ptr, name)
				}
			}
		}
	}
	checkSecurity("#/security", doc["security"])
	tags := map[string]bool{}
	for _, tag := range asList(doc["tags"]) {
		tags[asString(asMap(tag)["name"])] = true
	}

	ids := map[string]string{}
	templateVar := regexp.MustCompile(`\{([^{}]+)\}`)
	operations(doc, func(method, path, ptr string, op map[string]any) {
		where := method + " " + path
		id, _ := op["operationId"].(string)
		switch {
		case id == "":
			t.Errorf("%s has no operationId", where)
		case ids[id] != "":
			t.Errorf("%s: operationId %q is %s's too", where, id, ids[id])
		}
		ids[id] = where
		for _, tag := range asList(op["tags"]) {
			if !tags[asString(tag)] {
				t.Errorf("%s: tag %v is not declared", where, tag)
			}
		}
		sec, hasSec := op["security"]
		if hasSec {
			checkSecurity(ptr+"/security", sec)
		}
		public := hasSec && len(asList(sec)) == 0

		// Path parameters are exactly the template's variables; names are
		// unique per location.
		vars := map[string]bool{}
		for _, m := range templateVar.FindAllStringSubmatch(path, -1) {
			vars[m[1]] = true
		}
		params := map[string]bool{}
		pathItem, _ := lookup(doc, "#/paths/"+pointerEscape(path))
		all := append(slices.Clone(asList(mapAt(asMap(pathItem), "parameters"))), asList(op["parameters"])...)
		for i, p := range all {
			pm, pptr := deref(t, doc, p, fmt.Sprintf("%s/parameters/%d", ptr, i))
			name, _ := pm["name"].(string)
			in, _ := pm["in"].(string)
			key := in + " " + name
			if params[key] {
				t.Errorf("%s: parameter %s twice", where, key)
			}
			params[key] = true
			switch in {
			case "path":
				if !vars[name] || pm["required"] != true {
					t.Errorf("%s: path parameter %q is not a required variable of the path (%s)", where, name, pptr)
				}
			case "query", "header", "cookie":
			default:
				t.Errorf("%s: parameter %q is in %q", where, name, in)
			}
			if _, ok := pm["schema"]; !ok {
				t.Errorf("%s: parameter %q has no schema", where, name)
			}
		}
		for v := range vars {
			if !params["path "+v] {
				t.Errorf("%s: path variable {%s} has no parameter", where, v)
			}
		}

		// Responses: at least one 2xx; every 4xx and 5xx a problem; 401 for
		// every operation that needs a token, 403 for every admin one.
		resps := mapAt(op, "responses")
		codes := slices.Sorted(maps.Keys(resps))
		if !slices.ContainsFunc(codes, func(c string) bool { return strings.HasPrefix(c, "2") }) {
			t.Errorf("%s has no 2xx response (%v)", where, codes)
		}
		for _, c := range codes {
			r, rptr := deref(t, doc, resps[c], ptr+"/responses/"+c)
			if d, _ := r["description"].(string); d == "" {
				t.Errorf("%s: response %s (%s) has no description", where, c, rptr)
			}
			if n, err := strconv.Atoi(c); err != nil || n < 100 || n > 599 {
				t.Errorf("%s: response %q is not a status code", where, c)
			} else if n >= 400 {
				s, _ := lookup(r, "#/content/application~1problem+json/schema/$ref")
				if s != "#/components/schemas/Problem" || len(mapAt(r, "content")) != 1 {
					t.Errorf("%s: response %s is not application/problem+json with the Problem schema", where, c)
				}
			}
			for ct, media := range mapAt(r, "content") {
				if _, ok := media.(map[string]any)["schema"]; !ok {
					t.Errorf("%s: response %s %s has no schema", where, c, ct)
				}
			}
		}
		if !public && resps["401"] == nil {
			t.Errorf("%s needs a token but does not list 401", where)
		}
		if admin := strings.Contains(fmt.Sprint(sec), "admin"); admin && resps["403"] == nil {
			t.Errorf("%s is for admins but does not list 403", where)
		}
		if method != "GET" && !public && resps["403"] == nil {
			t.Errorf("%s changes state but does not list 403 (csrf, cross-origin)", where)
		}
	})
	if len(ids) < 20 {
		t.Errorf("only %d operations", len(ids))
	}

	// The problem types are the package's.
	kinds := []string{dashboard.ProblemUnauthorized, dashboard.ProblemForbidden, dashboard.ProblemCSRF,
		dashboard.ProblemCrossOrigin, dashboard.ProblemNotFound, dashboard.ProblemMethodNotAllowed,
		dashboard.ProblemInvalidRequest, dashboard.ProblemInvalidRunID, dashboard.ProblemInvalidInput,
		dashboard.ProblemBodyTooLarge, dashboard.ProblemUnknownWorkflow, dashboard.ProblemActionRefused,
		dashboard.ProblemConflict, dashboard.ProblemTooManyStreams, dashboard.ProblemUnavailable, dashboard.ProblemInternal}
	var types []string
	for _, k := range kinds {
		types = append(types, dashboard.ProblemType(k))
	}
	enum, _ := lookup(doc, "#/components/schemas/Problem/properties/type/enum")
	var documented []string
	for _, v := range asList(enum) {
		documented = append(documented, asString(v))
	}
	if slices.Sort(types); !slices.Equal(types, slices.Sorted(slices.Values(documented))) {
		t.Errorf("problem types in openapi.json %v, want %v", documented, types)
	}

	// Every schema compiles: every component's, and every one in paths.
	c := newCompiler(t, doc)
	var schemaPtrs []string
	for name := range mapAt(mapAt(doc, "components"), "schemas") {
		schemaPtrs = append(schemaPtrs, "#/components/schemas/"+pointerEscape(name))
	}
	var collect func(v any, ptr string)
	collect = func(v any, ptr string) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "schema" {
					schemaPtrs = append(schemaPtrs, ptr+"/schema")
					continue
				}
				collect(e, ptr+"/"+pointerEscape(k))
			}
		case []any:
			for i, e := range x {
				collect(e, ptr+"/"+strconv.Itoa(i))
			}
		}
	}
	collect(doc["paths"], "#/paths")
	collect(mapAt(doc, "components")["responses"], "#/components/responses")
	collect(mapAt(doc, "components")["parameters"], "#/components/parameters")
	collect(mapAt(doc, "components")["headers"], "#/components/headers")
	for _, p := range schemaPtrs {
		if _, err := c.Compile(docURL + p); err != nil {
			t.Errorf("schema %s does not compile: %v", p, err)
		}
	}
	if len(schemaPtrs) < 50 {
		t.Errorf("only %d schemas found", len(schemaPtrs))
	}
}

// asList, asMap and asString return v as a JSON array, object or string,
// or the zero value when it is not one.
func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}

// newCompiler returns a JSON Schema 2020-12 compiler that holds doc under
// docURL and asserts formats (date-time).
func newCompiler(t *testing.T, doc any) *jsonschema.Compiler {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(docURL, doc); err != nil {
		t.Fatal(err)
	}
	return c
}

// strict returns a copy of v in which every object schema that lists its
// properties, and says nothing of others, allows no others: an answer
// with a property the document does not list fails validation.
func strict(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x)+1)
		for k, e := range x {
			out[k] = strict(e)
		}
		if _, ok := x["properties"].(map[string]any); ok && x["type"] == "object" {
			if _, set := x["additionalProperties"]; !set {
				out["additionalProperties"] = false
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = strict(e)
		}
		return out
	}
	return v
}

// answers validates answers of the server against the document.
type answers struct {
	t   *testing.T
	doc map[string]any
	c   *jsonschema.Compiler
	// seen counts the answers checked, by operation and status.
	seen map[string]bool
}

func newAnswers(t *testing.T) *answers {
	doc := asMap(strict(readDoc(t)))
	return &answers{t: t, doc: doc, c: newCompiler(t, doc), seen: map[string]bool{}}
}

// check validates resp, the answer to method on the path template path:
// its status must be documented for the operation, with its content type
// and every header the document gives it, and its body must validate
// against the schema.
func (a *answers) check(method, path string, resp response) {
	t := a.t
	t.Helper()
	opPtr := "#/paths/" + pointerEscape(path) + "/" + strings.ToLower(method)
	if _, ok := lookup(a.doc, opPtr); !ok {
		t.Fatalf("%s %s is not in openapi.json", method, path)
	}
	status := strconv.Itoa(resp.status)
	rv, ok := lookup(a.doc, opPtr+"/responses/"+status)
	if !ok {
		t.Fatalf("%s %s answered %s, which openapi.json does not list: %s", method, path, status, resp.body)
	}
	r, rptr := deref(t, a.doc, rv, opPtr+"/responses/"+status)
	for name := range mapAt(r, "headers") {
		if resp.header.Get(name) == "" {
			t.Errorf("%s %s %s: no %s header, which openapi.json lists", method, path, status, name)
		}
	}
	content := mapAt(r, "content")
	if len(content) == 0 {
		if len(resp.body) != 0 {
			t.Errorf("%s %s %s: a body, where openapi.json has none: %s", method, path, status, resp.body)
		}
		return
	}
	ct, _, err := mime.ParseMediaType(resp.header.Get("Content-Type"))
	if err != nil || content[ct] == nil {
		t.Fatalf("%s %s %s: content type %q, want one of %v", method, path, status, resp.header.Get("Content-Type"),
			slices.Sorted(maps.Keys(content)))
	}
	if ct != "application/json" && !strings.HasSuffix(ct, "+json") {
		a.seen[method+" "+path+" "+status] = true
		return // text: the content type is all there is to check
	}
	schemaPtr := rptr + "/content/" + pointerEscape(ct) + "/schema"
	sch, err := a.c.Compile(docURL + schemaPtr)
	if err != nil {
		t.Fatalf("compile %s: %v", schemaPtr, err)
	}
	body, err := jsonschema.UnmarshalJSON(bytes.NewReader(resp.body))
	if err != nil {
		t.Fatalf("%s %s %s: body is not JSON: %v: %s", method, path, status, err, resp.body)
	}
	if err := sch.Validate(body); err != nil {
		t.Errorf("%s %s %s: the body does not match %s: %v\nbody: %s", method, path, status, schemaPtr, err, resp.body)
	}
	a.seen[method+" "+path+" "+status] = true
}

// TestOpenAPIAnswers validates real answers of a server on redis-server
// against the document: runs started, listed and read, their journal, a
// run waiting for a signal and the signal's result, actions, and problems
// (401, 403, 404, 409, 422, 400).
func TestOpenAPIAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a := newAnswers(t)

	a.check("GET", "/healthz", e.do(req{method: "GET", path: "/healthz"}))
	a.check("GET", "/readyz", e.do(req{method: "GET", path: "/readyz"}))
	a.check("GET", "/api/v1/me", e.do(req{method: "GET", path: "/api/v1/me", token: aliceToken}))

	// Start a run (201), read it, list runs, read its journal.
	resp := e.do(req{method: "POST", path: "/api/v1/workflows", token: aliceToken,
		body: `{"workflow":"demo","input":{"fail_step":"transform","permanent":true},"idempotency_key":"oa1"}`})
	if resp.status != http.StatusCreated {
		t.Fatalf("start: %d %s", resp.status, resp.body)
	}
	a.check("POST", "/api/v1/workflows", resp)
	var run workflow.Run
	resp.decode(t, &run)
	if got := e.wait(run.ID); got.Status != workflow.StatusFailed {
		t.Fatalf("run %s is %s, want failed", run.ID, got.Status)
	}
	resp = e.do(req{method: "GET", path: "/api/v1/workflows/" + run.ID, token: aliceToken})
	a.check("GET", "/api/v1/workflows/{id}", resp)
	if !strings.Contains(string(resp.body), `"effective_policy"`) || !strings.Contains(string(resp.body), `"steps"`) {
		t.Fatalf("the run's answer has no steps with their policy, so the check missed them: %s", resp.body)
	}
	resp = e.do(req{method: "GET", path: "/api/v1/workflows?limit=10", token: aliceToken})
	a.check("GET", "/api/v1/workflows", resp)
	if !strings.Contains(string(resp.body), run.ID) {
		t.Fatalf("the list misses the run: %s", resp.body)
	}
	a.check("GET", "/api/v1/workflows/{id}/events",
		e.do(req{method: "GET", path: "/api/v1/workflows/" + run.ID + "/events", token: aliceToken}))

	// An ordering key's line: one run active, one waiting (waiting_for).
	for range 2 {
		resp = e.do(req{method: "POST", path: "/api/v1/workflows", token: aliceToken,
			body: `{"workflow":"demo","input":{"step_sleep_ms":60000},"ordering_key":"k"}`})
		a.check("POST", "/api/v1/workflows", resp)
	}
	resp = e.do(req{method: "GET", path: "/api/v1/ordering-keys/k", token: aliceToken})
	a.check("GET", "/api/v1/ordering-keys/{key}", resp)
	var line workflow.KeyRuns
	resp.decode(t, &line)
	if len(line.Active) != 1 || len(line.Waiting) != 1 || line.Waiting[0].WaitingFor == nil {
		t.Fatalf("the key's line is not one active run and one waiting: %s", resp.body)
	}

	// A run waiting for a signal (waiting_for), and the signal.
	waiting := e.waitingRun("bob")
	a.check("GET", "/api/v1/workflows/{id}", e.do(req{method: "GET", path: "/api/v1/workflows/" + waiting.ID, token: bobToken}))
	resp = e.do(req{method: "POST", path: "/api/v1/workflows/" + waiting.ID + "/signals/approved?id=s1", token: bobToken,
		body: `{"ok":true}`})
	if resp.status != http.StatusOK {
		t.Fatalf("signal: %d %s", resp.status, resp.body)
	}
	a.check("POST", "/api/v1/workflows/{id}/signals/{name}", resp)

	// Problems: 404 (a run ID no run has), 422 (an unknown workflow), 409
	// (cancel a failed run), 400 (a bad limit, a bad run ID), 401 (no
	// token), 403 (a user on an admin endpoint).
	resp = e.do(req{method: "GET", path: "/api/v1/workflows/00000000000000000000000000", token: aliceToken})
	if resp.status != http.StatusNotFound {
		t.Fatalf("unknown run: %d %s", resp.status, resp.body)
	}
	a.check("GET", "/api/v1/workflows/{id}", resp)
	resp = e.do(req{method: "POST", path: "/api/v1/workflows", token: aliceToken, body: `{"workflow":"no-such-workflow"}`})
	if resp.status != http.StatusUnprocessableEntity {
		t.Fatalf("unknown workflow: %d %s", resp.status, resp.body)
	}
	a.check("POST", "/api/v1/workflows", resp)
	a.check("POST", "/api/v1/workflows/{id}/cancel",
		e.do(req{method: "POST", path: "/api/v1/workflows/" + run.ID + "/cancel", token: aliceToken}))
	a.check("GET", "/api/v1/workflows", e.do(req{method: "GET", path: "/api/v1/workflows?limit=0", token: aliceToken}))
	a.check("GET", "/api/v1/workflows/{id}", e.do(req{method: "GET", path: "/api/v1/workflows/NOT-A-RUN", token: aliceToken}))
	a.check("GET", "/api/v1/me", e.do(req{method: "GET", path: "/api/v1/me"}))
	a.check("GET", "/api/v1/admin/audit", e.do(req{method: "GET", path: "/api/v1/admin/audit", token: aliceToken}))

	// Admins: an action on another subject's run (audited), the runs
	// needing attention, a bulk dry run, the audit, the breakers.
	resp = e.do(req{method: "POST", path: "/api/v1/workflows/" + run.ID + "/recover", token: rootToken, body: `{}`})
	if resp.status != http.StatusOK {
		t.Fatalf("recover: %d %s", resp.status, resp.body)
	}
	a.check("POST", "/api/v1/workflows/{id}/recover", resp)
	e.wait(run.ID)
	a.check("GET", "/api/v1/admin/workflows/failed", e.do(req{method: "GET", path: "/api/v1/admin/workflows/failed", token: rootToken}))
	a.check("POST", "/api/v1/admin/workflows/bulk", e.do(req{method: "POST", path: "/api/v1/admin/workflows/bulk", token: rootToken,
		body: `{"action":"recover","filter":{"status":"failed"},"dry_run":true}`}))
	resp = e.do(req{method: "GET", path: "/api/v1/admin/audit", token: rootToken})
	a.check("GET", "/api/v1/admin/audit", resp)
	if !strings.Contains(string(resp.body), run.ID) {
		t.Fatalf("the audit misses the admin's recover: %s", resp.body)
	}
	a.check("GET", "/api/v1/breakers", e.do(req{method: "GET", path: "/api/v1/breakers", token: aliceToken}))
	e.seedLatency()
	a.check("GET", "/api/v1/latency", e.do(req{method: "GET", path: "/api/v1/latency?window=7d", token: aliceToken}))
	a.check("GET", "/api/v1/latency", e.do(req{method: "GET", path: "/api/v1/latency?window=1y", token: aliceToken}))
	a.check("POST", "/api/v1/admin/breakers/{name}/reset",
		e.do(req{method: "POST", path: "/api/v1/admin/breakers/no-such-breaker/reset", token: rootToken}))
	a.check("GET", "/api/v1/events", e.do(req{method: "GET", path: "/api/v1/events?last_event_id=x", token: aliceToken}))
	resp = e.do(req{method: "GET", path: "/api/v1/workers", token: rootToken})
	a.check("GET", "/api/v1/workers", resp)
	if !strings.Contains(string(resp.body), `"kind":"cairn"`) {
		t.Errorf("GET /api/v1/workers lists no worker on Cairn's dequeue: %s", resp.body)
	}
	a.check("GET", "/api/v1/workers", e.do(req{method: "GET", path: "/api/v1/workers", token: aliceToken}))
	a.check("GET", "/metrics", e.do(req{method: "GET", path: "/metrics", token: aliceToken}))
	a.check("GET", dashboard.OpenAPIPath, e.do(req{method: "GET", path: dashboard.OpenAPIPath}))

	for _, want := range []string{"POST /api/v1/workflows 201", "GET /api/v1/workflows 200", "GET /api/v1/workflows/{id} 200",
		"GET /api/v1/workflows/{id} 404", "POST /api/v1/workflows 422", "POST /api/v1/workflows/{id}/cancel 409",
		"GET /api/v1/workflows 400", "GET /api/v1/me 401", "GET /api/v1/admin/audit 403", "POST /api/v1/admin/breakers/{name}/reset 404",
		"GET /api/v1/events 400", "GET /metrics 200", "GET /api/v1/openapi.json 200", "GET /api/v1/workers 200",
		"GET /api/v1/workers 403", "GET /api/v1/latency 200", "GET /api/v1/latency 400"} {
		if !a.seen[want] {
			t.Errorf("%s was not checked", want)
		}
	}
}

// TestOpenAPIStrictCheck makes sure the answers' check can fail: a run with
// a property the document does not list, or without a required one, or
// with a value of the wrong type, does not validate.
func TestOpenAPIStrictCheck(t *testing.T) {
	t.Parallel()
	a := newAnswers(t)
	sch, err := a.c.Compile(docURL + "#/components/schemas/Run")
	if err != nil {
		t.Fatal(err)
	}
	good := `{"id":"01hzzzzzzzzzzzzzzzzzzzzzzz","workflow":"demo","status":"failed","warning":"","needs_attention":true,
		"failure_code":"permanent_error","failure_reason":"x","iterations":1,"created_at":"2026-01-02T03:04:05Z",
		"started_at":null,"updated_at":"2026-01-02T03:04:05Z","finished_at":null,"deadline":null}`
	for name, body := range map[string]string{
		"good":              good,
		"unlisted property": strings.Replace(good, `"warning":""`, `"warning":"","surprise":1`, 1),
		"missing required":  strings.Replace(good, `"warning":"",`, ``, 1),
		"wrong type":        strings.Replace(good, `"iterations":1`, `"iterations":"1"`, 1),
		"bad time":          strings.Replace(good, `"created_at":"2026-01-02T03:04:05Z"`, `"created_at":"yesterday"`, 1),
		"bad status":        strings.Replace(good, `"status":"failed"`, `"status":"lost"`, 1),
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		err = sch.Validate(v)
		if (err == nil) != (name == "good") {
			t.Errorf("%s: validation error %v", name, err)
		}
	}
}
