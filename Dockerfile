# Cairn's image: the worker (`worker`, also the dashboard with
# --dashboard-only) and the CLI (`enqueue`), static binaries on a distroless
# base, run as a non-root user.
#
#   docker build -t cairn .
#   docker compose up --scale worker=3      (docker-compose.yml)
#
# It builds with the classic builder and with BuildKit alike (no RUN
# --mount, no syntax directive to fetch).

# The Go toolchain of go.mod's go line (cmd/internal/e2e/compose_test.go checks
# that they agree). Pin it by digest too where your registry policy asks for
# that: golang:1.26.8-bookworm@sha256:...
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Static binaries; never download another toolchain than the image's.
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
# The modules first, in a layer of their own: a change to the sources does
# not download them again.
COPY go.mod go.sum ./
RUN go mod download && go mod verify
COPY . .
# What --version reports: docker build --build-arg VERSION=v1.2.0 (empty:
# "devel", as the context has no .git to take a revision from).
ARG VERSION=
# -trimpath: no build paths in the binaries; -buildvcs=false: the context
# has no .git (.dockerignore); -s -w: no symbol table or DWARF (stack
# traces keep their function names and lines); -X: the version.
RUN go build -trimpath -buildvcs=false \
	-ldflags="-s -w -X github.com/cairnhq/cairn/cmd/internal/version.Version=${VERSION}" \
	-o /out/ ./cmd/worker ./cmd/enqueue

# distroless/static: CA certificates (rediss://, https webhooks), time zone
# data and /etc/passwd with the user nonroot (65532), and no shell or
# package manager. Pin it by digest where your policy asks for that.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/worker /out/enqueue /usr/local/bin/
# Numeric, so that a runtime can check it is not root without reading
# /etc/passwd (Kubernetes' runAsNonRoot).
USER 65532:65532
# CAIRN_HTTP_ADDR: the API, dashboard, /metrics, /healthz, /readyz. The
# default, 127.0.0.1:8080, is reachable from inside the container only;
# docker-compose.yml sets 0.0.0.0:8080, with a tokens file.
EXPOSE 8080
# The image has no shell or curl: the worker binary probes its own server
# (GET /readyz on CAIRN_HTTP_ADDR, exit 0 or 1). Disable it
# (--no-healthcheck) for a worker run with CAIRN_HTTP_ADDR empty.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
	CMD ["/usr/local/bin/worker", "--healthcheck"]
ENTRYPOINT ["/usr/local/bin/worker"]
