#!/usr/bin/env bash
# `make bench-real`: one fixed goal on the harness's real llama-cpp-python server (SmolLM2, see
# ../shared/harness), run twice from a fresh server each time: with the shared prompt prefix
# (every call starts with the same tools, system message and task) and without it (the hidden
# AGENTLOOP_UNSHARED_PREFIX=1: each phase sends its own tool and system message). Prints, for
# each, the share of prompt tokens the server's prefix cache served from the second call on
# (its log's `prefix-match hit` counts), the median wall time per step, and HTTP 5xx replies.
# BENCH_MODES=shared (or unshared) runs one side; with BENCH_PORT, two can run side by side.
# Skipped without the harness. The server runs from a private folder (its own pid file and log,
# the harness's venv and model) on BENCH_PORT, so a harness server already running is left alone.
set -euo pipefail
if ! . "$(dirname "$0")/harness.sh"; then
  echo "bench-real skipped: no harness in ${HARNESS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentloop-harness} (install ../shared/harness, or set HARNESS_DIR)"
  exit 0
fi
PORT="${BENCH_PORT:-8097}"
STEPS="${BENCH_STEPS:-3}"
GOAL="${BENCH_GOAL:-Write a haiku about the sea to artifacts/haiku.txt}"
MODES="${BENCH_MODES:-shared unshared}"
# Answers are capped alike in both modes: SmolLM2 under a grammar can write until max_tokens.
MAX_TOKENS="${BENCH_MAX_TOKENS:-512}"
for mode in $MODES; do
  ws="$work/ws-$mode"
  : > "$priv/llm.log"
  HARNESS_DIR="$priv" LLM_PORT="$PORT" LLM_CHAT_FORMAT="${LLM_CHAT_FORMAT-chatml-function-calling}" "$H/start-llm.sh" > /dev/null
  from=$(wc -l < "$priv/llm.log")
  unshared=""
  [[ "$mode" == unshared ]] && unshared=1
  start=$(date +%s)
  env -u AGENTLOOP_UNSHARED_PREFIX ${unshared:+AGENTLOOP_UNSHARED_PREFIX=1} XDG_CACHE_HOME="$work/cache" \
    AGENTLOOP_LLM__MAX_TOKENS="$MAX_TOKENS" \
    "$BIN" -w "$ws" --provider openai --base-url "http://127.0.0.1:$PORT/v1" --model smollm2 \
    run --goal "$GOAL" --max-steps "$STEPS" > "$work/$mode.out" 2>&1 || true
  end=$(date +%s)
  tail -n +"$((from + 1))" "$priv/llm.log" > "$work/$mode.log"
  stop
  python3 - "$mode" "$work/$mode.log" "$ws/trace.jsonl" "$((end - start))" <<'PY'
import json, re, statistics, sys
mode, log, trace, wall = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
text = open(log, errors="replace").read()
# One figure per request: the first prefix match logged before its reply (a function call
# may generate twice on the same prompt; the second match is of the same request).
calls = []
for chunk in re.split(r'"POST /v1/chat/completions HTTP/1\.1" \d+', text)[:-1]:
    m = re.search(r"(\d+) prefix-match hit, remaining (\d+) prompt tokens to eval", chunk)
    cold = re.search(r"prompt eval time = .*/ *(\d+) tokens", chunk)
    if m:
        calls.append((int(m.group(1)), int(m.group(2))))
    elif cold:  # a fresh server's first prompt: nothing to match
        calls.append((0, int(cold.group(1))))
errors = len(re.findall(r'HTTP/1\.1" 5\d\d', text))
later = calls[1:]
hit = sum(h for h, _ in later)
total = sum(h + r for h, r in later)
steps = {}
try:
    for line in open(trace):
        e = json.loads(line)
        if e.get("step", 0) >= 1 and e.get("phase") in ("plan", "act", "reflect"):
            steps[e["step"]] = steps.get(e["step"], 0) + e.get("duration_ms", 0)
except FileNotFoundError:
    pass
median = statistics.median(steps.values()) / 1000 if steps else float("nan")
share = 100 * hit / total if total else float("nan")
print(f"{mode:<9} calls {len(calls):>2}  prompt tokens from call 2 on {total:>6}  from the prefix cache {share:5.1f}%  "
      f"median step {median:6.1f} s  steps {len(steps)}  run {wall} s  HTTP 5xx {errors}")
PY
done
echo "(logs and workspaces in $work)"
