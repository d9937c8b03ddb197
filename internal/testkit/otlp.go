package testkit

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"sync"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// OTLPSpan is what a test reads of a span an OTLPReceiver was sent: the
// service.name of its resource, its name, and its trace, parent and own
// IDs in hex ("" for no parent).
type OTLPSpan struct {
	Service, Name, Trace, Parent, ID string
}

// OTLPReceiver is a loopback OpenTelemetry trace receiver that keeps the
// spans it is sent: an http.Handler for OTLP/HTTP (protobuf, POST
// /v1/traces) and a gRPC TraceServiceServer (register it with
// coltrace.RegisterTraceServiceServer).
type OTLPReceiver struct {
	coltrace.UnimplementedTraceServiceServer

	mu    sync.Mutex
	spans []OTLPSpan
}

// ServeHTTP takes one OTLP/HTTP export request.
func (o *OTLPReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	var req coltrace.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	o.add(&req)
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// Export takes one OTLP/gRPC export request.
func (o *OTLPReceiver) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	o.add(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func (o *OTLPReceiver) add(req *coltrace.ExportTraceServiceRequest) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				o.spans = append(o.spans, OTLPSpan{Service: service, Name: s.GetName(),
					Trace: hex.EncodeToString(s.GetTraceId()), Parent: hex.EncodeToString(s.GetParentSpanId()),
					ID: hex.EncodeToString(s.GetSpanId())})
			}
		}
	}
}

// Spans returns the spans received so far, in the order they came.
func (o *OTLPReceiver) Spans() []OTLPSpan {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]OTLPSpan(nil), o.spans...)
}

// Named returns the spans received so far that are called name.
func (o *OTLPReceiver) Named(name string) []OTLPSpan {
	var out []OTLPSpan
	for _, s := range o.Spans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}
