#!/usr/bin/env bash
# `make bench-real`, second part: the bundled smoke suite (`agentloop eval --builtin smoke`) on the
# harness's real llama-cpp-python server (SmolLM2, see ../shared/harness), once per chat format
# (SMOKE_FORMATS, default: upstream chatml-function-calling and the harness's fixed handler),
# SMOKE_TRIALS trials per goal (default 3), with the small-model configuration docs/MODELS.md
# gives (lean.yaml: four tools, no skills, memory off, `frame: goal`, `prompts: lean`; SMOKE_CONFIG
# names another file, `SMOKE_CONFIG=none` the defaults). Prints each format's pass table (the one docs/MODELS.md
# publishes) and keeps every trial's workspace. Skipped without the harness. The server runs from a
# private folder on SMOKE_PORT, so a harness server already running is left alone.
set -euo pipefail
if ! . "$(dirname "$0")/harness.sh"; then
  echo "smoke suite skipped: no harness in ${HARNESS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentloop-harness} (install ../shared/harness, or set HARNESS_DIR)"
  exit 0
fi
PORT="${SMOKE_PORT:-8098}"
TRIALS="${SMOKE_TRIALS:-3}"
FORMATS="${SMOKE_FORMATS:-chatml-function-calling harness-chatml-function-calling}"
# docs/MODELS.md's lean.yaml, as written there.
cat > "$work/lean.yaml" <<'YAML'
allowed_tools: [file_read, file_write, list_dir, finish]
skills: {disabled: [critique, daily-digest, web-research]}
memory: {enabled: false}
llm: {max_tokens: 512, temperature: 0}
frame: goal
prompts: lean
YAML
CONFIG="${SMOKE_CONFIG:-$work/lean.yaml}"
config=()
[[ "$CONFIG" != none ]] && config=(--config "$CONFIG")
for format in $FORMATS; do
  HARNESS_DIR="$priv" LLM_PORT="$PORT" LLM_CHAT_FORMAT="$format" "$H/start-llm.sh" > /dev/null
  echo "== SmolLM2-135M, $format, $TRIALS trial(s) per goal"
  # A cache of its own: the wire form learned here is not the user's.
  XDG_CACHE_HOME="$work/cache-$format" "$BIN" "${config[@]}" --provider openai --base-url "http://127.0.0.1:$PORT/v1" --model smollm2 \
    eval --builtin smoke --trials "$TRIALS" --out "$work/$format" --json > "$work/$format.json" || true
  python3 - "$work/$format.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
print(f"{'goal':<12} {'pass':>6} {'steps':>6} {'seconds':>8}  commonest failure")
for c in doc.get("cases", []):
    steps = "-" if c.get("median_steps") is None else f"{c['median_steps']:g}"
    print(f"{c['case']:<12} {c['passed']}/{c['trials']:<4} {steps:>6} {c['median_seconds']:8.0f}  {c.get('commonest_failure') or ''}")
PY
  stop
done
echo "(workspaces and JSON in $work)"
