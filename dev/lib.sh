# Shared by the dev/ scripts: where things live and small helpers. Source it, do not run it.
# Everything the stack keeps lives under .dev/ (ignored by git); ./dev/down stops it.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state="$root/.dev"
mkdir -p "$state/log" "$state/run"

# Ports on loopback; chosen away from the usual ones so a machine's own services do not clash.
pg_port=55432
s3_port=39000
garage_rpc_port=39001
garage_admin_port=39003
api_port=18080
scheduler_metrics_port=19464

# The TeX Live years of the sandbox images (sandbox-image/base/texlive-YEAR.txt) and the one a
# job gets when it names none.
texlive_years=(2022 2024 2026)
default_texlive=2024
garage_version=2.5.0
schemathesis_version=4.32.5
machete_version=0.9.2
openapi_python_client_version=0.29.1
standardwebhooks_version=1.1.0
# DEV_PROFILE=release builds and runs optimised binaries (./dev/bench does).
profile=${DEV_PROFILE:-debug}
bin="$root/target/$profile/texfleet"

# Each step with the time it began: a CI log shows where its minutes go.
say() { printf '\033[1m==> %s %s\033[0m\n' "$(date +%T)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Runs a command as the unprivileged owner of the Postgres cluster (initdb refuses root).
as_pg_user() {
  if [ "$(id -u)" = 0 ]; then runuser -u texfleet -- "$@"; else "$@"; fi
}

# The directory of the Postgres server binaries (initdb, pg_ctl, psql, createdb).
pg_bin() {
  local dir
  for dir in /usr/lib/postgresql/*/bin "$(dirname "$(readlink -f "$(command -v initdb || echo /x/x)")")"; do
    [ -x "$dir/initdb" ] && [ -x "$dir/psql" ] && { echo "$dir"; return; }
  done
  return 1
}

# Starts "$@" in the background, detached from this shell, logging to .dev/log/$name.log.
start_daemon() {
  local name=$1; shift
  stop_daemon "$name"
  setsid nohup "$@" >>"$state/log/$name.log" 2>&1 </dev/null &
  echo $! >"$state/run/$name.pid"
}

stop_daemon() {
  local pidfile="$state/run/$1.pid" pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    # Wait for a graceful exit (the scheduler lets running compiles finish), then insist.
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

# Runs "$@" until it succeeds, for at most 30 seconds, keeping its output.
garage_retry() {
  for _ in $(seq 1 60); do "$@" 2>/dev/null && return 0; sleep 0.5; done
  "$@"
}

# Waits until "$@" succeeds, for at most $1 seconds.
wait_for() {
  local seconds=$1; shift
  for _ in $(seq 1 $((seconds * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  return 1
}

random_hex() { od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; }

# Postgres and Garage are started by ./dev/up; these also serve ./dev/pg and ./dev/garage,
# which the fault tests use to take them down and bring them back.
pg_start() {
  touch "$state/log/postgres.log"
  [ "$(id -u)" = 0 ] && chown texfleet "$state/log/postgres.log"
  as_pg_user "$(pg_bin)/pg_ctl" -D "$state/pg" -l "$state/log/postgres.log" -w \
    -o "-p $pg_port -h 127.0.0.1 -k '' -c max_connections=300" start >/dev/null
}

pg_stop() {
  as_pg_user "$(pg_bin)/pg_ctl" -D "$state/pg" -m fast -w stop >/dev/null
}

garage_start() {
  local config="$state/garage/garage.toml"
  start_daemon garage garage -c "$config" server
  wait_for 30 garage -c "$config" status || die "Garage did not start; see $state/log/garage.log"
  # Listening on RPC is not serving S3 yet: wait for the S3 port too.
  wait_for 30 bash -c "exec 3<>/dev/tcp/127.0.0.1/$s3_port" || die "Garage's S3 API did not open"
}

# A venv in the user's cache holding PACKAGE at VERSION, made once per version; prints its path.
python_tool() {
  local venv="$HOME/.cache/texfleet/$1-$2"
  if ! "$venv/bin/pip" show -q "$1" >/dev/null 2>&1; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "$1==$2" >&2
  fi
  echo "$venv"
}
