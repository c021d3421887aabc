#!/usr/bin/env bash
# Makes the real services idmint's tests use available on loopback, on their standard ports:
#
#   postgres   127.0.0.1:5432   (trust auth; databases test and postgres)
#   mariadb    127.0.0.1:3306   (root, empty password; database test)
#   redis      127.0.0.1:6379
#   etcd       127.0.0.1:2379
#   zookeeper  127.0.0.1:2181
#
# Usage: scripts/services.sh up|down|status [service...]
#
# `up` is idempotent: a service that answers is left alone; one that is missing is installed from
# Debian's packages, then started, bound to 127.0.0.1 only. `up` with no service named also
# installs libfaketime (Debian's faketime), which a clock-rollback test needs, Debian's prometheus
# package (promtool checks /metrics and the alert rules; a test starts its own prometheus server
# to scrape a server it runs), chromium (Debian's chromium), which the dashboard's browser tests
# drive, spin (Debian's spin), which checks the lease protocol's model, and the PostgreSQL, MariaDB
# and Redis server binaries the failover tests start replicas with; `status` with no service named reports them, promtool, prometheus and chromium. `up chromium`
# or `status chromium` names the browser alone. Prints one line per service and exits non-zero if
# any service is not up at the end.
# Needs root (or sudo) only to install or start.
set -uo pipefail

STATE_DIR=${IDMINT_SERVICES_DIR:-/var/lib/idmint-services}
LOG_DIR=${IDMINT_SERVICES_LOG_DIR:-/var/log/idmint-services}
ALL=(postgres mariadb redis etcd zookeeper)
WAIT_SECONDS=60

SUDO=()
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=(sudo -n); fi

# ---- helpers -----------------------------------------------------------------------------------

port_open() { timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if ! "${SUDO[@]}" apt-get install -y -q --no-install-recommends "$@" >"$LOG_DIR/apt.log" 2>&1; then
    # The package lists may be missing or stale on a fresh machine.
    "${SUDO[@]}" apt-get update -q >>"$LOG_DIR/apt.log" 2>&1
    "${SUDO[@]}" apt-get install -y -q --no-install-recommends "$@" >>"$LOG_DIR/apt.log" 2>&1
  fi
}

wait_until() { # wait_until <check-function>
  local i
  for ((i = 0; i < WAIT_SECONDS * 5; i++)); do
    "$1" && return 0
    sleep 0.2
  done
  return 1
}

# ---- postgres ----------------------------------------------------------------------------------

postgres_check() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
postgres_install() { command -v pg_ctlcluster >/dev/null 2>&1 || apt_install postgresql postgresql-client; }
postgres_start() {
  local version
  version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
  [ -n "$version" ] || return 1
  "${SUDO[@]}" pg_ctlcluster --skip-systemctl-redirect "$version" main start >>"$LOG_DIR/postgres.log" 2>&1 || true
}
postgres_prepare() {
  # Tests connect as postgres over TCP; make sure the test database exists.
  if ! psql -h 127.0.0.1 -U postgres -d test -Atc 'select 1' >/dev/null 2>&1; then
    "${SUDO[@]}" su postgres -c "psql -q -c 'create database test'" >>"$LOG_DIR/postgres.log" 2>&1 || true
  fi
}
postgres_stop() {
  local version
  version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
  [ -n "$version" ] && "${SUDO[@]}" pg_ctlcluster --skip-systemctl-redirect "$version" main stop >/dev/null 2>&1
}

# ---- mariadb -----------------------------------------------------------------------------------

mariadb_check() { mariadb-admin -h 127.0.0.1 -P 3306 -uroot --connect-timeout=1 ping >/dev/null 2>&1; }
mariadb_install() { [ -x /usr/sbin/mariadbd ] || apt_install mariadb-server mariadb-client; }
mariadb_start() {
  "${SUDO[@]}" mkdir -p /run/mysqld && "${SUDO[@]}" chown mysql:mysql /run/mysqld 2>/dev/null
  "${SUDO[@]}" start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --bind-address=127.0.0.1 >>"$LOG_DIR/mariadb.log" 2>&1
}
mariadb_prepare() { mariadb -h 127.0.0.1 -uroot -e 'create database if not exists test' >/dev/null 2>&1 || true; }
mariadb_stop() { mariadb-admin -h 127.0.0.1 -uroot shutdown >/dev/null 2>&1; }

# ---- redis -------------------------------------------------------------------------------------

redis_check() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = PONG ]; }
redis_install() { command -v redis-server >/dev/null 2>&1 || apt_install redis-server redis-tools; }
redis_start() {
  mkdir -p "$STATE_DIR/redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no \
    --dir "$STATE_DIR/redis" --logfile "$LOG_DIR/redis.log" >/dev/null 2>&1
}
redis_prepare() { :; }
redis_stop() { redis-cli -h 127.0.0.1 -p 6379 shutdown nosave >/dev/null 2>&1; }

# ---- etcd --------------------------------------------------------------------------------------

etcd_check() { curl -fsS --max-time 1 http://127.0.0.1:2379/health 2>/dev/null | grep -q '"health":"true"'; }
etcd_install() { command -v etcd >/dev/null 2>&1 || apt_install etcd-server; }
etcd_start() {
  mkdir -p "$STATE_DIR/etcd"
  # Single-node cluster on loopback; --data-dir under our own state dir, never the system one.
  setsid nohup etcd --name idmint --data-dir "$STATE_DIR/etcd/data" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster idmint=http://127.0.0.1:2380 >>"$LOG_DIR/etcd.log" 2>&1 </dev/null &
  echo $! >"$STATE_DIR/etcd/etcd.pid"
}
etcd_prepare() { :; }
etcd_stop() {
  [ -f "$STATE_DIR/etcd/etcd.pid" ] && kill "$(cat "$STATE_DIR/etcd/etcd.pid")" 2>/dev/null
  pkill -f "etcd --name idmint" 2>/dev/null
  rm -f "$STATE_DIR/etcd/etcd.pid"
}

# ---- zookeeper ---------------------------------------------------------------------------------

zookeeper_check() {
  port_open 2181 || return 1
  [ "$(timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/2181; echo ruok >&3; cat <&3' 2>/dev/null)" = imok ]
}
zookeeper_install() { [ -x /usr/share/zookeeper/bin/zkServer.sh ] || apt_install zookeeper; }
zookeeper_start() {
  mkdir -p "$STATE_DIR/zookeeper/data"
  # admin.enableServer=false: ZooKeeper's admin server would take port 8080, idmint's default.
  cat >"$STATE_DIR/zookeeper/zoo.cfg" <<EOF
tickTime=2000
dataDir=$STATE_DIR/zookeeper/data
clientPort=2181
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat
maxSessionTimeout=60000
EOF
  (cd "$STATE_DIR/zookeeper" && ZOO_LOG_DIR="$LOG_DIR" ZOOPIDFILE="$STATE_DIR/zookeeper/zk.pid" \
    /usr/share/zookeeper/bin/zkServer.sh start "$STATE_DIR/zookeeper/zoo.cfg" >>"$LOG_DIR/zookeeper.log" 2>&1)
}
zookeeper_prepare() { :; }
zookeeper_stop() {
  ZOO_LOG_DIR="$LOG_DIR" ZOOPIDFILE="$STATE_DIR/zookeeper/zk.pid" \
    /usr/share/zookeeper/bin/zkServer.sh stop "$STATE_DIR/zookeeper/zoo.cfg" >/dev/null 2>&1
}

# ---- test tools --------------------------------------------------------------------------------

# libfaketime (Debian's faketime package): a worker-registry test restarts a real process with its
# clock set back. Not a service, but `up` (for all services) makes sure it is installed too.
faketime_up() {
  local status=installed
  if dpkg-query -W -f='${Status}' faketime 2>/dev/null | grep -q 'install ok installed'; then
    status="already installed"
  elif ! apt_install faketime; then
    printf '%-10s %-5s %-15s %s\n' faketime down - "install failed (see $LOG_DIR/apt.log)"
    return 1
  fi
  printf '%-10s %-5s %-15s %s\n' faketime up - "$status"
}

# Replication binaries: the failover tests (test/segment-failover.test.ts) start a primary and a
# replica of their own, in temporary directories on free ports, never touching the services above:
# PostgreSQL's server binaries (initdb, pg_ctl, pg_basebackup; Debian's postgresql package, run as
# its postgres user), MariaDB's (mariadbd, mariadb-install-db; mariadb-server) and redis-server.
# Installed with the services when missing; `up` and `status` with no service named report them.
replication_missing() {
  local missing=()
  ls /usr/lib/postgresql/*/bin/pg_basebackup >/dev/null 2>&1 && id -u postgres >/dev/null 2>&1 || missing+=(postgresql)
  { command -v mariadbd || [ -x /usr/sbin/mariadbd ]; } >/dev/null 2>&1 \
    && command -v mariadb-install-db >/dev/null 2>&1 || missing+=(mariadb-server)
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  echo "${missing[*]:-}"
}
replication_status() {
  local missing
  missing=$(replication_missing)
  if [ -z "$missing" ]; then
    printf '%-10s %-5s %-15s %s\n' replicas up - "${1:-postgresql, mariadb and redis binaries installed}"
  else
    printf '%-10s %-5s %-15s %s\n' replicas down - "${2:-missing: $missing (scripts/services.sh up)}"
    return 1
  fi
}
replication_up() {
  local missing
  missing=$(replication_missing)
  if [ -z "$missing" ]; then replication_status "already installed"; return; fi
  # shellcheck disable=SC2086
  if ! apt_install $missing; then
    replication_status - "install failed (see $LOG_DIR/apt.log)"
    return 1
  fi
  replication_status installed
}

# Debian's prometheus package: a server test runs `promtool check metrics` on /metrics, and another
# starts a prometheus server of its own (on a free loopback port, stopped by its PID) to scrape a
# server it runs. Only the binaries are wanted: if the package's install started the system's
# Prometheus server (policy-rc.d usually prevents it), that server is stopped again.
promtool_status() {
  if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
    printf '%-10s %-5s %-15s %s\n' promtool up - "$1"
  else
    printf '%-10s %-5s %-15s %s\n' promtool down - "${2:-promtool or prometheus not installed (scripts/services.sh up)}"
    return 1
  fi
}
promtool_up() {
  if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
    promtool_status "already installed"
    return
  fi
  if ! apt_install prometheus; then
    promtool_status - "install failed (see $LOG_DIR/apt.log)"
    return 1
  fi
  [ -x /etc/init.d/prometheus ] && "${SUDO[@]}" /etc/init.d/prometheus stop >/dev/null 2>&1
  promtool_status installed
}

# chromium (Debian's chromium package): the dashboard's browser tests drive it through
# playwright-core (Playwright's own browser downloads cannot reach this machine). Headless only:
# --no-install-recommends leaves out what a desktop would want.
chromium_status() {
  if command -v chromium >/dev/null 2>&1; then
    printf '%-10s %-5s %-15s %s\n' chromium up - "$1"
  else
    printf '%-10s %-5s %-15s %s\n' chromium down - "${2:-not installed (scripts/services.sh up chromium)}"
    return 1
  fi
}
chromium_up() {
  if command -v chromium >/dev/null 2>&1; then chromium_status "already installed"; return; fi
  if ! apt_install chromium; then
    chromium_status - "install failed (see $LOG_DIR/apt.log)"
    return 1
  fi
  chromium_status installed
}
chromium_version() { chromium --version 2>/dev/null | head -n 1; }

# spin (Debian's spin package): test/lease-model.test.ts checks the lease protocol's Promela model
# (models/lease.pml) exhaustively, compiling spin's verifier with the system's gcc.
spin_status() {
  if command -v spin >/dev/null 2>&1; then
    printf '%-10s %-5s %-15s %s\n' spin up - "$1"
  else
    printf '%-10s %-5s %-15s %s\n' spin down - "${2:-not installed (scripts/services.sh up)}"
    return 1
  fi
}
spin_up() {
  if command -v spin >/dev/null 2>&1; then spin_status "already installed"; return; fi
  if ! apt_install spin gcc; then
    spin_status - "install failed (see $LOG_DIR/apt.log)"
    return 1
  fi
  spin_status installed
}

# ---- commands ----------------------------------------------------------------------------------

address() {
  case $1 in
    postgres) echo 127.0.0.1:5432 ;; mariadb) echo 127.0.0.1:3306 ;; redis) echo 127.0.0.1:6379 ;;
    etcd) echo 127.0.0.1:2379 ;; zookeeper) echo 127.0.0.1:2181 ;;
  esac
}

line() { printf '%-10s %-5s %-15s %s\n' "$1" "$2" "$(address "$1")" "${3:-}"; }

up_one() {
  local s=$1
  if "${s}_check"; then
    "${s}_prepare"
    line "$s" up "already running"
    return 0
  fi
  if ! "${s}_install"; then
    line "$s" down "install failed (see $LOG_DIR/apt.log)"
    return 1
  fi
  "${s}_start"
  if wait_until "${s}_check"; then
    "${s}_prepare"
    line "$s" up started
  else
    line "$s" down "did not answer within ${WAIT_SECONDS}s (see $LOG_DIR/$s.log)"
    return 1
  fi
}

down_one() {
  local s=$1
  if ! "${s}_check"; then line "$s" down "not running"; return 0; fi
  "${s}_stop"
  local i
  for ((i = 0; i < 50; i++)); do "${s}_check" || break; sleep 0.2; done
  if "${s}_check"; then line "$s" up "still running"; return 1; fi
  line "$s" down stopped
}

status_one() {
  if "${1}_check"; then line "$1" up; else line "$1" down; return 1; fi
}

main() {
  local command=${1:-}
  shift || true
  local services=("$@")
  # The browser is a test tool, not a service: named alone, it is installed or reported alone.
  if [ "${services[*]:-}" = chromium ]; then
    case $command in
      up) mkdir -p "$LOG_DIR" 2>/dev/null || "${SUDO[@]}" mkdir -p "$LOG_DIR"; chromium_up; exit $? ;;
      status) chromium_status "$(chromium_version)"; exit $? ;;
      down) echo "chromium    is a tool, not a service: nothing to stop"; exit 0 ;;
    esac
  fi
  [ ${#services[@]} -gt 0 ] || services=("${ALL[@]}")
  for s in "${services[@]}"; do
    case " ${ALL[*]} " in *" $s "*) ;; *) echo "services.sh: unknown service '$s' (known: ${ALL[*]})" >&2; exit 2 ;; esac
  done
  case $command in
    up | down | status) ;;
    *) echo "usage: scripts/services.sh up|down|status [${ALL[*]}]" >&2; exit 2 ;;
  esac
  mkdir -p "$STATE_DIR" "$LOG_DIR" 2>/dev/null || { "${SUDO[@]}" mkdir -p "$STATE_DIR" "$LOG_DIR"; }
  local failed=0
  for s in "${services[@]}"; do "${command}_one" "$s" || failed=1; done
  if [ "$command" = up ] && [ $# -eq 0 ]; then
    faketime_up || failed=1
    replication_up || failed=1
    promtool_up || failed=1
    chromium_up || failed=1
    spin_up || failed=1
  fi
  if [ "$command" = status ] && [ $# -eq 0 ]; then
    replication_status || failed=1
    promtool_status "$(prometheus --version 2>&1 | head -n 1) (promtool and prometheus)" || failed=1
    chromium_status "$(chromium_version)" || failed=1
    spin_status "$(spin -V 2>/dev/null | head -n 1)" || failed=1
  fi
  exit $failed
}

main "$@"
