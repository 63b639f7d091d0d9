# Sourced by scripts/test and scripts/test-cleanup: starts local Workers (wrangler dev on
# workerd) and stops every one of them however the sourcing script ends: normal exit, a
# failing command under `set -e`, Ctrl-C (INT) or TERM.
#
#   start_worker NAME VAR [wrangler dev flags...]
#       starts a Worker in a process group of its own, waits until GET /v1/health answers,
#       then sets the variable VAR to its URL in the calling shell. Call it directly, never
#       inside $(...): a subshell would record the process group where the traps cannot see it.
#   stop_workers
#       TERM to every process group started, KILL to what is left after WORKERS_STOP_S, and
#       returns once every one of them is gone. Runs from the EXIT, INT and TERM traps that
#       the first start_worker sets; the sourcing script must not replace those traps.
#
# Each Worker keeps its state and log under $workers_dir (a fresh folder per run), removed on
# a successful exit and kept, with a note saying where, otherwise.
#
# INT and TERM are handled when the shell gets them: a Ctrl-C reaches the foreground command
# too, so the shell sees it at once; a TERM sent to the shell alone waits for the foreground
# command to end (send it to the script's process group, as a CI runner does).
# shellcheck shell=bash

workers_dir=""
# Process group ids, one per Worker started; each is the pid of its group's leader.
worker_pgids=()
# Seconds a Worker's group has to end after TERM before it gets KILL.
WORKERS_STOP_S=5
# Seconds a Worker has to answer its first GET /v1/health.
WORKERS_START_S=90

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start_worker() {
  local _sw_name="$1" _sw_var="$2"
  shift 2
  if ! [[ "$_sw_var" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
    echo "start_worker: \"$_sw_var\" is not a variable name" >&2
    return 2
  fi
  # With job control on, a background job leads its own process group, so setsid would fork
  # and $! would be a parent that exits at once instead of the new group's leader.
  if [[ $- == *m* ]]; then
    echo "start_worker: job control (set -m) is on; the Worker's process group would be lost" >&2
    return 2
  fi
  if [ -z "$workers_dir" ]; then
    workers_dir="$(mktemp -d "${TMPDIR:-/tmp}/handoff-workers.XXXXXX")"
    trap workers_exit EXIT
    trap 'workers_die INT' INT
    trap 'workers_die TERM' TERM
  fi
  local _sw_port _sw_inspector _sw_pid _sw_tries
  _sw_port="$(free_port)"
  _sw_inspector="$(free_port)"
  # setsid: the Worker and everything it spawns (workerd, esbuild) share a process group of
  # their own, which a Ctrl-C on the terminal does not reach and stop_workers stops whole.
  setsid wrangler dev --ip 127.0.0.1 --port "$_sw_port" --inspector-port "$_sw_inspector" \
    --persist-to "$workers_dir/$_sw_name-state" "$@" \
    > "$workers_dir/$_sw_name.log" 2>&1 < /dev/null &
  _sw_pid=$!
  worker_pgids+=("$_sw_pid")
  _sw_tries=$((WORKERS_START_S * 5))
  while ! curl -fsS "http://127.0.0.1:$_sw_port/v1/health" > /dev/null 2>&1; do
    _sw_tries=$((_sw_tries - 1))
    if [ "$_sw_tries" -le 0 ] || ! kill -0 "$_sw_pid" 2>/dev/null; then
      echo "start_worker: the $_sw_name Worker did not start; its log:" >&2
      cat "$workers_dir/$_sw_name.log" >&2
      return 1
    fi
    sleep 0.2
  done
  if [ "$(ps -o pgid= -p "$_sw_pid" | tr -d ' ')" != "$_sw_pid" ]; then
    echo "start_worker: the $_sw_name Worker (pid $_sw_pid) does not lead its process group" >&2
    return 1
  fi
  printf -v "$_sw_var" '%s' "http://127.0.0.1:$_sw_port"
}

# True while any process of the group $1 is running (a zombie, already ended, does not count).
worker_group_alive() {
  ps -e -o pgid=,stat= | awk -v group="$1" '$1 == group && $2 !~ /^Z/ { found = 1 } END { exit !found }'
}

# Waits up to $1 seconds for every group in worker_pgids to end; true when they all did.
workers_wait_gone() {
  local tries=$(($1 * 10)) pgid alive
  while :; do
    alive=0
    for pgid in ${worker_pgids[@]+"${worker_pgids[@]}"}; do
      if worker_group_alive "$pgid"; then alive=1; fi
    done
    [ "$alive" -eq 0 ] && return 0
    tries=$((tries - 1))
    [ "$tries" -le 0 ] && return 1
    sleep 0.1
  done
}

stop_workers() {
  [ ${#worker_pgids[@]} -eq 0 ] && return 0
  local pgid
  for pgid in "${worker_pgids[@]}"; do kill -TERM -- "-$pgid" 2>/dev/null || true; done
  if ! workers_wait_gone "$WORKERS_STOP_S"; then
    for pgid in "${worker_pgids[@]}"; do kill -KILL -- "-$pgid" 2>/dev/null || true; done
    if ! workers_wait_gone "$WORKERS_STOP_S"; then
      echo "stop_workers: process groups ${worker_pgids[*]} are still running after KILL" >&2
      return 1
    fi
  fi
  worker_pgids=()
}

# The EXIT trap: stop the Workers; keep their logs only when the script failed.
workers_exit() {
  local status=$?
  stop_workers || status=1
  if [ -n "$workers_dir" ] && [ -d "$workers_dir" ]; then
    if [ "$status" -eq 0 ]; then
      rm -rf "$workers_dir"
    else
      echo "workers: the Workers' logs and state are kept in $workers_dir" >&2
    fi
  fi
  return "$status"
}

# The INT and TERM traps: stop the Workers, then die of the same signal, so that whoever
# started the script sees it was interrupted (the EXIT trap then finds nothing left to stop).
workers_die() {
  stop_workers || true
  trap - "$1"
  kill -s "$1" "$$"
}
