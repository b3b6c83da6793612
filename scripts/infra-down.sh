#!/usr/bin/env bash
# Stops what scripts/infra-up.sh started: the Kafka broker and the ClickHouse server, each found
# by its pid file in the cache folder (INFRA_DIR, default <repo>/.infra). Each gets SIGTERM (a
# clean shutdown) and SIGKILL if still running after a timeout. PostgreSQL and Redis are the
# machine's services and are left running. Idempotent: with nothing running it only says so.
#
#   scripts/infra-down.sh          stop Kafka and ClickHouse, keep their data
#   scripts/infra-down.sh --wipe   also delete Kafka's data dir (topics, offsets, KRaft metadata),
#                                  so the next infra-up.sh formats a fresh one
#
# Environment (optional): INFRA_DIR as for infra-up.sh; INFRA_STOP_TIMEOUT, seconds to wait for a
# clean shutdown before SIGKILL (30).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
INFRA_DIR="${INFRA_DIR:-$ROOT/.infra}"
INFRA_STOP_TIMEOUT="${INFRA_STOP_TIMEOUT:-30}"

# Same paths as infra-up.sh.
KAFKA_DIR="$INFRA_DIR/kafka"
KAFKA_DATA="$KAFKA_DIR/data"
KAFKA_PID="$KAFKA_DIR/kafka.pid"
CH_DIR="$INFRA_DIR/clickhouse"
CH_PID="$CH_DIR/clickhouse-server.pid"

WIPE=0
for arg in "$@"; do
  case "$arg" in
    --wipe) WIPE=1 ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "infra-down: unknown argument: $arg (use --wipe or --help)" >&2; exit 2 ;;
  esac
done

log() { printf 'infra-down: %s\n' "$*"; }

# stop NAME PID_FILE CMDLINE_PATTERN: stops the process in PID_FILE if it is running and its
# command line matches CMDLINE_PATTERN (so a pid reused by an unrelated process after a crash is
# never signalled). SIGTERM, wait up to INFRA_STOP_TIMEOUT seconds, then SIGKILL.
stop() {
  local name="$1" pid_file="$2" pattern="$3" pid deadline
  if [[ ! -s "$pid_file" ]]; then
    log "$name is not running (no pid file)"
    return 0
  fi
  pid="$(tr -dc '0-9' <"$pid_file")"
  if [[ -z "$pid" ]] || ! kill -0 "$pid" 2>/dev/null; then
    log "$name is not running (stale pid file removed)"
    rm -f "$pid_file"
    return 0
  fi
  # (grep without -q: with pipefail, tr killed by SIGPIPE would turn a match into a failure.)
  if ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -F -- "$pattern" >/dev/null; then
    log "$name: pid $pid is not $name (pid reused); stale pid file removed"
    rm -f "$pid_file"
    return 0
  fi

  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + INFRA_STOP_TIMEOUT))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name did not stop within ${INFRA_STOP_TIMEOUT}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name (pid $pid) survived SIGKILL; pid file kept"
      return 1
    fi
  fi
  rm -f "$pid_file"
  log "$name stopped"
}

stop "Kafka broker" "$KAFKA_PID" "kafka.Kafka"
stop "clickhouse-server" "$CH_PID" "clickhouse-server"

if ((WIPE)); then
  if [[ -d "$KAFKA_DATA" ]]; then
    rm -rf "$KAFKA_DATA"
    log "deleted Kafka data dir $KAFKA_DATA (the next infra-up.sh formats a new one)"
  else
    log "no Kafka data dir to delete"
  fi
fi

log "PostgreSQL and Redis are left running (the machine's services)"
