#!/bin/sh
# deps_test.sh: tests of deps.sh, which `make test` runs. deps.sh runs with
# PATH set to a directory of fake commands (id, sudo, apt-get and the
# commands it looks for), so nothing is installed and no network is used:
# the fake apt-get and sudo only record how they were called.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
script="$here/deps.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
	echo "FAIL: $case: $*" >&2
	failures=$((failures + 1))
}

# setup <uid> <sudo: ok|password|none> <apt-get: yes|no> <command>...: a fresh
# fake bin directory with those commands, a fake id that says uid, a fake
# sudo, a fake apt-get that records its arguments in $tmp/apt.log (and
# creates the commands of the packages it is asked to install: each
# package's name, and promtool for prometheus), and env.
setup() {
	rm -rf "$tmp/bin" "$tmp/apt.log" "$tmp/sudo.log"
	mkdir "$tmp/bin"
	: >"$tmp/apt.log"
	: >"$tmp/sudo.log"
	printf '#!/bin/sh\n[ "$1" = -u ] && echo %s\n' "$1" >"$tmp/bin/id"
	case $2 in
	ok) printf '#!/bin/sh\necho "$*" >>%s/sudo.log\n[ "$1" = -n ] && shift\n"$@"\n' "$tmp" >"$tmp/bin/sudo" ;;
	password) printf '#!/bin/sh\necho "$*" >>%s/sudo.log\necho "sudo: a password is required" >&2\nexit 1\n' "$tmp" >"$tmp/bin/sudo" ;;
	none) ;;
	esac
	if [ "$3" = yes ]; then
		# Installing creates each package's command.
		chmod=$(command -v chmod)
		cat >"$tmp/bin/apt-get" <<EOF
#!/bin/sh
echo "\$*" >>$tmp/apt.log
[ "\$1" = install ] || exit 0
for p in "\$@"; do
	case \$p in -*|install) ;; *) printf '#!/bin/sh\n' >$tmp/bin/\$p; $chmod +x $tmp/bin/\$p ;; esac
	if [ "\$p" = prometheus ]; then printf '#!/bin/sh\n' >$tmp/bin/promtool; $chmod +x $tmp/bin/promtool; fi
done
EOF
	fi
	ln -s "$(command -v env)" "$tmp/bin/env"
	shift 3
	for c in "$@"; do
		printf '#!/bin/sh\n' >"$tmp/bin/$c"
	done
	chmod +x "$tmp/bin"/*
}

# run: deps.sh with PATH the fake bin directory only; its exit code in rc,
# its output in out.
run() {
	rc=0
	out=$(env -u CAIRN_REDIS_SERVER -u GO PATH="$tmp/bin" /bin/sh "$script" 2>&1) || rc=$?
}

all="go redis-server chromium make docker-compose promtool"

case="everything there"
# shellcheck disable=SC2086
setup 1000 password yes $all
run
[ "$rc" -eq 0 ] || fail "exit $rc, want 0: $out"
[ -z "$out" ] || fail "output $out, want none"
[ ! -s "$tmp/apt.log" ] || fail "apt-get called: $(cat "$tmp/apt.log")"
[ ! -s "$tmp/sudo.log" ] || fail "sudo called: $(cat "$tmp/sudo.log")"

case="everything there, CAIRN_REDIS_SERVER for redis-server"
setup 1000 password yes go chromium make docker-compose promtool
printf '#!/bin/sh\n' >"$tmp/redis"
chmod +x "$tmp/redis"
rc=0
out=$(env -u GO CAIRN_REDIS_SERVER="$tmp/redis" PATH="$tmp/bin" /bin/sh "$script" 2>&1) || rc=$?
[ "$rc" -eq 0 ] && [ -z "$out" ] && [ ! -s "$tmp/apt.log" ] || fail "exit $rc, output $out, apt-get $(cat "$tmp/apt.log")"

case="everything there, GO for go"
setup 1000 password yes go1.26 redis-server chromium make docker-compose promtool
rc=0
out=$(env -u CAIRN_REDIS_SERVER GO=go1.26 PATH="$tmp/bin" /bin/sh "$script" 2>&1) || rc=$?
[ "$rc" -eq 0 ] && [ -z "$out" ] || fail "exit $rc, output $out"
run
[ "$rc" -eq 1 ] || fail "without GO and go: exit $rc, want 1: $out"

case="cannot install: not root, sudo asks for a password"
setup 1000 password yes go redis-server make
run
want="sudo apt-get update && sudo apt-get install -y chromium && sudo apt-get install -y --no-install-recommends docker-compose prometheus"
[ "$rc" -eq 1 ] || fail "exit $rc, want 1: $out"
printf '%s\n' "$out" | grep -qxF "  $want" || fail "output lacks the command line '  $want':
$out"
[ ! -s "$tmp/apt.log" ] || fail "apt-get called: $(cat "$tmp/apt.log")"

case="cannot install: not root, no sudo"
setup 1000 none yes go redis-server chromium make
run
want="sudo apt-get update && sudo apt-get install -y --no-install-recommends docker-compose prometheus"
[ "$rc" -eq 1 ] || fail "exit $rc, want 1: $out"
printf '%s\n' "$out" | grep -qxF "  $want" || fail "output lacks '  $want':
$out"
[ ! -s "$tmp/apt.log" ] || fail "apt-get called: $(cat "$tmp/apt.log")"

case="cannot install: no apt-get"
setup 0 none no go make docker-compose chromium
run
[ "$rc" -eq 1 ] || fail "exit $rc, want 1: $out"
printf '%s\n' "$out" | grep -q "no apt-get" || fail "output does not say there is no apt-get: $out"
printf '%s\n' "$out" | grep -q "missing: redis-server" || fail "output does not name redis-server: $out"

case="no go"
# shellcheck disable=SC2086
setup 0 none yes redis-server chromium make docker-compose promtool
run
[ "$rc" -eq 1 ] || fail "exit $rc, want 1: $out"
printf '%s\n' "$out" | grep -q "go.dev/dl" || fail "output does not say where Go is: $out"
[ ! -s "$tmp/apt.log" ] || fail "apt-get called: $(cat "$tmp/apt.log")"

case="installs through sudo without a password"
setup 1000 ok yes go redis-server make docker-compose promtool
run
[ "$rc" -eq 0 ] || fail "exit $rc, want 0: $out"
want="update -qq
install -y -qq chromium"
[ "$(cat "$tmp/apt.log")" = "$want" ] || fail "apt-get calls:
$(cat "$tmp/apt.log")
want
$want"
grep -q "^-n env DEBIAN_FRONTEND=noninteractive apt-get install" "$tmp/sudo.log" || fail "not installed through sudo -n: $(cat "$tmp/sudo.log")"

case="installs as root"
setup 0 none yes go chromium make
run
[ "$rc" -eq 0 ] || fail "exit $rc, want 0: $out"
want="update -qq
install -y -qq redis-server
install -y -qq --no-install-recommends docker-compose prometheus"
[ "$(cat "$tmp/apt.log")" = "$want" ] || fail "apt-get calls:
$(cat "$tmp/apt.log")
want
$want"

if [ "$failures" -gt 0 ]; then
	echo "scripts/deps_test.sh: $failures failed" >&2
	exit 1
fi
echo "scripts/deps_test.sh: ok"
