#!/usr/bin/env bash
# The sdk-test-harness's long-running tests (`-enable-long-running-tests`: 5-minute
# recoveries, 30 s polling minimums, retry timing), which CI does not run: both lines'
# streaming and polling groups, clients on tokio. About an hour (v3: 20 minutes). The result of the
# last run is recorded in conformance/README.md with its date and commit.
#
# usage: bash conformance/long-running.sh [OUT_DIR]   (default target/harness-long)
set -euo pipefail
cd "$(dirname "$0")/.."
harness=${SDK_TEST_HARNESS:-../shared/tools/sdk-test-harness}
out=${1:-target/harness-long}
[ -x "$harness/run.sh" ] || { echo "no sdk-test-harness at $harness" >&2; exit 2; }

cargo build --release -p flagsync-conformance --bin sdk-contract-service
service=$PWD/target/release/sdk-contract-service

status=0
echo "-- v2.41.0: streaming and polling, long-running tests included"
"$harness/run.sh" -r -p 8000 -o "$out/v2" -- "$service" --port 8000 --runtime tokio \
  --harness -enable-long-running-tests -run 'streaming|polling' || status=1
echo "-- v3 (FDv2 data systems): streaming and polling, long-running tests included"
"$harness/run.sh" -3 -r -p 8000 -o "$out/v3" -- "$service" --port 8000 --runtime tokio \
  --harness -enable-long-running-tests -run 'streaming|polling' || status=1
echo "commit $(git rev-parse --short HEAD), $(date -u +%Y-%m-%d)"
exit $status
