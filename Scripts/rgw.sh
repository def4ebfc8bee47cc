#!/usr/bin/env bash
# A Ceph RADOS Gateway (a real S3 server) on 127.0.0.1, for the bucket store's tests.
#
#   Scripts/rgw.sh install        install Debian's ceph-mon, ceph-osd, radosgw, ceph-common if missing
#   Scripts/rgw.sh start DIR      start a one-OSD cluster and its gateway with all state in DIR
#                                 (a new, empty directory); prints one JSON line:
#                                 {"endpoint", "port", "access_key_id", "secret_access_key", "region", "dir"}
#   Scripts/rgw.sh env DIR        the AWS_* variables that reach it, as export lines
#   Scripts/rgw.sh stop DIR       stop exactly the processes `start DIR` started
#   Scripts/rgw.sh serve [DIR]    start, print the JSON line, wait until standard input
#                                 closes, stop, remove DIR: what the tests run (a test
#                                 process that dies closes the pipe, so nothing is left running)
#
# The cluster: ceph-mon and one ceph-osd on the in-memory memstore object store, auth
# `none` between the daemons, msgr2 only in crc mode, pools of one replica; radosgw
# with the beast frontend; an S3 user made by radosgw-admin. Every daemon binds
# 127.0.0.1 on a free port, runs in the foreground as a child of this script and is
# recorded in DIR/pids; `stop` kills those PIDs and nothing else. The gateway's log
# (DIR/log/client.rgw.log) has one access line per request, with its User-Agent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

serving=0
die() {
  echo "rgw.sh: $*" >&2
  [ $serving -eq 1 ] && printf '{"error": "%s"}\n' "$(echo "$*" | tr -d '"\\')"
  [ -n "${dir:-}" ] && stop_daemons
  exit 1
}

install_packages() {
  local missing=()
  command -v ceph-mon >/dev/null 2>&1 || missing+=(ceph-mon)
  command -v ceph-osd >/dev/null 2>&1 || missing+=(ceph-osd)
  command -v radosgw >/dev/null 2>&1 || missing+=(radosgw)
  command -v radosgw-admin >/dev/null 2>&1 || missing+=(radosgw)
  command -v ceph >/dev/null 2>&1 || missing+=(ceph-common)
  command -v monmaptool >/dev/null 2>&1 || missing+=(ceph-common)
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "rgw.sh: installing ${missing[*]} (Debian's Ceph; about a minute)" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  # The packages' maintainer scripts would start nothing here (no systemd in a
  # container; policy-rc.d elsewhere): only the binaries are wanted.
  $sudo apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
  local seconds=$1; shift
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -ge $deadline ] && return 1
    check_alive
    sleep 0.2
  done
}

# A daemon that died on start: say which, with the end of its log.
check_alive() {
  local name pid
  [ -f "$dir/pids" ] || return 0
  while read -r name pid; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "rgw.sh: $name (pid $pid) exited; the end of its log:" >&2
      tail -n 20 "$dir/log/$name.log" >&2 2>/dev/null || true
      die "$name did not start"
    fi
  done <"$dir/pids"
}

# Starts a daemon in the foreground as our child and records its PID.
launch() {
  local name=$1; shift
  "$@" </dev/null >>"$dir/log/$name.out" 2>&1 &
  echo "$name $!" >>"$dir/pids"
}

start() {
  dir=$1
  [ -d "$dir" ] || mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ -e "$dir/pids" ] && die "$dir already has a cluster (stop it first)"
  install_packages
  mkdir -p "$dir/mon" "$dir/osd" "$dir/run" "$dir/log" "$dir/rgw"
  local mon_port rgw_port fsid osd_uuid
  mon_port=$(free_port)
  rgw_port=$(free_port)
  fsid=$(cat /proc/sys/kernel/random/uuid)
  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  conf=$dir/ceph.conf
  cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$mon_port]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv6 = false
ms bind msgr1 = false
ms bind msgr2 = true
auth cluster required = none
auth service required = none
auth client required = none
ms cluster mode = crc
ms service mode = crc
ms client mode = crc
ms mon cluster mode = crc
ms mon service mode = crc
ms mon client mode = crc
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
pid file = $dir/run/\$name.pid
log to stderr = false
err to stderr = false
crash dir = $dir/run
keyring = $dir/keyring
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon max pg per osd = 1000
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
[mon]
mon data = $dir/mon/\$cluster-\$id
mon cluster log file = $dir/log/cluster.log
[osd]
osd data = $dir/osd/\$cluster-\$id
osd objectstore = memstore
memstore device bytes = 2147483648
osd max object name len = 256
osd max object namespace len = 64
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$rgw_port
rgw data = $dir/rgw
rgw enable usage log = false
debug rgw = 1
EOF
  : >"$dir/pids"
  trap 'stop_daemons' ERR
  ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap" >/dev/null
  ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring" >/dev/null
  launch mon.a ceph-mon -c "$conf" -f -i a
  wait_for 60 ceph -c "$conf" --connect-timeout 5 mon stat || die "ceph-mon did not answer (see $dir/log/mon.a.log)"

  local id
  id=$(ceph -c "$conf" osd new "$osd_uuid")
  mkdir -p "$dir/osd/ceph-$id"
  ceph-osd -c "$conf" -i "$id" --mkfs --osd-uuid "$osd_uuid" >/dev/null 2>&1 || die "ceph-osd --mkfs failed (see $dir/log/osd.$id.log)"
  launch "osd.$id" ceph-osd -c "$conf" -f -i "$id"
  wait_for 60 osd_up || die "ceph-osd did not come up (see $dir/log/osd.$id.log)"

  launch client.rgw radosgw -c "$conf" -f -n client.rgw
  wait_for 120 answers "$rgw_port" || die "radosgw did not answer on 127.0.0.1:$rgw_port (see $dir/log/client.rgw.log)"

  local key secret
  key=SNAP$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' | head -c 16 | tr a-f A-F)
  secret=$(head -c 30 /dev/urandom | base64 | tr -d '/+=\n' | head -c 40)
  radosgw-admin -c "$conf" -n client.admin user create --uid snapthumb --display-name snapthumb \
    --access-key "$key" --secret-key "$secret" >/dev/null 2>"$dir/log/radosgw-admin.err" \
    || die "radosgw-admin user create failed: $(tail -n 3 "$dir/log/radosgw-admin.err")"
  trap - ERR
  printf '{"endpoint": "http://127.0.0.1:%s", "port": %s, "access_key_id": "%s", "secret_access_key": "%s", "region": "us-east-1", "dir": "%s"}\n' \
    "$rgw_port" "$rgw_port" "$key" "$secret" "$dir" | tee "$dir/info.json"
}

# Whether an HTTP server answers on 127.0.0.1:$1.
answers() {
  python3 -c 'import sys, urllib.request, urllib.error
try: urllib.request.urlopen("http://127.0.0.1:%s/" % sys.argv[1], timeout=2)
except urllib.error.HTTPError: pass' "$1"
}

osd_up() {
  ceph -c "$conf" --connect-timeout 5 osd dump 2>/dev/null | grep -q '^osd\.[0-9]* up'
}

# SIGTERM to every recorded PID, then SIGKILL to what is still there after 10 s. `serve` keeps
# the list in memory once the cluster is up (`started`): its directory may be gone by the time
# it stops (test.sh removes its temporary directory as the test process ends, which is also
# when `serve` hears its input close), and a ceph-osd and a radosgw once outlived a run so.
stop_daemons() {
  local list name pid left
  if [ -n "${started:-}" ]; then list=$started
  elif [ -f "$dir/pids" ]; then list=$(cat "$dir/pids")
  else return 0
  fi
  while read -r name pid; do kill -TERM "$pid" 2>/dev/null || true; done <<<"$list"
  for _ in $(seq 100); do
    left=0
    while read -r name pid; do kill -0 "$pid" 2>/dev/null && left=1; done <<<"$list"
    [ $left -eq 0 ] && break
    sleep 0.1
  done
  while read -r name pid; do kill -KILL "$pid" 2>/dev/null || true; done <<<"$list"
  # Reap them (they are our children when stopped from `serve`).
  wait 2>/dev/null || true
  rm -f "$dir/pids"
}

environment() {
  local info=$1/info.json
  [ -f "$info" ] || die "no cluster in $1"
  python3 - "$info" <<'EOF'
import json, sys
info = json.load(open(sys.argv[1]))
print(f"export AWS_ENDPOINT_URL_S3={info['endpoint']}")
print(f"export AWS_ACCESS_KEY_ID={info['access_key_id']}")
print(f"export AWS_SECRET_ACCESS_KEY={info['secret_access_key']}")
print(f"export AWS_REGION={info['region']}")
EOF
}

case "${1:-}" in
  install) install_packages ;;
  start)
    [ $# -eq 2 ] || die "usage: rgw.sh start DIR"
    start "$2"
    # The daemons outlive this shell: `rgw.sh stop DIR` stops them.
    disown -a
    ;;
  stop)
    [ $# -eq 2 ] || die "usage: rgw.sh stop DIR"
    dir=$2
    stop_daemons
    ;;
  env)
    [ $# -eq 2 ] || die "usage: rgw.sh env DIR"
    environment "$2"
    ;;
  serve)
    owned=0
    if [ $# -ge 2 ]; then dir=$2; else dir=$(mktemp -d "${TMPDIR:-/tmp}/snapthumb-rgw.XXXXXX"); owned=1; fi
    trap 'stop_daemons; [ $owned -eq 1 ] && rm -rf "$dir"' EXIT
    trap 'exit 143' TERM INT HUP
    serving=1
    start "$dir"
    started=$(cat "$dir/pids")
    cat >/dev/null || true
    ;;
  *)
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
