#!/usr/bin/env bash
# Every benchmark that docs/performance.md quotes, one after another in one block, with the
# machine's load (`uptime`) before each, so the summary table comes from one run:
#
#   bash bench/run_all.sh [OUTPUT-FILE]        # default: bench-block.txt
#
# Needs the development environment (.venv, `pip install -e '.[test,dev]'`), wrk for the HTTP
# benchmarks and, for the PostgreSQL row, the server named by HOOKPROOF_TEST_POSTGRES_DSN
# (default postgresql://postgres@127.0.0.1:5432/test); valgrind for the instruction count (skipped,
# saying so, without it). Takes about 10 minutes on the project's 2-core machine; run nothing
# else meanwhile.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-bench-block.txt}"
python="${PYTHON:-.venv/bin/python}"
dsn="${HOOKPROOF_TEST_POSTGRES_DSN:-postgresql://postgres@127.0.0.1:5432/test}"
failed=0

run() {  # run COMMAND...: the load, the command as typed, its output
  echo "\$ uptime"
  uptime
  echo "\$ $*"
  "$@" 2>&1 || { echo "(exit $?)"; failed=1; }
}

{
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u '+%Y-%m-%d %H:%M UTC')"
  run "$python" bench/bench_verify.py
  run "$python" bench/bench_inbox.py
  run "$python" bench/bench_receiver.py
  run "$python" bench/bench_scaling.py --dsn "$dsn"
  run "$python" bench/bench_sender.py --deliveries 30000
  run "$python" bench/bench_sender.py --deliveries 30000 --fan-out 3
  for _ in 1 2 3; do run "$python" bench/bench_conformance.py; done
  run "$python" bench/bench_request_kinds.py
  run "$python" bench/bench_copies_together.py
  if command -v valgrind >/dev/null 2>&1; then
    run "$python" bench/bench_conformance_instructions.py
  else
    echo "(no valgrind: bench_conformance_instructions.py skipped)"
  fi
  echo "\$ uptime"
  uptime
  exit "$failed"
} | tee "$out"  # pipefail: the block's status (1 when any benchmark failed)
