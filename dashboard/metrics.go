package dashboard

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// defaultMetrics serves the default Prometheus registry.
func defaultMetrics() http.Handler { return promhttp.Handler() }
