#!/usr/bin/env sh
# Ductile entrypoint: one protocol v2 request on stdin, one response on stdout.
# Runs live under AGENTLOOP_WORKSPACE (one workspace per run in runs/<run_id>/). Ductile gives a
# plugin no folder of its own and starts every job afresh, so this root is what keeps a run
# between its jobs: give every job the same one.
exec agentloop -w "${AGENTLOOP_WORKSPACE:-${XDG_DATA_HOME:-$HOME/.local/share}/agentloop/ductile}" handle
