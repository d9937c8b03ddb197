// Package deploy holds what an operator deploys next to Cairn's workers,
// and the tests that keep it true; it has no Go API.
//
//   - prometheus/cairn-alerts.yml: Prometheus alerting rules (load with
//     rule_files), with their unit tests, prometheus/cairn-alerts_test.yml
//     (promtool test rules);
//   - grafana/cairn-dashboard.json: a Grafana dashboard (import it; pick the
//     Prometheus data source).
//
// The tests run promtool check rules and promtool test rules (Debian's
// prometheus package: apt-get install -y --no-install-recommends
// prometheus), check the dashboard's queries with promtool too, and
// compare every metric name the rules and the dashboard use with those a
// worker engine exports at /metrics on a real redis-server. See
// docs/metrics.md, "Dashboards and alerts".
package deploy
