package deploy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/metrics"
	"github.com/cairnhq/cairn/workflow"
)

func TestMain(m *testing.M) { testkit.Main(m) }

const (
	rulesFile     = "prometheus/cairn-alerts.yml"
	rulesTestFile = "prometheus/cairn-alerts_test.yml"
	dashboardFile = "grafana/cairn-dashboard.json"
	metricsDoc    = "../docs/metrics.md"
)

// promtoolInstall is how to get promtool (scripts/deps.sh installs it).
const promtoolInstall = "apt-get install -y --no-install-recommends prometheus"

// promtool runs promtool with args in dir and fails the test with its
// output if it fails; without promtool the test fails with the install
// command.
func promtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed; the checks of the Prometheus rules need it: %s (make deps does)",
			promtoolInstall)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestAlertRulesValid: promtool accepts the rules, and their unit tests
// (cairn-alerts_test.yml: each alert fires, and stays quiet, when it
// should) pass.
func TestAlertRulesValid(t *testing.T) {
	t.Parallel()
	promtool(t, ".", "check", "rules", rulesFile)
	promtool(t, "prometheus", "test", "rules", filepath.Base(rulesTestFile))
}

// rules is the part of a Prometheus rules file the tests read.
type rules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readRules(t *testing.T) rules {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var r rules
	if err := yaml.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return r
}

// TestAlertRulesShape: every alert has a severity, says what happened and
// what to do, and links a section of docs/metrics.md that exists; every
// alert is unit-tested.
func TestAlertRulesShape(t *testing.T) {
	t.Parallel()
	r := readRules(t)
	doc, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := markdownAnchors(string(doc))
	tests, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	const docURL = "https://github.com/cairnhq/cairn/blob/main/docs/metrics.md#"
	n := 0
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "" {
				continue
			}
			n++
			if s := rule.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
				t.Errorf("%s: severity %q, want critical, warning or info", rule.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(rule.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", rule.Alert, a)
				}
			}
			url := rule.Annotations["runbook_url"]
			if anchor, ok := strings.CutPrefix(url, docURL); !ok || !anchors[anchor] {
				t.Errorf("%s: runbook_url %s is not a section of docs/metrics.md (%s<anchor>)", rule.Alert, url, docURL)
			}
			if !strings.Contains(string(tests), "alertname: "+rule.Alert+"\n") {
				t.Errorf("%s: no unit test in %s", rule.Alert, rulesTestFile)
			}
		}
	}
	if n < 5 {
		t.Errorf("%d alerts in %s, want at least 5", n, rulesFile)
	}
}

// markdownAnchors returns the anchors GitHub gives the headings of doc.
func markdownAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for line := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		out[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return out
}

// dashboard is the part of the Grafana dashboard the tests read.
type dashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"` //nolint:tagliatelle // Grafana spells it so
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct {
		X int `json:"x"`
		Y int `json:"y"`
		W int `json:"w"`
		H int `json:"h"`
	} `json:"gridPos"` //nolint:tagliatelle // Grafana spells it so
	Targets []struct {
		RefID      string      `json:"refId"` //nolint:tagliatelle // Grafana spells it so
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// promDS is the data source every panel and query must use: the
// dashboard's ${datasource} variable.
var promDS = datasource{Type: "prometheus", UID: "${datasource}"}

// TestDashboardShape: the dashboard parses, has the datasource, queue and
// workflow variables, its panels do not overlap, and every panel queries
// the ${datasource} variable with at least one query.
func TestDashboardShape(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: want both", d.UID, d.Title)
	}
	// 41: Grafana 12's; a later Grafana migrates it on import.
	if d.SchemaVersion < 41 {
		t.Errorf("schemaVersion %d, want 41 or later", d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Type == "query" && (v.Datasource == nil || *v.Datasource != promDS) {
			t.Errorf("variable %s: datasource %v, want %v", v.Name, v.Datasource, promDS)
		}
	}
	for name, typ := range map[string]string{"datasource": "datasource", "queue": "query", "workflow": "query"} {
		if vars[name] != typ {
			t.Errorf("variable %s: type %q, want %q", name, vars[name], typ)
		}
	}
	if len(d.Panels) < 10 {
		t.Errorf("%d panels, want at least 10", len(d.Panels))
	}
	ids := map[int]bool{}
	cells := map[[2]int]string{} // the grid's cells, 24 columns, to the panel on each
	for _, p := range d.Panels {
		if p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: columns %d to %d, past the grid's 24", p.Title, p.GridPos.X, p.GridPos.X+p.GridPos.W)
		}
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				if other, ok := cells[[2]int{x, y}]; ok {
					t.Fatalf("panels %q and %q overlap at (%d, %d)", other, p.Title, x, y)
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Title == "" || p.GridPos.W <= 0 || p.GridPos.H <= 0 {
			t.Errorf("panel %d: title %q, size %dx%d", p.ID, p.Title, p.GridPos.W, p.GridPos.H)
		}
		if p.Datasource == nil || *p.Datasource != promDS {
			t.Errorf("panel %q: datasource %v, want %v", p.Title, p.Datasource, promDS)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no query", p.Title)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			if strings.TrimSpace(q.Expr) == "" || q.RefID == "" || refs[q.RefID] {
				t.Errorf("panel %q: query %q: empty, or refId %q empty or repeated", p.Title, q.Expr, q.RefID)
			}
			refs[q.RefID] = true
			if q.Datasource == nil || *q.Datasource != promDS {
				t.Errorf("panel %q: query %s: datasource %v, want %v", p.Title, q.RefID, q.Datasource, promDS)
			}
		}
	}
}

// grafanaVars replaces Grafana's variables in a query by what PromQL
// accepts in their place.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
	"${datasource}", "x", "$queue", ".*", "$workflow", ".*")

// labelValues matches a variable's label_values(<expr>, <label>) query.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// dashboardQueries returns the dashboard's PromQL: its panels' queries
// (Grafana's variables replaced) and its variables' label_values
// selectors, with the labels those read.
func dashboardQueries(t *testing.T, d dashboard) (exprs map[string]string, varLabels []string) {
	t.Helper()
	exprs = map[string]string{}
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			exprs["dashboard:panel_"+strings.ReplaceAll(strings.ToLower(p.Title), " ", "_")+"_"+q.RefID] = grafanaVars.Replace(q.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Fatalf("variable %s: query %q is not label_values(<selector>, <label>)", v.Name, v.Definition)
		}
		exprs["dashboard:variable_"+v.Name] = m[1]
		varLabels = append(varLabels, m[2])
	}
	return exprs, varLabels
}

// TestDashboardQueriesValid: promtool accepts every query of the dashboard
// (each made the expression of a recording rule, its variables replaced).
func TestDashboardQueriesValid(t *testing.T) {
	t.Parallel()
	exprs, _ := dashboardQueries(t, readDashboard(t))
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rs []rule
	for name, e := range exprs {
		rs = append(rs, rule{Record: regexp.MustCompile(`[^a-zA-Z0-9_:]`).ReplaceAllString(name, "_"), Expr: e})
	}
	slices.SortFunc(rs, func(a, b rule) int { return strings.Compare(a.Record, b.Record) })
	b, err := yaml.Marshal(map[string]any{"groups": []map[string]any{{"name": "dashboard", "rules": rs}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	promtool(t, ".", "check", "rules", path)
}

// recorder is a registry that remembers the collectors registered on it,
// to read their descriptions.
type recorder struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registry.Register(c)
}

var descName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)".*variableLabels: \{([^}]*)\}\}$`)

// exported starts a worker engine with metrics on a real redis-server as
// the worker binary does (metrics.NewRegistry, metrics.New on its Redis
// and queue), runs a demo run with a retry, scrapes /metrics and returns
// the names a query can use (a histogram's with their _bucket, _sum and
// _count suffixes) and their labels. A collector's metric that has no
// sample yet (a repair, a breaker, a failed read) counts by its
// description, under its exact name.
func exported(t *testing.T) (names, labels map[string]bool) {
	t.Helper()
	rdb := redistest.Shared(t).Client(t)
	queue := testkit.Queue(t, "deploy")
	reg := &recorder{Registry: metrics.NewRegistry()}
	m, err := metrics.New(reg, metrics.Config{Redis: rdb, Queue: queue, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	log := testkit.Logger(t)
	testkit.StartWorker(t, rdb, workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{Queue: queue, Logger: log, Observer: m}},
		demo.Definition(workflow.Policy{MaxAttempts: 3, InitialInterval: 10 * time.Millisecond, Jitter: workflow.JitterNone}))
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: log, Observer: m})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := client.Start(ctx, demo.Name, demo.Input{FailStep: "transform", FailTimes: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := client.Wait(ctx, run.ID, 20*time.Millisecond); err != nil || r.Status != workflow.StatusSucceeded {
		t.Fatalf("run: %+v, %v; want succeeded", r, err)
	}

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	var fams map[string]*dto.MetricFamily
	// The observer counts a run's end just after the script that ended it.
	testkit.Eventually(t, 10*time.Second, "the run's end and its retry in /metrics", func() bool {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err = p.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return fams["cairn_runs_finished_total"] != nil && fams["cairn_retry_delay_seconds"] != nil
	})
	names, labels = map[string]bool{}, map[string]bool{"job": true, "instance": true, "le": true}
	for name, f := range fams {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[name], names[name+"_sum"], names[name+"_count"] = true, true, true
		default:
			names[name] = true
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = true
			}
		}
	}
	ch := make(chan *prometheus.Desc, 100)
	go func() {
		for _, c := range reg.collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	for d := range ch {
		match := descName.FindStringSubmatch(d.String())
		if match == nil {
			t.Fatalf("cannot read the description %s", d)
		}
		names[match[1]] = true
		for l := range strings.SplitSeq(match[2], ",") {
			if l != "" {
				labels[l] = true
			}
		}
	}
	return names, labels
}

// prometheusOwn are the series Prometheus makes itself, not the worker.
var prometheusOwn = []string{"up"}

// TestMetricNamesExported: every metric name and label the alert rules
// and the dashboard's queries use is one a worker exports at /metrics.
func TestMetricNamesExported(t *testing.T) {
	t.Parallel()
	names, labels := exported(t)
	// A check that finds nothing checks nothing: the scrape has the
	// histograms' series and the descriptions the metrics of no sample.
	for _, want := range []string{"cairn_step_duration_seconds_bucket", "cairn_reconciler_repairs_total",
		"cairn_breaker_state", "cairn_workers", "cairn_redis_up", "cairn_info", "asynq_queue_latency_seconds"} {
		if !names[want] {
			t.Fatalf("the worker does not export %s; exported: %v", want, names)
		}
	}

	exprs := map[string]string{}
	recorded := map[string]bool{}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			exprs[rulesFile+": "+r.Alert+r.Record] = r.Expr
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	dexprs, varLabels := dashboardQueries(t, readDashboard(t))
	for k, e := range dexprs {
		exprs[dashboardFile+": "+k] = e
	}
	for _, l := range varLabels {
		if !labels[l] {
			t.Errorf("%s: a variable reads label %q, which no exported metric has", dashboardFile, l)
		}
	}
	used := 0
	for where, e := range exprs {
		ms, ls := promqlNames(e)
		if len(ms) == 0 {
			t.Errorf("%s: no metric name found in %q", where, e)
		}
		for _, m := range ms {
			used++
			if !names[m] && !recorded[m] && !slices.Contains(prometheusOwn, m) {
				t.Errorf("%s: metric %s is not exported by the worker", where, m)
			}
		}
		for _, l := range ls {
			if !labels[l] {
				t.Errorf("%s: label %q is on no exported metric", where, l)
			}
		}
	}
	t.Logf("%d queries checked, %d metric names used", len(exprs), used)
}
