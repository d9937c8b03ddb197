package otelenv_test

import (
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/otelenv"
)

// TestDecide: when tracing is on, with what, and what is refused.
func TestDecide(t *testing.T) {
	for _, c := range []struct {
		env       map[string]string
		exporters []string
		want      otelenv.Choice
		wantErr   string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_SERVICE_NAME": "x"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, want: otelenv.Choice{Exporter: "otlp", Protocol: "http/protobuf"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			want: otelenv.Choice{Exporter: "otlp", Protocol: "grpc"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, want: otelenv.Choice{Exporter: "otlp", Protocol: "http/protobuf"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": " otlp "}, want: otelenv.Choice{Exporter: "otlp", Protocol: "http/protobuf"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, exporters: []string{"otlp", "console"},
			want: otelenv.Choice{Exporter: "console"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, wantErr: `OTEL_TRACES_EXPORTER="console": this program supports otlp and none`},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: "OTEL_TRACES_EXPORTER"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			wantErr: `OTEL_EXPORTER_OTLP_PROTOCOL="http/json"`},
	} {
		exporters := c.exporters
		if exporters == nil {
			exporters = []string{"otlp"}
		}
		got, err := otelenv.Decide(func(k string) string { return c.env[k] }, exporters)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v: error %v, want one saying %s", c.env, err, c.wantErr)
			}
		case err != nil:
			t.Errorf("%v: %v", c.env, err)
		case got != c.want:
			t.Errorf("%v: %+v, want %+v", c.env, got, c.want)
		case got.Off() != (c.want.Exporter == ""):
			t.Errorf("%v: Off() %v", c.env, got.Off())
		}
	}
}
