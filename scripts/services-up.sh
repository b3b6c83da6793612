#!/usr/bin/env bash
# Starts the local services the tests use, if they are down. The embedded profile needs none;
# the store conformance suite also runs against a real PostgreSQL (DATABASE_URL or
# postgres://postgres@127.0.0.1:5432/test).
set -u

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }

if command -v pg_isready >/dev/null 2>&1; then
  if ! pg_up; then
    echo "starting PostgreSQL"
    if command -v pg_ctlcluster >/dev/null 2>&1; then
      pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start || true
    fi
    for _ in $(seq 1 30); do pg_up && break; sleep 1; done
  fi
  if pg_up; then
    echo "PostgreSQL is up"
  else
    echo "PostgreSQL could not be started"
    exit 1
  fi
else
  echo "PostgreSQL client tools are not installed"
  exit 1
fi

# Redis: the cache / rate-limit conformance suite and the REDIS_URL end-to-end test use it.
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
if command -v redis-server >/dev/null 2>&1; then
  if ! redis_up; then
    echo "starting Redis"
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
    for _ in $(seq 1 20); do redis_up && break; sleep 0.5; done
  fi
  if redis_up; then echo "Redis is up"; else echo "Redis could not be started"; exit 1; fi
else
  echo "redis-server is not installed"
  exit 1
fi
