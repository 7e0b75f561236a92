# Sourced by benches/real.sh and benches/smoke.sh: a private copy of the harness's llama-cpp-python
# server (../shared/harness) to run on a port of the bench's own, so a harness server already
# running is left alone. Sets H (the harness), work (a new folder), priv (the private harness
# folder) and BIN (a copy of the binary, so a rebuild while the bench runs changes nothing), and
# defines stop (the private server's end, also on exit). Returns 1 without the harness.
H="${HARNESS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentloop-harness}"
[[ -x "$H/start-llm.sh" && -d "$H/venv" ]] || return 1
work="$(mktemp -d)"
priv="$work/harness"
mkdir -p "$priv"
cp "${BIN:-$PWD/target/debug/agentloop}" "$work/agentloop"
BIN="$work/agentloop"
for f in venv models llm_server.py start-llm.sh stop-llm.sh; do
  [[ -e "$H/$f" ]] && ln -s "$H/$f" "$priv/$f"
done
stop() { HARNESS_DIR="$priv" "$H/stop-llm.sh" > /dev/null 2>&1 || true; }
trap stop EXIT
