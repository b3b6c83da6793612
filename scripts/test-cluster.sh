#!/usr/bin/env bash
# The cluster pass (docs/operations.md, "Cluster profile"): every test file that runs the service
# in-process through startStack (test/helpers/stack.ts) runs again with TEST_PROFILE=cluster, its
# service on the real PostgreSQL, Redis, Kafka and ClickHouse of scripts/infra-up.sh (SVC_ROLE=all,
# each stack on a schema, key prefix, topic prefix and database of its own). A server that does
# not answer fails the files. The files that start their own processes or servers (cluster-*,
# process, crash-recovery, jobs-crash) and the packages' suites already pick their profile
# themselves: `npm test` runs them. Arguments go to tap (e.g. a reporter).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The dashboard's browser test drives pages whose server side the HTTP tests (dashboard-*.test.ts)
# already run here on the cluster's servers; a second browser pass would only repeat the pages.
mapfile -t files < <(grep -rl --include='*.test.ts' 'startStack(' test packages/*/test | grep -v '^test/e2e/dashboard-browser.test.ts$' | sort)
if [ "${#files[@]}" -eq 0 ]; then
  echo "test-cluster: no test file calls startStack" >&2
  exit 1
fi
TEST_PROFILE=cluster exec npx tap "$@" "${files[@]}"
