#!/usr/bin/env python3
"""A small MCP server for agentloop's tests: stdio (default) or streamable HTTP (--http).

Standard library only. Speaks JSON-RPC 2.0: initialize / notifications/initialized,
tools/list, tools/call, ping; answers the protocol version the client asks for when it knows
it, else its newest (as the reference servers do).

Tools: echo, fail (isError), rpc_error (a JSON-RPC error), slow (sleeps; honours
notifications/cancelled), crash (the server exits), get_current_time (a fixed clock), image, spawn_child (starts `sleep 300` in
the server's process group), weird.name/x (a name and schema that need normalising),
bad_schema (an invalid schema). With FAKE_MCP_FLOOD=1 also: images (COUNT tiny PNGs in one
result), big_text (a text of BYTES bytes), big_files (COUNT images of BYTES bytes each).
With FAKE_MCP_ELICIT=1 (stdio) also: ask (sends elicitation/create with the MESSAGE and SCHEMA
it is given, waits for the answer and returns it as JSON text).
Anything else gets JSON-RPC error -32602.

Environment:
  FAKE_MCP_STARTS   file: one line "<pid>" appended per start
  FAKE_MCP_LOG      file: one JSON line per message received (and HTTP headers)
  FAKE_MCP_PROTOCOL answer this protocol version whatever is asked
  FAKE_MCP_IGNORE_EOF=1  ignore stdin EOF and SIGTERM (a badly behaved server)
  FAKE_MCP_FAIL_INIT=1   exit before answering initialize
  FAKE_MCP_SLOW_START=S  sleep S seconds before reading anything
  FAKE_MCP_FLOOD=1       list the flood tools (images, big_text, big_files)
  FAKE_MCP_ELICIT=1      list the ask tool (elicitation; stdio only)
  FAKE_MCP_OAUTH=1       (--http) require an OAuth bearer token, and be the authorization
                         server too: protected-resource and authorization-server metadata,
                         registration, /authorize (redirects at once, as if a person signed
                         in), /token (authorization_code with PKCE S256 checked, refresh_token,
                         client_credentials for client cc-client / cc-secret); GET /fake/expire
                         makes every access token so far invalid (refresh tokens stay good)
  FAKE_MCP_OAUTH_ISSUER  the issuer the authorization-server metadata names (a path is put
                         after this server's address; default: the address itself)
  FAKE_MCP_OAUTH_NO_PRM=1  publish no protected-resource metadata (a 2025-03-26 server)
  FAKE_MCP_OAUTH_NO_ASM=1  publish no authorization-server metadata either (the default
                         endpoints /authorize, /token, /register at the origin)
  FAKE_MCP_OAUTH_MOVED   a file: once it exists, the protected-resource metadata names the
                         authorization server it holds (the server moved its sign-in elsewhere)
  FAKE_MCP_OAUTH_REFUSE=1  issue tokens but take none of them (a server that is never satisfied)
                         The token endpoint also takes client_credentials with a JWT client
                         assertion (logged whole, for the test to check; any client), and
                         jwt-bearer with an ID-JAG for client xaa-client / xaa-secret (HTTP
                         Basic). Under /idp it is an enterprise identity provider: OpenID
                         metadata and /idp/token, a token exchange of the ID token id-token-1
                         for an ID-JAG naming xaa-client.
"""
import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time

KNOWN = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()
ZONES = {"Asia/Tokyo": "+09:00", "UTC": "+00:00", "Europe/Paris": "+01:00"}

TOOLS = [
    {"name": "echo", "description": "Echo the text back.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
     "annotations": {"readOnlyHint": True}},
    {"name": "fail", "description": "Always fails (isError).",
     "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}},
    {"name": "slow", "description": "Sleep, then answer.",
     "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]}},
    {"name": "crash", "description": "Make the server exit.", "inputSchema": {"type": "object"}},
    {"name": "get_current_time", "description": "Get the current time in a timezone (a fixed clock).",
     "inputSchema": {"type": "object", "properties": {"timezone": {"type": "string", "description": "IANA name"}},
                     "required": ["timezone"]}},
    {"name": "image", "description": "Return a tiny PNG.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "spawn_child", "description": "Start a child process that sleeps.", "inputSchema": {"type": "object"}},
    {"name": "weird.name/x", "description": "A name and a schema that need normalising.",
     "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#",
                     "properties": {"p": {"$ref": "#/definitions/P"}},
                     "definitions": {"P": {"type": "object", "properties": {"x": {"type": "integer"}},
                                           "required": ["x"]}}}},
    {"name": "rpc_error", "description": "Answers with a JSON-RPC error.", "inputSchema": {"type": "object"}},
    {"name": "bad_schema", "description": "Its schema is invalid.",
     "inputSchema": {"type": "object", "properties": {"a": {"type": "strang"}}}},
]

FLOOD_TOOLS = [
    {"name": "images", "description": "Return COUNT tiny PNGs.",
     "inputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}},
    {"name": "big_text", "description": "Return a text of BYTES bytes.",
     "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}}, "required": ["bytes"]}},
    {"name": "big_files", "description": "Return COUNT images of BYTES bytes each.",
     "inputSchema": {"type": "object", "properties": {"count": {"type": "integer"}, "bytes": {"type": "integer"}},
                     "required": ["count", "bytes"]}},
]
if os.environ.get("FAKE_MCP_FLOOD"):
    TOOLS = TOOLS + FLOOD_TOOLS
if os.environ.get("FAKE_MCP_ELICIT"):
    TOOLS = TOOLS + [{"name": "ask", "description": "Ask the client to fill in a form (elicitation).",
                      "inputSchema": {"type": "object", "properties": {"message": {"type": "string"},
                                                                       "schema": {"type": "object"}},
                                      "required": ["message", "schema"]}}]

out_lock = threading.Lock()
cancelled = set()
children = []
# Answers to the requests this server sends (elicitation), by id.
answers = {}
answers_cond = threading.Condition()


def log(obj):
    path = os.environ.get("FAKE_MCP_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(obj) + "\n")


def text(t, is_error=False):
    r = {"content": [{"type": "text", "text": t}]}
    if is_error:
        r["isError"] = True
    return r


def call_tool(name, args, req_id):
    """Returns a result dict, or an ("error", code, message) tuple, or None (cancelled)."""
    if name == "echo":
        return text("echo: " + str(args.get("text", "")))
    if name == "fail":
        return text(args.get("message") or "it failed on purpose", is_error=True)
    if name == "slow":
        end = time.time() + float(args.get("seconds", 1))
        while time.time() < end:
            if req_id in cancelled:
                log({"cancelled_seen": req_id})
                return None
            time.sleep(0.02)
        return text("slept %s" % args.get("seconds"))
    if name == "crash":
        sys.stderr.write("crashing on purpose\n")
        sys.stderr.flush()
        os._exit(3)
    if name == "get_current_time":
        tz = args.get("timezone", "")
        if tz not in ZONES:
            return text("Invalid timezone: %s" % tz, is_error=True)
        off = ZONES[tz]
        hour = int(off[1:3]) * (1 if off[0] == "+" else -1)
        body = {"timezone": tz, "datetime": "2026-01-01T%02d:00:00%s" % (hour % 24, off), "is_dst": False}
        return {"content": [{"type": "text", "text": json.dumps(body, indent=2)}], "structuredContent": body}
    if name == "image":
        return {"content": [{"type": "text", "text": "a 1x1 PNG"},
                            {"type": "image", "mimeType": "image/png", "data": PNG}]}
    if name == "images":
        item = {"type": "image", "mimeType": "image/png", "data": PNG}
        return {"content": [{"type": "text", "text": "many PNGs"}] + [item] * int(args.get("count", 0))}
    if name == "big_text":
        return text("x" * int(args.get("bytes", 0)))
    if name == "big_files":
        data = base64.b64encode(b"\0" * int(args.get("bytes", 0))).decode()
        item = {"type": "image", "mimeType": "image/png", "data": data}
        return {"content": [item] * int(args.get("count", 0))}
    if name == "spawn_child":
        p = subprocess.Popen(["sleep", "300"])
        children.append(p)
        return text(str(p.pid))
    if name == "rpc_error":
        return ("error", -32000, "database is locked")
    if name == "weird.name/x":
        return text("weird got %s" % json.dumps(args, sort_keys=True))
    if name == "ask":
        ask_id = "ask-%s" % req_id
        send({"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create",
              "params": {"message": args.get("message", ""), "requestedSchema": args.get("schema", {})}})
        with answers_cond:
            answers_cond.wait_for(lambda: ask_id in answers, timeout=30)
            answer = answers.pop(ask_id, {"error": "no answer"})
        return text("answer: " + json.dumps(answer.get("result", answer.get("error")), sort_keys=True))
    return ("error", -32602, "Unknown tool: %s" % name)


def handle(msg):
    """Returns the response dict for a request, or None for notifications."""
    method = msg.get("method")
    req_id = msg.get("id")
    params = msg.get("params") or {}
    log({"method": method, "params": params, "id": req_id})
    if method == "notifications/cancelled":
        cancelled.add(params.get("requestId"))
        return None
    if req_id is None:
        return None
    if method == "initialize":
        if os.environ.get("FAKE_MCP_FAIL_INIT"):
            sys.stderr.write("refusing to initialize\n")
            sys.stderr.flush()
            os._exit(2)
        asked = params.get("protocolVersion")
        version = os.environ.get("FAKE_MCP_PROTOCOL") or (asked if asked in KNOWN else KNOWN[-1])
        result = {"protocolVersion": version, "capabilities": {"tools": {"listChanged": False}},
                  "serverInfo": {"name": "fake-mcp", "version": "1.0.0"}}
        return {"jsonrpc": "2.0", "id": req_id, "result": result}
    if method == "ping":
        return {"jsonrpc": "2.0", "id": req_id, "result": {}}
    if method == "tools/list":
        return {"jsonrpc": "2.0", "id": req_id, "result": {"tools": TOOLS}}
    if method == "tools/call":
        r = call_tool(params.get("name"), params.get("arguments") or {}, req_id)
        if r is None:
            return None
        if isinstance(r, tuple):
            return {"jsonrpc": "2.0", "id": req_id, "error": {"code": r[1], "message": r[2]}}
        return {"jsonrpc": "2.0", "id": req_id, "result": r}
    return {"jsonrpc": "2.0", "id": req_id, "error": {"code": -32601, "message": "Method not found: %s" % method}}


def send(obj):
    data = json.dumps(obj) + "\n"
    with out_lock:
        sys.stdout.write(data)
        sys.stdout.flush()


def serve_stdio():
    def work(msg):
        r = handle(msg)
        if r is not None:
            send(r)

    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if "method" not in msg and "id" in msg:
            # The client's answer to a request of ours.
            log({"answer": msg})
            with answers_cond:
                answers[msg["id"]] = msg
                answers_cond.notify_all()
            continue
        if msg.get("method") == "tools/call":
            threading.Thread(target=work, args=(msg,), daemon=True).start()
        else:
            work(msg)
    # stdin closed: the MCP stdio rule is to exit.
    if os.environ.get("FAKE_MCP_IGNORE_EOF"):
        while True:
            time.sleep(1)
    for c in children:
        c.kill()
    os._exit(0)


OAUTH = bool(os.environ.get("FAKE_MCP_OAUTH"))
REFUSE = bool(os.environ.get("FAKE_MCP_OAUTH_REFUSE"))


def jwt_claims(jwt):
    """The claims of a compact JWT, unverified (empty when it is not one)."""
    try:
        part = jwt.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except Exception:
        return {}


OAUTH_STATE = {"valid": set(), "refresh": set(), "challenge": None, "n": 0}


def serve_http(port_file):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def reply(self, code, body=None, headers=()):
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(code)
            for k, v in headers:
                self.send_header(k, v)
            if body is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) or b"{}"
            if OAUTH and self.path != "/mcp":
                return self.oauth_post(raw)
            msg = json.loads(raw)
            log({"http_headers": {k.lower(): v for k, v in self.headers.items()}})
            if OAUTH:
                token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                if token not in OAUTH_STATE["valid"]:
                    base = "http://%s" % self.headers.get("Host")
                    return self.reply(401, {"error": "invalid_token"}, [(
                        "WWW-Authenticate",
                        'Bearer error="invalid_token", resource_metadata="%s/.well-known/oauth-protected-resource/mcp"' % base,
                    )])
            r = handle(msg)
            extra = [("Mcp-Session-Id", "fake-session-1")] if msg.get("method") == "initialize" else []
            if r is None:
                self.reply(202, None, extra)
            else:
                self.reply(200, r, extra)

        def do_GET(self):
            if OAUTH and self.path != "/mcp":
                return self.oauth_get()
            self.reply(405, None, [("Allow", "POST, DELETE")])

        def oauth_get(self):
            import urllib.parse
            base = "http://%s" % self.headers.get("Host")
            path, _, query = self.path.partition("?")
            q = dict(urllib.parse.parse_qsl(query))
            log({"oauth": "GET " + path, "query": q})
            moved = os.environ.get("FAKE_MCP_OAUTH_MOVED")
            if path == "/.well-known/oauth-protected-resource/mcp" and moved and os.path.exists(moved):
                return self.reply(200, {"resource": base + "/mcp", "authorization_servers": [open(moved).read().strip()]})
            if path == "/.well-known/oauth-protected-resource/mcp" and not os.environ.get("FAKE_MCP_OAUTH_NO_PRM"):
                return self.reply(200, {"resource": base + "/mcp", "authorization_servers": [base]})
            if path == "/.well-known/oauth-authorization-server" and os.environ.get("FAKE_MCP_OAUTH_NO_ASM"):
                return self.reply(404, {})
            if path == "/idp/.well-known/openid-configuration":
                return self.reply(200, {"issuer": base + "/idp", "token_endpoint": base + "/idp/token"})
            if path == "/.well-known/oauth-authorization-server":
                issuer = os.environ.get("FAKE_MCP_OAUTH_ISSUER", "")
                return self.reply(200, {
                    "issuer": base + issuer if issuer.startswith("/") or not issuer else issuer,
                    "authorization_endpoint": os.environ.get("FAKE_MCP_OAUTH_AUTHORIZE") or base + "/authorize",
                    "token_endpoint": base + "/token",
                    "registration_endpoint": base + "/register",
                    "response_types_supported": ["code"],
                    "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
                })
            if path == "/authorize":
                OAUTH_STATE["challenge"] = q.get("code_challenge")
                target = q["redirect_uri"] + "?" + urllib.parse.urlencode({"code": "code-1", "state": q.get("state", "")})
                return self.reply(302, None, [("Location", target)])
            if path == "/fake/expire":
                OAUTH_STATE["valid"].clear()
                return self.reply(200, {})
            self.reply(404, {})

        def oauth_post(self, raw):
            import base64, hashlib, urllib.parse
            path = self.path.partition("?")[0]
            if path == "/register":
                body = json.loads(raw)
                log({"oauth": "POST /register", "body": body})
                return self.reply(201, {"client_id": "dyn-client", "redirect_uris": body.get("redirect_uris", [])})
            base = "http://%s" % self.headers.get("Host")
            if path == "/idp/token":
                return self.idp_token(base, dict(urllib.parse.parse_qsl(raw.decode())))
            if path != "/token":
                return self.reply(404, {})
            form = dict(urllib.parse.parse_qsl(raw.decode()))
            auth = self.headers.get("Authorization") or ""
            if auth.startswith("Basic "):
                cid, _, sec = base64.b64decode(auth[6:]).decode().partition(":")
                form.setdefault("client_id", urllib.parse.unquote(cid))
                form.setdefault("client_secret", urllib.parse.unquote(sec))
            log({"oauth": "POST /token", "form": {k: v for k, v in form.items() if k != "client_secret"}})
            grant = form.get("grant_type")
            if grant == "authorization_code":
                verifier = form.get("code_verifier", "")
                digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
                if form.get("code") != "code-1" or digest != OAUTH_STATE["challenge"]:
                    return self.reply(400, {"error": "invalid_grant"})
            elif grant == "refresh_token":
                if form.get("refresh_token") not in OAUTH_STATE["refresh"]:
                    return self.reply(400, {"error": "invalid_grant"})
            elif grant == "client_credentials" and "client_assertion" in form:
                if form.get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
                    return self.reply(401, {"error": "invalid_client"})
            elif grant == "client_credentials":
                if (form.get("client_id"), form.get("client_secret")) != ("cc-client", "cc-secret"):
                    return self.reply(401, {"error": "invalid_client"})
            elif grant == "urn:ietf:params:oauth:grant-type:jwt-bearer":
                claims = jwt_claims(form.get("assertion", ""))
                if (form.get("client_id"), form.get("client_secret")) != ("xaa-client", "xaa-secret"):
                    return self.reply(401, {"error": "invalid_client"})
                if claims.get("aud") != base or claims.get("client_id") != "xaa-client" or claims.get("resource") != base + "/mcp":
                    return self.reply(400, {"error": "invalid_grant"})
                OAUTH_STATE["n"] += 1
                access = "access-%d" % OAUTH_STATE["n"]
                if not REFUSE:
                    OAUTH_STATE["valid"].add(access)
                return self.reply(200, {"access_token": access, "token_type": "Bearer", "expires_in": 3600})
            else:
                return self.reply(400, {"error": "unsupported_grant_type"})
            OAUTH_STATE["n"] += 1
            access, refresh = "access-%d" % OAUTH_STATE["n"], "refresh-%d" % OAUTH_STATE["n"]
            if not REFUSE:
                OAUTH_STATE["valid"].add(access)
            OAUTH_STATE["refresh"].add(refresh)
            answer = {"access_token": access, "token_type": "Bearer", "expires_in": 3600, "refresh_token": refresh}
            if grant == "client_credentials":
                # No refresh token for a machine client (RFC 6749 section 4.4.3): it asks anew.
                del answer["refresh_token"]
            self.reply(200, answer)

        def idp_token(self, base, form):
            log({"oauth": "POST /idp/token", "form": form})
            if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange":
                return self.reply(400, {"error": "unsupported_grant_type"})
            if form.get("subject_token") != "id-token-1":
                return self.reply(400, {"error": "invalid_grant"})
            now = int(time.time())
            b64 = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
            claims = {"iss": base + "/idp", "sub": "someone@example.com", "aud": form.get("audience"),
                      "client_id": "xaa-client", "resource": form.get("resource"), "jti": "jag-%d" % now,
                      "iat": now, "exp": now + 300}
            # Signed by nobody: the authorization server here takes the claims as they are.
            jag = "%s.%s.c2ln" % (b64({"alg": "ES256", "typ": "oauth-id-jag+jwt"}), b64(claims))
            self.reply(200, {"access_token": jag, "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                             "token_type": "N_A", "expires_in": 300})

        def do_DELETE(self):
            log({"method": "DELETE"})
            self.reply(200, None)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, port_file)
    srv.serve_forever()


def main():
    starts = os.environ.get("FAKE_MCP_STARTS")
    if starts:
        with open(starts, "a") as f:
            f.write("%d\n" % os.getpid())
    sys.stderr.write("fake MCP server %d starting\n" % os.getpid())
    sys.stderr.flush()
    if os.environ.get("FAKE_MCP_IGNORE_EOF"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    delay = os.environ.get("FAKE_MCP_SLOW_START")
    if delay:
        time.sleep(float(delay))
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        serve_http(sys.argv[2])
    else:
        serve_stdio()


if __name__ == "__main__":
    main()
