#!/usr/bin/env sh
# Ductile entrypoint: one protocol v2 request on stdin, one response on stdout.
# Runs live under AGENTLOOP_WORKSPACE (one workspace per run in runs/<run_id>/), which must
# outlive Ductile's per-job workspace folders.
exec agentloop -w "${AGENTLOOP_WORKSPACE:-${XDG_DATA_HOME:-$HOME/.local/share}/agentloop/ductile}" handle
