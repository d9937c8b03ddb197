package dashboard

import (
	_ "embed" // the OpenAPI document
	"net/http"
)

// OpenAPIPath is where the server serves the OpenAPI 3.1 document of its
// HTTP API, to anyone: it describes the routes, parameters, bodies,
// answers and problems of the API, as in the source, and holds no run
// data, no subject and nothing of the server's configuration.
const OpenAPIPath = "/api/v1/openapi.json"

// openAPIDocument is openapi.json, the OpenAPI document of the API.
//
//go:embed openapi.json
var openAPIDocument []byte

// openAPI serves GET /api/v1/openapi.json, without authentication.
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", apiCSP)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}
