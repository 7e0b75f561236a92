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
    auth/client-credentials-jwt)
      # The client's key goes in a file of its own (owner-only), named by the config.
      (umask 077; printf '%s' "$ctx" | jq -r .private_key_pem > "$ws/client-key.pem")
      alg=$(printf '%s' "$ctx" | jq -r '.signing_algorithm // "ES256"')
      printf '      oauth: {grant: client_credentials, client_id: "%s", private_key_file: "%s", signing_alg: %s}\n' "$id" "$ws/client-key.pem" "$alg" ;;
    auth/cross-app-access-complete-flow)
      # The person's ID token from the enterprise identity provider, through the environment.
      ID_TOKEN=$(printf '%s' "$ctx" | jq -r .idp_id_token)
      export ID_TOKEN
      printf '      oauth:\n        grant: identity_assertion\n        client_id: "%s"\n        client_secret: "%s"\n' "$id" "$secret"
      printf '        identity_provider: {issuer: "%s", token_endpoint: "%s", client_id: "%s", id_token: "${ID_TOKEN}"}\n' \
        "$(printf '%s' "$ctx" | jq -r .idp_issuer)" "$(printf '%s' "$ctx" | jq -r .idp_token_endpoint)" \
        "$(printf '%s' "$ctx" | jq -r .idp_client_id)" ;;
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
