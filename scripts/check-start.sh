#!/usr/bin/env bash
# CI check of the README's first command: `npm start` in this checkout brings up the embedded
# default (SQLite under ./data, static worker 0), serves IDs, and stops cleanly on SIGTERM.
# The port and data directory are the check's own so CI never depends on 8080 being unused or on
# what a developer keeps in ./data; the command is as written.
set -euo pipefail
cd "$(dirname "$0")/.."

port=$(node -e "const s=require('node:net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
data=$(mktemp -d)
log="$data/start.log"
# npm runs scripts in the package's directory; the store and state file go to a directory of the
# check's own, so it neither uses nor leaves the checkout's ./data.
# In a process group of its own, so a failed check can stop the server npm started, too.
IDMINT_PORT="$port" IDMINT_SEGMENT_STORE="sqlite:$data/idmint.db" IDMINT_WORKER_STATE_DIR="$data" setsid npm start >"$log" 2>&1 &
pid=$!
fail() { echo "check-start: $*" >&2; cat "$log" >&2; kill -KILL -- "-$pid" 2>/dev/null || true; rm -rf "$data"; exit 1; }

for _ in $(seq 1 150); do
  curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || fail "npm start exited before it was ready"
  sleep 0.2
done
curl -fs "http://127.0.0.1:$port/readyz" >/dev/null || fail "not ready after 30 s"
id=$(curl -fs "http://127.0.0.1:$port/api/snowflake/get/ci")
[[ "$id" =~ ^[1-9][0-9]{15,18}$ ]] || fail "snowflake answer '$id' is not an ID"
curl -fs -X POST "http://127.0.0.1:$port/v1/tags" -H 'content-type: application/json' -d '{"tag":"ci","step":10}' >/dev/null || fail "creating a tag failed"
first=$(curl -fs "http://127.0.0.1:$port/api/segment/get/ci")
[ "$first" = 1 ] || fail "first segment ID is '$first', expected 1"
grep -q "dist/cli/main.js serve" "$log" || fail "npm start did not run the built dist/"

# SIGTERM to npm alone, as a process manager sends it: npm must pass it on to the server.
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
[ "$status" -eq 0 ] || fail "npm start exited with $status after SIGTERM"
if pgrep -g "$pid" >/dev/null; then ps -o pid,ppid,pgid,stat,etime,args -g "$pid" >&2 || true; fail "a process of npm start outlived it"; fi
rm -rf "$data"
echo "check-start: npm start served IDs on port $port and stopped cleanly on SIGTERM"
