#!/usr/bin/env bash
# Brings up the real servers the cluster profile runs against (docs/operations.md, "Cluster profile"), on loopback:
#
#   PostgreSQL  127.0.0.1:5432   the machine's service, started if down (scripts/services-up.sh)
#   Redis       127.0.0.1:6379   likewise
#   Kafka       127.0.0.1:9092   Apache Kafka 3.9 from Maven Central, one KRaft node
#                                (broker + controller, controller on 127.0.0.1:9093)
#   ClickHouse  127.0.0.1:8123   Debian's clickhouse-server (18.16), HTTP interface
#
# Idempotent: whatever already answers is left alone, so a second run only checks. Kafka's jars,
# data and logs and ClickHouse's data and logs live in the cache folder INFRA_DIR (default
# <repo>/.infra, git-ignored). scripts/infra-down.sh stops Kafka and ClickHouse again.
#
# Environment (all optional):
#   INFRA_DIR                 cache folder                          (<repo>/.infra)
#   KAFKA_PORT                broker listener                       (9092)
#   KAFKA_CONTROLLER_PORT     KRaft controller listener             (9093)
#   CLICKHOUSE_HTTP_PORT      ClickHouse HTTP interface             (8123)
#   CLICKHOUSE_TCP_PORT       ClickHouse native protocol            (9000)
#   INFRA_TIMEOUT             seconds to wait for each server       (90)
#
# Prints the env lines for the cluster profile at the end; exits non-zero if any server could
# not be brought up.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
INFRA_DIR="${INFRA_DIR:-$ROOT/.infra}"
KAFKA_PORT="${KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-9093}"
CLICKHOUSE_HTTP_PORT="${CLICKHOUSE_HTTP_PORT:-8123}"
CLICKHOUSE_TCP_PORT="${CLICKHOUSE_TCP_PORT:-9000}"
INFRA_TIMEOUT="${INFRA_TIMEOUT:-90}"

# Kafka layout under the cache folder (scripts/infra-down.sh uses the same paths).
KAFKA_DIR="$INFRA_DIR/kafka"
KAFKA_LIBS="$KAFKA_DIR/libs"          # jars fetched by mvn from infra/kafka/pom.xml
KAFKA_DATA="$KAFKA_DIR/data"          # log.dirs (KRaft metadata log and topic partitions)
KAFKA_LOGS="$KAFKA_DIR/logs"          # server.log (reload4j, infra/kafka/log4j.properties)
KAFKA_OUT="$KAFKA_DIR/kafka.out"      # the JVM's stdout/stderr
KAFKA_PID="$KAFKA_DIR/kafka.pid"
KAFKA_CONFIG="$KAFKA_DIR/server.properties"   # rendered from infra/kafka/server.properties
# Fixed cluster id (kafka.tools.StorageTool random-uuid, once), so a data dir formatted by any
# run of this script belongs to the cluster every later run starts.
KAFKA_CLUSTER_ID="YROASVUISKaMEUNuzUnusQ"

# ClickHouse layout under the cache folder (scripts/infra-down.sh uses the same paths).
CH_DIR="$INFRA_DIR/clickhouse"
CH_CONFIG="$CH_DIR/config.xml"        # rendered from infra/clickhouse/config.xml
CH_PID="$CH_DIR/clickhouse-server.pid"

log() { printf 'infra-up: %s\n' "$*"; }
FAILED=()

# ---------------------------------------------------------------------------------------------
# Readiness checks: each sends a real request and succeeds only on a real answer.
# ---------------------------------------------------------------------------------------------

# Kafka: a metadata request (kafkajs admin listTopics) when the repo's node_modules has kafkajs,
# else an ApiVersions request with Kafka's own kafka.admin.BrokerApiVersionsCommand (a JVM
# start, about 1-2 s slower).
kafka_ready() {
  if (cd "$ROOT" && node -e 'require.resolve("kafkajs")') >/dev/null 2>&1; then
    (cd "$ROOT" && timeout 10 node -e '
      const { Kafka, logLevel } = require("kafkajs");
      const admin = new Kafka({
        clientId: "infra-up", brokers: [process.argv[1]], logLevel: logLevel.NOTHING,
        connectionTimeout: 1000, requestTimeout: 3000, retry: { retries: 0 },
      }).admin();
      admin.connect().then(() => admin.listTopics()).then(() => admin.disconnect())
        .then(() => process.exit(0), () => process.exit(1));
    ' "127.0.0.1:$KAFKA_PORT") >/dev/null 2>&1
  elif [[ -f "$KAFKA_LIBS/.complete" ]]; then
    timeout 20 java -Dlog4j.configuration="file:$ROOT/infra/kafka/tools-log4j.properties" \
      -cp "$KAFKA_LIBS/*" kafka.admin.BrokerApiVersionsCommand \
      --bootstrap-server "127.0.0.1:$KAFKA_PORT" 2>/dev/null | grep -F '(id: 1 rack' >/dev/null
  else
    return 1
  fi
}

# ClickHouse: SELECT 1 over the HTTP interface answers 1.
clickhouse_ready() {
  local answer
  answer="$(curl -s -m 3 "http://127.0.0.1:$CLICKHOUSE_HTTP_PORT/?query=SELECT%201" 2>/dev/null)"
  [[ "$answer" == "1" ]]
}

# wait_for NAME CHECK PID_FILE PATTERN LOG LOG_OFFSET: polls CHECK for up to INFRA_TIMEOUT
# seconds; gives up early if the process in PID_FILE (see pid_alive) has died. On failure shows
# what LOG says after byte LOG_OFFSET (where it ended before this start).
wait_for() {
  local name="$1" check="$2" pid_file="$3" pattern="$4" logfile="$5" offset="$6"
  local deadline=$((SECONDS + INFRA_TIMEOUT))
  while ((SECONDS < deadline)); do
    if "$check"; then log "$name is up"; return 0; fi
    if ! pid_alive "$pid_file" "$pattern"; then
      # The process may have exited between the check and here after all: one last look.
      if "$check"; then log "$name is up"; return 0; fi
      log "$name exited during start-up"
      break
    fi
    sleep 1
  done
  ((SECONDS < deadline)) || log "$name did not answer within ${INFRA_TIMEOUT}s"
  show_errors "$logfile" "$offset"
  return 1
}

# show_errors LOG OFFSET: the error lines LOG got after byte OFFSET (each with the line after it,
# which holds a Java exception's message), else its last 20 lines.
show_errors() {
  local logfile="$1" offset="$2" errors
  [[ -f "$logfile" ]] || return 0
  errors="$(tail -c +"$((offset + 1))" "$logfile" |
    grep -A1 -E ' (ERROR|FATAL) |<(Error|Fatal)>' |
    grep -vE '^(--|[[:space:]]+at )' | tail -n 20)" || true
  if [[ -n "$errors" ]]; then
    log "errors in $logfile:"
    printf '%s\n' "$errors" | cut -c1-300 | sed 's/^/    /'
  else
    log "last lines of $logfile:"
    tail -c +"$((offset + 1))" "$logfile" | tail -n 20 | cut -c1-300 | sed 's/^/    /'
  fi
}

# log_size FILE: its size in bytes, 0 if it does not exist.
log_size() { stat -c %s "$1" 2>/dev/null || echo 0; }

# pid_alive PID_FILE PATTERN: the pid in the file is a running process (not a zombie) whose
# command line contains PATTERN (a pid reused by something else after a crash does not count).
pid_alive() {
  local pid
  [[ -s "$1" ]] || return 1
  pid="$(tr -dc '0-9' <"$1")"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null &&
    ! grep -qs '^State:[[:space:]]*Z' "/proc/$pid/status" &&
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -F -- "$2" >/dev/null
}
# (No `grep -q` after a pipe in this script: with pipefail, the writer killed by SIGPIPE when
# grep -q stops reading early would turn a match into a failure.)

# render TEMPLATE OUT KEY=VALUE...: copies TEMPLATE to OUT replacing each @KEY@ with VALUE.
render() {
  local template="$1" out="$2" kv args=()
  shift 2
  for kv in "$@"; do args+=(-e "s#@${kv%%=*}@#${kv#*=}#g"); done
  sed "${args[@]}" "$template" >"$out.tmp" && mv "$out.tmp" "$out"
}

# ---------------------------------------------------------------------------------------------
# 1. PostgreSQL and Redis: the machine's services; services-up.sh starts them if down and waits
#    for pg_isready / redis-cli ping.
# ---------------------------------------------------------------------------------------------
if ! bash "$ROOT/scripts/services-up.sh"; then
  FAILED+=("PostgreSQL/Redis")
fi

# ---------------------------------------------------------------------------------------------
# 2-3. Kafka
# ---------------------------------------------------------------------------------------------

# (The functions below run as `f || handle`, where set -e does not apply inside them, so each
# step that can fail says `|| return 1`.)

# Fetches the jars listed in infra/kafka/pom.xml into KAFKA_LIBS unless that pom's jars are
# already there (.complete holds the pom's hash, so editing the pom refetches). Downloads into a
# temporary folder first, so an interrupted fetch never looks complete.
kafka_fetch_libs() {
  local pom="$ROOT/infra/kafka/pom.xml" want tmp
  want="$(sha256sum "$pom" | cut -d' ' -f1)"
  if [[ -f "$KAFKA_LIBS/.complete" && "$(cat "$KAFKA_LIBS/.complete")" == "$want" ]]; then
    return 0
  fi
  log "fetching Kafka jars from Maven Central (mvn, infra/kafka/pom.xml)"
  tmp="$KAFKA_DIR/libs.tmp"
  rm -rf "$tmp"
  # mvn's output (errors only with -q, but also terminal colour codes) goes to mvn.log.
  if ! mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$tmp" >"$KAFKA_DIR/mvn.log" 2>&1; then
    tail -n 20 "$KAFKA_DIR/mvn.log" | sed 's/^/    /'
    return 1
  fi
  [[ -f "$tmp/kafka_2.13-$(kafka_version)".jar ]] || return 1
  echo "$want" >"$tmp/.complete" || return 1
  rm -rf "$KAFKA_LIBS" && mv "$tmp" "$KAFKA_LIBS"
}

# The kafka_2.13 version pinned in infra/kafka/pom.xml.
kafka_version() {
  grep -A1 '<artifactId>kafka_2.13</artifactId>' "$ROOT/infra/kafka/pom.xml" |
    sed -n 's:.*<version>\(.*\)</version>.*:\1:p'
}

# Formats the data dir for KAFKA_CLUSTER_ID once (meta.properties marks a formatted dir).
kafka_format() {
  [[ -f "$KAFKA_DATA/meta.properties" ]] && return 0
  log "formatting Kafka storage in $KAFKA_DATA (cluster id $KAFKA_CLUSTER_ID)"
  java -Dlog4j.configuration="file:$ROOT/infra/kafka/tools-log4j.properties" \
    -cp "$KAFKA_LIBS/*" kafka.tools.StorageTool format \
    --config "$KAFKA_CONFIG" --cluster-id "$KAFKA_CLUSTER_ID" --ignore-formatted
}

# Starts the broker in the background (nohup), unless our broker process is already running
# (then it is still starting, and we only wait for it). Returns non-zero if it could not start.
kafka_start() {
  mkdir -p "$KAFKA_DIR" "$KAFKA_LOGS"
  if pid_alive "$KAFKA_PID" kafka.Kafka; then
    log "Kafka broker (pid $(cat "$KAFKA_PID")) is running but not answering yet; waiting"
    return 0
  fi
  kafka_fetch_libs || { log "could not fetch the Kafka jars with mvn"; return 1; }
  render "$ROOT/infra/kafka/server.properties" "$KAFKA_CONFIG" \
    KAFKA_PORT="$KAFKA_PORT" CONTROLLER_PORT="$KAFKA_CONTROLLER_PORT" DATA_DIR="$KAFKA_DATA" ||
    return 1
  kafka_format || { log "kafka.tools.StorageTool format failed"; return 1; }
  KAFKA_LOG_OFFSET="$(log_size "$KAFKA_LOGS/server.log")"
  log "starting Kafka $(kafka_version) broker on 127.0.0.1:$KAFKA_PORT" \
    "(log: $KAFKA_LOGS/server.log)"
  # JVM flags as in Kafka's kafka-server-start.sh / kafka-run-class.sh, with a small heap.
  nohup java -Xmx512m -Xms256m \
    -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
    -Dkafka.logs.dir="$KAFKA_LOGS" \
    -Dlog4j.configuration="file:$ROOT/infra/kafka/log4j.properties" \
    -cp "$KAFKA_LIBS/*" kafka.Kafka "$KAFKA_CONFIG" \
    >"$KAFKA_OUT" 2>&1 </dev/null &
  echo $! >"$KAFKA_PID"
}

KAFKA_STARTED=0 KAFKA_LOG_OFFSET=0
if kafka_ready; then
  log "Kafka is up (127.0.0.1:$KAFKA_PORT)"
  # A broker started from another checkout's cache: the jars are still wanted here, by the tests
  # that run a private broker of their own (test/helpers/private-infra.ts). From ~/.m2: seconds.
  { mkdir -p "$KAFKA_DIR" && kafka_fetch_libs; } || { log "could not fetch the Kafka jars with mvn"; FAILED+=("Kafka jars"); }
elif kafka_start; then
  KAFKA_STARTED=1   # waited for below, after ClickHouse is started, so both boot in parallel
else
  FAILED+=("Kafka")
fi

# ---------------------------------------------------------------------------------------------
# 4. ClickHouse
# ---------------------------------------------------------------------------------------------

# Installs Debian's clickhouse-server and clickhouse-client if missing (apt-get update only if
# the install fails without it). The package's postinst does not start it (no systemd here).
clickhouse_install() {
  command -v clickhouse-server >/dev/null 2>&1 && return 0
  log "installing clickhouse-server and clickhouse-client (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q clickhouse-server clickhouse-client >"$CH_DIR/apt.log" 2>&1 || {
    log "apt-get install failed; running apt-get update and retrying"
    apt-get update -q >>"$CH_DIR/apt.log" 2>&1
    apt-get install -y -q clickhouse-server clickhouse-client >>"$CH_DIR/apt.log" 2>&1
  }
}

# Starts clickhouse-server as a daemon with our config (infra/clickhouse/), data and logs under
# CH_DIR, unless our server is already running. Runs as the invoking user (root here), which
# owns CH_DIR; the stock /etc/clickhouse-server config and /var/lib/clickhouse are not used.
clickhouse_start() {
  mkdir -p "$CH_DIR/log" "$CH_DIR/data"
  if pid_alive "$CH_PID" clickhouse-server; then
    log "clickhouse-server (pid $(cat "$CH_PID")) is running but not answering yet; waiting"
    return 0
  fi
  clickhouse_install || {
    log "could not install clickhouse-server (see $CH_DIR/apt.log)"
    return 1
  }
  render "$ROOT/infra/clickhouse/config.xml" "$CH_CONFIG" \
    CH_DIR="$CH_DIR" HTTP_PORT="$CLICKHOUSE_HTTP_PORT" TCP_PORT="$CLICKHOUSE_TCP_PORT" \
    USERS_XML="$ROOT/infra/clickhouse/users.xml" || return 1
  CH_LOG_OFFSET="$(log_size "$CH_DIR/log/clickhouse-server.err.log")"
  rm -f "$CH_PID"   # stale: the server removes it itself on a clean exit
  log "starting clickhouse-server on 127.0.0.1:$CLICKHOUSE_HTTP_PORT (log: $CH_DIR/log/)"
  # --daemon forks and returns; the daemon writes CH_PID a moment later, and its stdout/stderr
  # go to $CH_DIR/log/std{out,err}.log.
  (cd "$CH_DIR" && clickhouse-server --config-file="$CH_CONFIG" --pid-file="$CH_PID" --daemon) ||
    return 1
  local tries=50
  while ((tries-- > 0)); do [[ -s "$CH_PID" ]] && return 0; sleep 0.2; done
  log "clickhouse-server wrote no pid file within 10 s"
  return 1
}

CLICKHOUSE_STARTED=0 CH_LOG_OFFSET=0
if clickhouse_ready; then
  log "ClickHouse is up (http://127.0.0.1:$CLICKHOUSE_HTTP_PORT)"
elif clickhouse_start; then
  CLICKHOUSE_STARTED=1
else
  FAILED+=("ClickHouse")
fi

# ---------------------------------------------------------------------------------------------
# 5. Wait for what was started to answer real requests.
# ---------------------------------------------------------------------------------------------
if ((KAFKA_STARTED)); then
  wait_for "Kafka (127.0.0.1:$KAFKA_PORT)" kafka_ready "$KAFKA_PID" kafka.Kafka \
    "$KAFKA_LOGS/server.log" "$KAFKA_LOG_OFFSET" || FAILED+=("Kafka")
fi
if ((CLICKHOUSE_STARTED)); then
  wait_for "ClickHouse (http://127.0.0.1:$CLICKHOUSE_HTTP_PORT)" clickhouse_ready \
    "$CH_PID" clickhouse-server \
    "$CH_DIR/log/clickhouse-server.err.log" "$CH_LOG_OFFSET" || FAILED+=("ClickHouse")
fi

# ---------------------------------------------------------------------------------------------
# 6. Result.
# ---------------------------------------------------------------------------------------------
if ((${#FAILED[@]})); then
  failed="$(IFS=,; echo "${FAILED[*]}")"
  log "FAILED: ${failed//,/, } could not be brought up"
  exit 1
fi

cat <<EOF
infra-up: all servers are up. Environment for the cluster profile:
KAFKA_BROKERS=127.0.0.1:$KAFKA_PORT
CLICKHOUSE_URL=http://127.0.0.1:$CLICKHOUSE_HTTP_PORT
DATABASE_URL=postgres://postgres@127.0.0.1:5432/test
REDIS_URL=redis://127.0.0.1:6379
EOF
