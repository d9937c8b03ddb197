#!/bin/sh
# deps.sh: install the Debian packages that the tests and CI need, when they
# are missing. `make test` (through `make deps`) and .ci/run run it first.
#
#   redis-server    every test that talks to Redis (internal/redistest)
#   chromium        the browser tests of the dashboard (cmd/internal/e2e)
#   make            the Makefile, for .ci/run
#   docker-compose  make compose-check (Debian's 1.29, without its recommended
#                   docker.io: no daemon is needed)
#   prometheus      promtool, which checks deploy/prometheus's alerting rules
#                   and the Grafana dashboard's queries (package deploy);
#                   without its recommended node exporter. On a host with
#                   systemd the package also starts a Prometheus server
#                   (systemctl disable --now prometheus if unwanted)
#
# When every command is there it does nothing: no network, no root. Else it
# installs the missing packages with apt-get, as root, or through sudo when
# sudo works without a password. When it can do neither (or there is no
# apt-get), it prints the one command that installs them and exits 1.
#
# Go itself (go.mod's version, 1.26) is not a Debian package here: the
# script checks that `go` (or $GO, which make passes) is on PATH and says
# where to get it otherwise.
#
# CAIRN_REDIS_SERVER, when it names an executable, stands for redis-server
# (as in internal/redistest). scripts/deps_test.sh tests this script with
# fake commands; it never runs apt-get.
set -eu

have() { command -v "$1" >/dev/null 2>&1; }

missing=    # packages installed with their recommends
missing_nr= # packages installed with --no-install-recommends
need() {    # need <command> <package>
	if ! have "$1"; then missing="$missing $2"; fi
}

if [ -z "${CAIRN_REDIS_SERVER:-}" ] || [ ! -x "$CAIRN_REDIS_SERVER" ]; then
	need redis-server redis-server
fi
need chromium chromium
need make make
if ! have docker-compose; then missing_nr=" docker-compose"; fi
if ! have promtool; then missing_nr="$missing_nr prometheus"; fi

if ! have "${GO:-go}"; then
	echo "deps: ${GO:-go} is not on PATH: install Go 1.26 or later (https://go.dev/dl/) and put its bin directory on PATH" >&2
	exit 1
fi
if [ -z "$missing$missing_nr" ]; then
	exit 0
fi

# install_command <prefix>: the command line that installs what is missing,
# each apt-get call prefixed with <prefix> ("sudo " or "").
install_command() {
	line="${1}apt-get update"
	if [ -n "$missing" ]; then
		line="$line && ${1}apt-get install -y$missing"
	fi
	if [ -n "$missing_nr" ]; then
		line="$line && ${1}apt-get install -y --no-install-recommends$missing_nr"
	fi
	printf '%s\n' "$line"
}

echo "deps: missing:$missing$missing_nr" >&2
if ! have apt-get; then
	echo "deps: no apt-get here (not Debian or Ubuntu?): install the packages above with your package manager" >&2
	echo "  (on Debian: $(install_command 'sudo '))" >&2
	exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
	as_root() { "$@"; }
	prefix=
elif have sudo && sudo -n true >/dev/null 2>&1; then
	as_root() { sudo -n "$@"; }
	prefix='sudo '
else
	echo "deps: not root, and sudo asks for a password (or is not installed): run" >&2
	echo "" >&2
	echo "  $(install_command 'sudo ')" >&2
	echo "" >&2
	echo "then make test again." >&2
	exit 1
fi

echo "deps: $(install_command "$prefix")" >&2
as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
if [ -n "$missing" ]; then
	# shellcheck disable=SC2086 # one word per package
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
fi
if [ -n "$missing_nr" ]; then
	# shellcheck disable=SC2086
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing_nr
fi

# What apt-get installed must now be on PATH (each package's command is
# its name, but prometheus's that the tests need is promtool).
for p in $missing $missing_nr; do
	c=$p
	if [ "$p" = prometheus ]; then c=promtool; fi
	if ! have "$c"; then
		echo "deps: $c is still not on PATH after apt-get installed $p" >&2
		exit 1
	fi
done
