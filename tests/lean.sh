#!/usr/bin/env bash
# The lean build (`cargo build --no-default-features`) through its binary, as a packager ships
# it: `--version` names the parts left out, and every way to a part left out is refused with
# exit 2 and a message naming its feature (docs/ARCHITECTURE.md, "Cargo features"). Run by
# `make check-lean`; the argument is the lean binary.
set -euo pipefail
bin=$(realpath "${1:?usage: tests/lean.sh PATH-TO-LEAN-AGENTLOOP}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export HOME="$tmp" XDG_CONFIG_HOME="$tmp/.config" XDG_STATE_HOME="$tmp/.state" XDG_CACHE_HOME="$tmp/.cache"
unset AGENTLOOP_WORKSPACE AGENTLOOP_REDIS AGENTLOOP_CONFIG OTEL_EXPORTER_OTLP_ENDPOINT || true
cd "$tmp"

version=$("$bin" --version)
[[ $version == *"left out: mcp, queue, otel, serve"* ]] || { echo "lean --version does not name what it left out: $version" >&2; exit 1; }

# refused FEATURE ARGS...: exit 2, naming the feature.
refused() {
  local feature=$1 err code
  shift
  set +e
  err=$("$bin" "$@" 2>&1 >/dev/null)
  code=$?
  set -e
  if [[ $code != 2 || $err != *"needs the \`$feature\` feature"* ]]; then
    echo "agentloop $*: want exit 2 naming the \`$feature\` feature, got exit $code: $err" >&2
    exit 1
  fi
}

refused serve serve
refused queue worker --root root --redis redis://127.0.0.1:1/0
refused queue enqueue --redis redis://127.0.0.1:1/0 --goal g
refused queue status --redis redis://127.0.0.1:1/0
refused mcp mcp list
printf 'mcp:\n  servers:\n    files: {command: echo}\n' > mcp.yaml
refused mcp --config mcp.yaml --script none.yaml run --goal g
printf 'otel:\n  endpoint: http://127.0.0.1:4318\n' > otel.yaml
refused otel --config otel.yaml --script none.yaml run --goal g
echo "lean build: --version names what it left out; serve, worker, enqueue, status --redis, mcp, mcp.servers and otel.endpoint are refused naming their feature"
