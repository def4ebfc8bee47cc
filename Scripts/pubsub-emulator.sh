#!/usr/bin/env bash
# Google's Pub/Sub emulator (the google-cloud-cli-pubsub-emulator package, Java) on
# 127.0.0.1, for `consume gcppubsub://…` by hand and for the tests.
#
#   Scripts/pubsub-emulator.sh start [--port N]   start it in the background; prints the
#                                                 export PUBSUB_EMULATOR_HOST=127.0.0.1:N line
#   Scripts/pubsub-emulator.sh stop               stop what `start` started (and only that)
#   Scripts/pubsub-emulator.sh run [--port N]     in the foreground: prints `host 127.0.0.1:N`
#                                                 once it answers, stops it when standard input
#                                                 closes or on SIGTERM/SIGINT (what the tests use)
#   Scripts/pubsub-emulator.sh available          exit 0 when the emulator and Java are installed
#
# The emulator runs in a process group of its own (Java starts threads and may start
# children): stopping it signals that group, first TERM, then KILL after 20 s. `start`
# keeps its pid, port and log in $PUBSUB_EMULATOR_STATE (default .pubsub-emulator/ at the
# top of the checkout). Without --port a free port is picked. Nothing listens off loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
state=${PUBSUB_EMULATOR_STATE:-.pubsub-emulator}

find_emulator() {
  local candidates=()
  [ -n "${PUBSUB_EMULATOR_BIN:-}" ] && candidates+=("$PUBSUB_EMULATOR_BIN")
  if command -v gcloud >/dev/null 2>&1; then
    candidates+=("$(dirname "$(readlink -f "$(command -v gcloud)")")/../platform/pubsub-emulator/bin/cloud-pubsub-emulator")
  fi
  candidates+=(/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator
               /usr/share/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator)
  local c
  for c in "${candidates[@]}"; do
    if [ -x "$c" ]; then readlink -f "$c"; return 0; fi
  done
  return 1
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Is something in process group $1 still alive?
group_alive() { kill -0 -- "-$1" 2>/dev/null; }

stop_group() {
  local pgid=$1 waited=0
  group_alive "$pgid" || return 0
  kill -TERM -- "-$pgid" 2>/dev/null || true
  while group_alive "$pgid" && [ "$waited" -lt 200 ]; do sleep 0.1; waited=$((waited + 1)); done
  if group_alive "$pgid"; then kill -KILL -- "-$pgid" 2>/dev/null || true; fi
  while group_alive "$pgid"; do sleep 0.1; done
}

# One REST call answered with HTTP 200 (bash's /dev/tcp: no curl needed).
answers() {
  local port=$1 line
  { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || return 1
  printf 'GET /v1/projects/probe-project/topics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  IFS= read -r -t 10 line <&3 || line=""
  exec 3<&- 3>&-
  case "$line" in "HTTP/1."?" 200"*) return 0 ;; *) return 1 ;; esac
}

# Starts the emulator in a new process group; sets $pid. Output goes to $1.
launch() {
  local log=$1 port=$2 bin
  bin=$(find_emulator) || { echo "pubsub-emulator.sh: the Pub/Sub emulator is not installed (apt-get install google-cloud-cli-pubsub-emulator)" >&2; exit 3; }
  command -v java >/dev/null 2>&1 || { echo "pubsub-emulator.sh: java is not on PATH (the emulator needs a JRE)" >&2; exit 3; }
  # Without job control a background job is not a group leader, so setsid makes it
  # one without forking: $! is the leader, and its pid is the group's id.
  setsid "$bin" --host=127.0.0.1 --port="$port" >"$log" 2>&1 </dev/null &
  pid=$!
  local waited=0
  until answers "$port"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "pubsub-emulator.sh: the emulator exited while starting:" >&2
      tail -n 20 "$log" >&2
      exit 1
    fi
    if [ "$waited" -ge 1200 ]; then
      echo "pubsub-emulator.sh: no answer on 127.0.0.1:$port after 120 s" >&2
      stop_group "$pid"
      exit 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  if [ "$(ps -o pgid= -p "$pid" | tr -d ' ')" != "$pid" ]; then
    echo "pubsub-emulator.sh: the emulator is not in a process group of its own" >&2
    kill -TERM "$pid"
    exit 1
  fi
}

command=${1:-}
shift || true
port=""
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port=$2; shift 2 ;;
    --port=*) port=${1#--port=}; shift ;;
    *) echo "pubsub-emulator.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

case "$command" in
  available)
    find_emulator >/dev/null && command -v java >/dev/null 2>&1
    ;;
  start)
    mkdir -p "$state"
    if [ -f "$state/pid" ] && group_alive "$(cat "$state/pid")"; then
      echo "pubsub-emulator.sh: already running (pid $(cat "$state/pid")); stop it first" >&2
      exit 1
    fi
    port=${port:-$(free_port)}
    launch "$state/emulator.log" "$port"
    echo "$pid" >"$state/pid"
    echo "$port" >"$state/port"
    echo "export PUBSUB_EMULATOR_HOST=127.0.0.1:$port"
    ;;
  stop)
    [ -f "$state/pid" ] || { echo "pubsub-emulator.sh: not started here (no $state/pid)" >&2; exit 0; }
    pid=$(cat "$state/pid")
    # Only the group we started: its leader must still be the emulator (pids are reused).
    if kill -0 "$pid" 2>/dev/null && ! tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'pubsub-emulator'; then
      echo "pubsub-emulator.sh: pid $pid is no longer the emulator; not signalling it" >&2
    else
      stop_group "$pid"
    fi
    rm -f "$state/pid" "$state/port"
    ;;
  run)
    port=${port:-$(free_port)}
    log=$(mktemp "${TMPDIR:-/tmp}/pubsub-emulator.XXXXXX.log")
    launch "$log" "$port"
    trap 'stop_group "$pid"; rm -f "$log"' EXIT
    trap 'exit 0' TERM INT HUP
    echo "host 127.0.0.1:$port"
    # Until our standard input closes (the test process is done, or died). An explicit
    # redirection, else bash gives a background job /dev/null. On SIGTERM the reader goes too.
    cat <&0 >/dev/null &
    reader=$!
    trap 'kill "$reader" 2>/dev/null || true; stop_group "$pid"; rm -f "$log"' EXIT
    wait "$reader" || true
    ;;
  *)
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
