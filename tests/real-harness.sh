#!/usr/bin/env bash
# `make test-real` against the harness's llama-cpp-python server (see ../shared/harness),
# once per chat handler: upstream `chatml-function-calling`, then the fixed
# `harness-chatml-function-calling`. Starts and stops exactly the server it needs; a server
# already running on the port is used as it is and left running.
set -euo pipefail
H="${HARNESS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentloop-harness}"
PORT="${LLM_PORT:-8088}"
[[ -x "$H/start-llm.sh" ]] || { echo "no harness in $H (set HARNESS_DIR, or install ../shared/harness)" >&2; exit 2; }
if [[ -f "$H/llm.pid" ]] && kill -0 "$(cat "$H/llm.pid")" 2>/dev/null; then
  echo "a harness server is already running (pid $(cat "$H/llm.pid")); stop it with $H/stop-llm.sh first" >&2
  exit 2
fi
status=0
for handler in chatml-function-calling harness-chatml-function-calling; do
  echo "=== handler $handler"
  LLM_CHAT_FORMAT="$handler" LLM_PORT="$PORT" "$H/start-llm.sh"
  AGENTLOOP_REAL_BASE_URL="http://127.0.0.1:$PORT/v1" AGENTLOOP_REAL_LOG="$H/llm.log" AGENTLOOP_REAL_CHAT_FORMAT="$handler" \
    make test-real || status=1
  "$H/stop-llm.sh"
done
exit $status
