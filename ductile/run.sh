#!/usr/bin/env sh
# Ductile entrypoint: one protocol v2 request on stdin, one response on stdout.
# Every run lives in its own folder under AGENTLOOP_WORKSPACE (runs/<run_id>/), beside the
# root's agentloop.yaml: one root for all of agentloop's jobs, kept between them.
exec agentloop -w "${AGENTLOOP_WORKSPACE:-${XDG_DATA_HOME:-$HOME/.local/share}/agentloop/ductile}" handle
