#!/usr/bin/env bash
# BuildGrid 0.9.1 for the team: a REAPI cache server (CAS + ActionCache) on localhost.
#
#   tools/buildgrid/buildgrid.sh install        # pinned, into ~/.cache/lowerkit/buildgrid (shared by clones)
#   tools/buildgrid/buildgrid.sh start [PORT]   # default 50051; data in tools/buildgrid/.state/
#   tools/buildgrid/buildgrid.sh stop | status | url
#   tools/buildgrid/buildgrid.sh bgd            # the path of the installed bgd (tests read LOWERKIT_BGD)
#
# Then: lowerkit lower ... --cache-remote grpc://127.0.0.1:PORT, and Pants with
# --remote-cache-read --remote-cache-write --remote-store-address=grpc://127.0.0.1:PORT
# --remote-instance-name="" (or PANTS_CONFIG_FILES=pants.buildgrid.toml).
# BuildGrid 0.9.1 needs Python >= 3.13 (pyenv's 3.13, or LOWERKIT_BUILDGRID_PYTHON).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Outside the checkout: the tests get bgd's path in LOWERKIT_BGD, which is part of their Pants
# process keys, so it must be the same for every clone (docs/ci.md).
env_dir="${LOWERKIT_BUILDGRID_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lowerkit/buildgrid}"
state="${LOWERKIT_BUILDGRID_STATE:-$here/.state}"
port_default=50051

find_python313() {
  local candidate
  for candidate in "${LOWERKIT_BUILDGRID_PYTHON:-}" \
      "$(command -v pyenv >/dev/null 2>&1 && echo "$(pyenv root)/versions/3.13.0/bin/python3.13")" \
      "$HOME/.pyenv/versions/3.13.0/bin/python3.13" python3.13; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1; then
      command -v "$candidate"
      return 0
    fi
  done
  echo "buildgrid: needs Python 3.13 (pyenv install 3.13.0, or set LOWERKIT_BUILDGRID_PYTHON)" >&2
  return 1
}

install() {
  if [ -x "$env_dir/bin/bgd" ] && cmp -s "$here/requirements.lock" "$env_dir/.requirements.lock"; then
    return 0
  fi
  local python tmp
  python="$(find_python313)"
  tmp="$env_dir.tmp.$$"
  rm -rf "$tmp"
  echo "buildgrid: installing BuildGrid 0.9.1 into $env_dir" >&2
  mkdir -p "$(dirname "$env_dir")"
  "$python" -m venv "$tmp"
  # Every distribution pinned (requirements.lock); the machine-wide pip constraint stays out.
  XDG_CONFIG_DIRS=/nonexistent PIP_CONSTRAINT= "$tmp/bin/pip" install --quiet --disable-pip-version-check \
      --no-deps -r "$here/requirements.lock"
  "$tmp/bin/pip" check >&2
  cp "$here/requirements.lock" "$tmp/.requirements.lock"
  rm -rf "$env_dir"
  mv "$tmp" "$env_dir"
  # mv breaks the venv's script shebangs: rewrite bgd's to the moved interpreter.
  sed -i "1s|.*|#!$env_dir/bin/python|" "$env_dir/bin/bgd"
}

config() {
  local port="$1"
  mkdir -p "$state/cas"
  # Pants asks up to 128 RPCs at once (remote_cache_rpc_concurrency): serve them, do not refuse.
  cat > "$state/config.yml" <<YAML
thread-pool-size: 64
maximum-concurrent-rpcs: 2048
server:
  - !channel
    address: "127.0.0.1:$port"
    insecure-mode: true
instances:
  - name: ""
    storages:
      - !disk-storage &cas
        path: "$state/cas"
    caches:
      - !lru-action-cache &ac
        storage: *cas
        max-cached-refs: 100000
        allow-updates: true
    services:
      - !cas
        storage: *cas
      - !bytestream
        storage: *cas
      - !action-cache
        cache: *ac
YAML
}

wait_for_port() {
  local port="$1" pid="$2" i
  for i in $(seq 1 150); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "buildgrid: the server exited; see $state/bgd.log" >&2
      tail -5 "$state/bgd.log" >&2 || true
      return 1
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      return 0
    fi
    sleep 0.2
  done
  echo "buildgrid: no answer on 127.0.0.1:$port after 30 s; see $state/bgd.log" >&2
  return 1
}

start() {
  local port="${1:-$port_default}"
  install
  if [ -f "$state/bgd.pid" ] && kill -0 "$(cat "$state/bgd.pid")" 2>/dev/null; then
    echo "buildgrid: already running (pid $(cat "$state/bgd.pid"), $(cat "$state/url"))" >&2
    return 0
  fi
  config "$port"
  # bgd runs on its own Python 3.13: the caller's PYTHONPATH / PYTHONHOME must not leak in.
  nohup env -u PYTHONPATH -u PYTHONHOME "$env_dir/bin/bgd" server start "$state/config.yml" >"$state/bgd.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" > "$state/bgd.pid"
  echo "grpc://127.0.0.1:$port" > "$state/url"
  wait_for_port "$port" "$pid"
  echo "buildgrid: serving grpc://127.0.0.1:$port (pid $pid, CAS in $state/cas)" >&2
}

stop() {
  if [ -f "$state/bgd.pid" ]; then
    local pid
    pid="$(cat "$state/bgd.pid")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$state/bgd.pid"
    echo "buildgrid: stopped (pid $pid)" >&2
  fi
}

case "${1:-}" in
  install) install ;;
  start) start "${2:-}" ;;
  stop) stop ;;
  status)
    if [ -f "$state/bgd.pid" ] && kill -0 "$(cat "$state/bgd.pid")" 2>/dev/null; then
      echo "running: $(cat "$state/url") (pid $(cat "$state/bgd.pid"))"
    else
      echo "not running"; exit 1
    fi ;;
  url) cat "$state/url" ;;
  bgd) echo "$env_dir/bin/bgd" ;;
  *) echo "usage: $0 install | start [PORT] | stop | status | url | bgd" >&2; exit 2 ;;
esac
