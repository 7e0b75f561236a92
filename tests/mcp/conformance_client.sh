#!/bin/sh
# agentloop as the client of the MCP conformance suite (`conformance client --command`): the
# suite starts one test server per scenario and runs this with the server's URL as the last
# argument, the scenario in MCP_CONFORMANCE_SCENARIO and its data (client credentials, tool
# calls) in MCP_CONFORMANCE_CONTEXT. The script does what a user would: configure the server
# (with the OAuth client settings the scenario hands out), `mcp list --refresh --login`, then
# `mcp call --login` for each tool. Sign-ins are headless: $BROWSER fetches the authorization
# page with curl, whose redirect lands on agentloop's loopback port.
# Needs: AGENTLOOP (the binary), jq, curl.
set -u
for last in "$@"; do :; done
url=$last
ws=$(mktemp -d)
trap 'rm -rf "$ws"' EXIT
export XDG_STATE_HOME="$ws/state" XDG_CACHE_HOME="$ws/cache" HOME="$ws/home" AGENTLOOP_TRUST_ALL=1
mkdir -p "$ws/w" "$ws/home"
printf '#!/bin/sh\nexec curl -s -o /dev/null -L --max-redirs 5 "$1"\n' > "$ws/browser"
chmod +x "$ws/browser"
export BROWSER="$ws/browser"
ctx=${MCP_CONFORMANCE_CONTEXT:-'{}'}
id=$(printf '%s' "$ctx" | jq -r '.client_id // empty')
secret=$(printf '%s' "$ctx" | jq -r '.client_secret // empty')
{
  printf 'mcp:\n  servers:\n    s:\n      url: %s\n' "$url"
  case "${MCP_CONFORMANCE_SCENARIO:-}" in
    auth/client-credentials-basic)
      printf '      oauth: {grant: client_credentials, client_id: "%s", client_secret: "%s"}\n' "$id" "$secret" ;;
    auth/basic-cimd)
      printf '      oauth: {client_metadata_url: "https://conformance-test.local/client-metadata.json"}\n' ;;
    *)
      if [ -n "$id" ]; then
        printf '      oauth: {client_id: "%s", client_secret: "%s"}\n' "$id" "$secret"
      fi ;;
  esac
} > "$ws/w/agentloop.yaml"
al() { "$AGENTLOOP" -w "$ws/w" "$@"; }
al mcp list --refresh --login --json > "$ws/tools.json" || exit 1
status=0
calls=$(printf '%s' "$ctx" | jq -c '.toolCalls // .tool_calls // empty | .[] | {tool: .name, args: (.arguments // {})}')
if [ -z "$calls" ]; then
  # Each tool with a value of its type for every required parameter.
  calls=$(jq -c '.[0].tools[] | {tool, args: ((.parameters.properties // {}) as $p | [(.parameters.required // [])[] | {key: ., value: ({"number": 1, "integer": 1, "boolean": true, "string": "test"}[$p[.].type // "string"] // null)}] | from_entries)}' "$ws/tools.json")
fi
for c in $calls; do
  tool=$(printf '%s' "$c" | jq -r .tool)
  args=$(printf '%s' "$c" | jq -c .args)
  al mcp call --login s "$tool" --args "$args" || status=1
done
exit $status
