//! Test harness: a temp folder, the CLI with a hermetic environment, and a fake HTTP server.

#![allow(dead_code)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub const NOW: &str = "2026-01-01T00:00:00Z";

/// A test component (a browser, redis-server, bubblewrap, a decoder) is missing: locally the
/// test says so on stderr and skips that part; under CI (`CI` set, as `.ci/run` sets it) a
/// missing component is a failure, so a broken install step cannot hide a suite.
pub fn missing(what: &str) {
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false");
    assert!(!ci, "{what} (required under CI: .ci/run installs it)");
    eprintln!("skipping: {what}");
}

pub struct T {
    pub dir: tempfile::TempDir,
}

impl T {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("xdg")).unwrap();
        T { dir }
    }
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
    pub fn root(&self) -> &Path {
        self.dir.path()
    }
    /// The CLI with a cleared environment, a fixed clock, in the temp folder. The workspaces a
    /// test writes are its own, so their configuration is trusted (`AGENTLOOP_TRUST_ALL=1`);
    /// [`T::untrusted`] is the CLI as it meets a workspace from elsewhere.
    pub fn cmd(&self) -> Command {
        let mut c = self.untrusted();
        c.env("AGENTLOOP_TRUST_ALL", "1");
        c
    }
    /// The CLI without trusting any workspace (only `agentloop trust` would).
    pub fn untrusted(&self) -> Command {
        let mut c = Command::cargo_bin("agentloop").expect("binary");
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.path("home"))
            .env("XDG_CONFIG_HOME", self.path("xdg"))
            .env("XDG_CACHE_HOME", self.path("cache"))
            .env("AGENTLOOP_NOW", NOW)
            .current_dir(self.root());
        c
    }
    /// The CLI on workspace `ws`.
    pub fn al(&self, args: &[&str]) -> Command {
        let mut c = self.cmd();
        c.arg("-w").arg("ws").args(args);
        c
    }
    /// `agentloop -w ws ARGS` with stdout on a pseudo-terminal `columns` wide (as `COLUMNS` says),
    /// stderr piped: the exit code, what the terminal showed (`\r` removed) and stderr.
    pub fn on_terminal(&self, args: &[&str], columns: usize) -> (Option<i32>, String, String) {
        use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
        use std::io::Read;
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
        grantpt(&master).expect("grantpt");
        unlockpt(&master).expect("unlockpt");
        let name = ptsname(&master, Vec::new()).expect("ptsname");
        let slave = std::fs::OpenOptions::new().read(true).write(true).open(name.to_str().unwrap()).expect("pts");
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.path("home"))
            .env("XDG_CONFIG_HOME", self.path("xdg"))
            .env("XDG_CACHE_HOME", self.path("cache"))
            .env("AGENTLOOP_NOW", NOW)
            .env("AGENTLOOP_TRUST_ALL", "1")
            .env("COLUMNS", columns.to_string())
            .arg("-w")
            .arg("ws")
            .args(args)
            .current_dir(self.root())
            .stdin(std::process::Stdio::null())
            .stdout(slave)
            .stderr(std::process::Stdio::piped());
        let child = cmd.spawn().expect("spawn");
        // The child holds the only other end: reading ends (EIO) when it exits.
        drop(cmd);
        let reader = std::thread::spawn(move || {
            let mut f = std::fs::File::from(master);
            let mut bytes = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = f.read(&mut buf) {
                if n == 0 {
                    break;
                }
                bytes.extend_from_slice(&buf[..n]);
            }
            bytes
        });
        let out = child.wait_with_output().expect("wait");
        let shown = String::from_utf8_lossy(&reader.join().unwrap()).replace('\r', "");
        (out.status.code(), shown, stderr(&out))
    }
    pub fn write(&self, rel: &str, content: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }
    pub fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }
    /// A JSON file; result.json and state.json are checked against their published schemas.
    pub fn json(&self, rel: &str) -> serde_json::Value {
        let v = serde_json::from_str(&self.read(rel)).unwrap();
        for name in ["result.json", "state.json"] {
            if rel.ends_with(&format!("/{name}")) {
                crate::schemas::check(name, &v);
            }
        }
        v
    }
    /// ws/trace.jsonl, each entry checked against the published schema.
    pub fn trace(&self) -> Vec<serde_json::Value> {
        let entries: Vec<serde_json::Value> =
            self.read("ws/trace.jsonl").lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        entries.iter().for_each(|e| crate::schemas::check("trace-entry.json", e));
        entries
    }
}

pub fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn json(status: u16, v: serde_json::Value) -> Self {
        Reply { status, headers: vec![("content-type".into(), "application/json".into())], body: v.to_string() }
    }
    pub fn text(status: u16, ctype: &str, body: &str) -> Self {
        Reply { status, headers: vec![("content-type".into(), ctype.into())], body: body.into() }
    }
    pub fn header(mut self, k: &str, v: &str) -> Self {
        self.headers.push((k.into(), v.into()));
        self
    }
}

/// A fake server on 127.0.0.1:0 serving canned replies in order (the last one repeats) or by
/// path, recording every request. Replies are written per phase: a fused Reflect-and-Plan
/// request is answered from the next two ([`fused`]), so the index a reply function is given
/// counts replies, which is the request's index only in a run that is not fused.
///
/// An assert (or any panic) inside the reply function does not vanish with the server's thread:
/// the request gets a 500 naming it, and the test fails when the server is dropped. So does a
/// server whose `expect_calls(n)` count was not met.
pub struct Server {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
    failures: Arc<Mutex<Vec<String>>>,
    expected: Option<usize>,
    _thread: std::thread::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let failures = self.failures.lock().unwrap().clone();
        assert!(failures.is_empty(), "the fake server's reply function failed: {failures:?}");
        if let Some(n) = self.expected {
            assert_eq!(self.count(), n, "the fake server expected {n} requests");
        }
    }
}

impl Server {
    pub fn start(replies: Vec<Reply>) -> Self {
        Self::start_with(move |i, _req| replies.get(i).or(replies.last()).cloned().unwrap())
    }
    pub fn start_with(f: impl Fn(usize, &Recorded) -> Reply + Send + 'static) -> Self {
        let server = tiny_http::Server::http("127.0.0.1:0").expect("bind");
        let port = server.server_addr().to_ip().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let rec = requests.clone();
        let failures = Arc::new(Mutex::new(Vec::new()));
        let failed = failures.clone();
        let thread = std::thread::spawn(move || {
            // The reply function's position: a fused request takes two of its replies.
            let mut next = 0;
            for mut req in server.incoming_requests() {
                let mut body = String::new();
                let _ = std::io::Read::read_to_string(req.as_reader(), &mut body);
                let r = Recorded {
                    method: req.method().to_string(),
                    url: req.url().to_string(),
                    headers: req.headers().iter().map(|h| (h.field.to_string(), h.value.to_string())).collect(),
                    body,
                };
                let i = {
                    let mut g = rec.lock().unwrap();
                    g.push(r.clone());
                    g.len() - 1
                };
                let reply =
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fused::serve(&f, &mut next, &r))) {
                        Ok(reply) => reply,
                        Err(p) => {
                            let msg = p
                                .downcast_ref::<String>()
                                .cloned()
                                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_else(|| "a panic".into());
                            failed.lock().unwrap().push(format!("request {i} ({} {}): {msg}", r.method, r.url));
                            Reply::text(500, "text/plain", &format!("fake server assertion failed: {msg}"))
                        }
                    };
                let mut resp = tiny_http::Response::from_string(reply.body).with_status_code(reply.status);
                for (k, v) in reply.headers {
                    resp.add_header(tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).unwrap());
                }
                let _ = req.respond(resp);
            }
        });
        Server { url: format!("http://127.0.0.1:{port}"), requests, failures, expected: None, _thread: thread }
    }
    /// Fail the test on drop unless exactly `n` requests arrived.
    pub fn expect_calls(mut self, n: usize) -> Self {
        self.expected = Some(n);
        self
    }
    pub fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
    pub fn request(&self, i: usize) -> Recorded {
        self.requests.lock().unwrap()[i].clone()
    }
}

/// A fake server's answer to a fused request (`llm.fuse_phases`, on by default: a run asks
/// Reflect's question and the next Plan's in one call, the `reflect_plan_answer` tool), made
/// from replies scripted per phase, so every fake server speaks to a fused run as it speaks to
/// an unfused one: the next reply, asked as a reflect request, is the reflect half; when it
/// decides `continue` and the following reply, asked as a plan request, is a plan answer, that
/// is the plan half. The two go back as one call of the fused tool in the reflect reply's wire
/// format (the usage is the two replies' sum, so a run's totals are an unfused run's).
mod fused {
    use super::{Recorded, Reply};
    use serde_json::{json, Value};

    const TOOL: &str = "reflect_plan_answer";

    pub fn serve(f: &dyn Fn(usize, &Recorded) -> Reply, next: &mut usize, r: &Recorded) -> Reply {
        let i = *next;
        *next += 1;
        if !r.body.contains(TOOL) {
            return f(i, r);
        }
        let reflect = f(i, &as_half(r, "reflect"));
        let Some(half) = Half::of(&reflect, "reflect_answer") else { return reflect };
        let plan = match serde_json::from_str::<Value>(&half.args) {
            // Read as a run reads it (mended: `Continue` is `continue`).
            Ok(a) if a["decision"].as_str().is_some_and(|d| d.trim().eq_ignore_ascii_case("continue")) => {
                // A reply function that has no plan reply next (it panics past its end) leaves
                // the plan to a call of its own, where its panic is reported.
                let plan_req = as_half(r, "plan");
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(*next, &plan_req)))
                    .ok()
                    .and_then(|p| Half::of(&p, "plan_answer"))
            }
            _ => None,
        };
        if plan.is_some() {
            *next += 1;
        }
        half.fused(plan)
    }

    /// The fused request as the `half` phase's own would ask (`reflect` or `plan`): the fused
    /// tool is that phase's answer tool, by name and schema, wherever the request names it.
    fn as_half(r: &Recorded, half: &str) -> Recorded {
        let tool = format!("{half}_answer");
        let body = match serde_json::from_str::<Value>(&r.body) {
            Ok(mut v) => {
                narrow(&mut v, half);
                v.to_string()
            }
            Err(_) => r.body.clone(),
        };
        Recorded { body: body.replace(TOOL, &tool), ..r.clone() }
    }

    /// Every schema given with the fused tool's name (`parameters`, `input_schema`, a
    /// `json_schema`'s `schema`) becomes the schema of its `half`.
    fn narrow(v: &mut Value, half: &str) {
        match v {
            Value::Object(m) => {
                if m.get("name").and_then(Value::as_str) == Some(TOOL) {
                    for k in ["parameters", "input_schema", "schema"] {
                        if let Some(schema) = m.get_mut(k) {
                            let part = schema.pointer(&format!("/properties/{half}")).cloned().unwrap_or(Value::Null);
                            *schema = part;
                        }
                    }
                }
                m.values_mut().for_each(|x| narrow(x, half));
            }
            Value::Array(a) => a.iter_mut().for_each(|x| narrow(x, half)),
            _ => {}
        }
    }

    /// One answer in a reply: the body, and where the arguments are (kept as the text they were
    /// sent as, so a malformed answer stays malformed inside the fused one).
    struct Half {
        reply: Reply,
        body: Value,
        args: String,
        /// Written in the message text as `<tool_call>{"name", "arguments"}</tool_call>`, as
        /// a weak local model prints its calls.
        tagged: bool,
    }

    impl Half {
        /// The answer a reply holds for `tool` (a call of it, or JSON in the text of a reply
        /// with no call); None for anything else (an error, a stream, another tool).
        fn of(reply: &Reply, tool: &str) -> Option<Half> {
            if reply.status != 200 {
                return None;
            }
            let body: Value = serde_json::from_str(&reply.body).ok()?;
            let args = if let Some(msg) = body["choices"][0]["message"].as_object() {
                match msg.get("tool_calls").and_then(Value::as_array).and_then(|c| c.first()) {
                    Some(c) if c["function"]["name"] == tool => c["function"]["arguments"].as_str()?.to_string(),
                    Some(_) => return None,
                    None => {
                        let text = msg.get("content")?.as_str()?.trim();
                        let inner = text.strip_prefix("<tool_call>").and_then(|t| t.strip_suffix("</tool_call>"));
                        if let Some(call) = inner.and_then(|t| serde_json::from_str::<Value>(t).ok()) {
                            if call["name"] != tool {
                                return None;
                            }
                            let args = &call["arguments"];
                            let args = args.as_str().map(String::from).unwrap_or_else(|| args.to_string());
                            return Some(Half { reply: reply.clone(), body, args, tagged: true });
                        }
                        serde_json::from_str::<Value>(text).ok()?;
                        text.to_string()
                    }
                }
            } else {
                let call = body["content"].as_array()?.iter().find(|c| c["type"] == "tool_use")?;
                if call["name"] != tool {
                    return None;
                }
                call["input"].to_string()
            };
            Some(Half { reply: reply.clone(), body, args, tagged: false })
        }

        /// This reply with its answer replaced by the fused one.
        fn fused(self, plan: Option<Half>) -> Reply {
            let args = match &plan {
                Some(p) => format!("{{\"reflect\":{},\"plan\":{}}}", self.args, p.args),
                None => format!("{{\"reflect\":{}}}", self.args),
            };
            let mut body = self.body;
            if let Some(msg) = body.pointer_mut("/choices/0/message").and_then(Value::as_object_mut) {
                match msg.get_mut("tool_calls").and_then(Value::as_array_mut).and_then(|c| c.first_mut()) {
                    Some(c) => {
                        c["function"]["name"] = json!(TOOL);
                        c["function"]["arguments"] = json!(args);
                    }
                    None if self.tagged => {
                        let call = format!("{{\"name\":\"{TOOL}\",\"arguments\":{args}}}");
                        msg.insert("content".into(), json!(format!("<tool_call>\n{call}\n</tool_call>")));
                    }
                    None => {
                        msg.insert("content".into(), json!(args));
                    }
                }
            } else if let Some(c) = body
                .get_mut("content")
                .and_then(Value::as_array_mut)
                .and_then(|c| c.iter_mut().find(|c| c["type"] == "tool_use"))
            {
                c["name"] = json!(TOOL);
                c["input"] = serde_json::from_str(&args).unwrap_or(Value::Null);
            }
            if let (Some(p), Some(usage)) = (plan, body.get_mut("usage")) {
                add(usage, &p.body["usage"]);
            }
            Reply { body: body.to_string(), ..self.reply }
        }
    }

    /// Adds the numbers of `more` into `into`, field by field.
    fn add(into: &mut Value, more: &Value) {
        match (into, more) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    add(a.entry(k.clone()).or_insert(json!(0)), v);
                }
            }
            (a @ Value::Number(_), Value::Number(b)) => {
                if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
                    *a = json!(x + y);
                }
            }
            _ => {}
        }
    }
}

/// The bundled demo's files, copied into the temp folder.
pub fn demo_files(t: &T) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/critique");
    for f in ["article.md", "context.md", "agentloop.yaml", "script.yaml"] {
        t.write(&format!("examples/critique/{f}"), &std::fs::read_to_string(src.join(f)).unwrap());
    }
}

/// Compares with a golden file under tests/golden/, or rewrites it when UPDATE_GOLDEN=1.
pub fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected =
        std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("missing golden {name}; run with UPDATE_GOLDEN=1"));
    assert_eq!(actual, expected, "golden {name} differs (UPDATE_GOLDEN=1 rewrites it)");
}

/// A script whose one step fetches `url`/slow (so a run lasts as long as the server takes).
pub fn slow_script(url: &str) -> String {
    format!(
        r#"frame:
  - answer: {{goal: g, definition_of_done: [fetched, read, noted], can_proceed: true}}
plan:
  - answer: {{next_action: {{tool: http_call, args: {{method: GET, url: "{url}/slow"}}}}}}
reflect:
  - answer: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}, {{item: 3, steps: [1]}}], decision: done, reason: fetched, outcome: fetched the slow answer}}
"#
    )
}

/// A run that reads notes.txt, learns one fact and finishes.
pub fn daily_script(fact: &str) -> String {
    format!(
        r#"frame:
  - answer: {{goal: digest, definition_of_done: [notes read, digest written, facts noted], can_proceed: true}}
plan:
  - answer: {{next_action: {{tool: file_read, args: {{path: notes.txt}}}}}}
reflect:
  - answer: {{satisfied: [{{item: 1, steps: [1]}}, {{item: 2, steps: [1]}}, {{item: 3, steps: [1]}}], facts: ["{fact}"], decision: done, reason: all good, outcome: "digest of {fact}"}}
"#
    )
}

/// How a fake OpenAI-compatible server's chat template treats a request (`models test`'s
/// probes): which messages it drops, and whether its "model" reports the colour it was asked for.
#[derive(Clone, Copy, Default)]
pub struct Template {
    pub drops_tool: bool,
    pub drops_system: bool,
    pub wrong_value: bool,
}

impl Template {
    /// The prompt this template renders from a request body: every message's content but those
    /// it drops, and the tools' schemas.
    pub fn render(&self, body: &serde_json::Value) -> String {
        let mut out = body["tools"].to_string();
        for m in body["messages"].as_array().into_iter().flatten() {
            let role = m["role"].as_str().unwrap_or("");
            if (role == "tool" && self.drops_tool) || (role == "system" && self.drops_system) {
                continue;
            }
            out.push_str(m["content"].as_str().unwrap_or(""));
        }
        out
    }
    /// What a model that follows the prompt reports: the word a probe hid where it sees it,
    /// else the colour the request names; and the prompt tokens (four bytes a token).
    pub fn answer(&self, body: &serde_json::Value) -> (String, u64) {
        let prompt = self.render(body);
        let color = ["periwinkle", "vermilion"]
            .into_iter()
            .find(|w| prompt.contains(w))
            .unwrap_or(if prompt.contains("\"blue\"") && !self.wrong_value { "blue" } else { "default" });
        (color.to_string(), prompt.len() as u64 / 4)
    }
}

/// stdout as JSON, or a panic showing what was printed instead.
pub fn json_out(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}{}", stdout(o), stderr(o)))
}

/// The answer tool a request to a fake model forces: OpenAI's `tool_choice.function.name`,
/// Anthropic's `tool_choice.name`, else the first tool offered (either format), else the
/// schema of a `response_format` answer; "" when there is none.
pub fn forced_tool(body: &serde_json::Value) -> String {
    let choice = &body["tool_choice"];
    choice["function"]["name"]
        .as_str()
        .or(choice["name"].as_str())
        .or(body["tools"][0]["function"]["name"].as_str())
        .or(body["tools"][0]["name"].as_str())
        .or(body["response_format"]["json_schema"]["name"].as_str())
        .unwrap_or("")
        .to_string()
}

/// A script that frames twice and then fails the same way eight times over (files that are not
/// there): frustration builds, the forced reframe does not resolve it, and the run escalates.
pub fn frustrating_script() -> String {
    let mut s = String::from("frame:\n  - answer: {goal: g, definition_of_done: [a, b, c]}\n");
    s.push_str("  - answer: {goal: g2, definition_of_done: [a, b, c]}\n");
    s.push_str("plan:\n");
    for i in 0..8 {
        s.push_str(&format!("  - answer: {{next_action: {{tool: file_read, args: {{path: gone{i}.txt}}}}}}\n"));
    }
    s.push_str("reflect:\n");
    for _ in 0..8 {
        s.push_str("  - answer: {decision: continue, reason: try another}\n");
    }
    s
}

/// The insta settings every whole-output snapshot is checked with (tests/it/snapshots.rs): what
/// differs between machines, checkouts or builds is redacted, so a `.snap` file holds only what a
/// change to agentloop's output would change. The clock is frozen ([`NOW`]), so most times are
/// fixed already; they are redacted all the same, so a snapshot does not pin the test clock.
pub fn snapshot_settings(t: &T) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    // Paths: the test's temp folder (as given and as resolved) and the source checkout.
    let root = t.root().to_string_lossy().into_owned();
    let real = std::fs::canonicalize(t.root()).map(|p| p.to_string_lossy().into_owned()).unwrap_or(root.clone());
    for p in [real, root] {
        s.add_filter(&regex::escape(&p), "[TMP]");
    }
    s.add_filter(&regex::escape(env!("CARGO_MANIFEST_DIR")), "[REPO]");
    // Run ids (ULIDs; lower case inside memory ids).
    s.add_filter(r"(?i)\b[0-9a-hjkmnp-tv-z]{26}\b", "[RUN_ID]");
    // Timestamps, and the clock as tables show it (date and minute; time of day). A bare date is
    // kept: it is a slot or a file name the test chose.
    s.add_filter(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", "[TIMESTAMP]");
    s.add_filter(r"\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}\b", "[DATETIME]");
    s.add_filter(r"\b\d{2}:\d{2}:\d{2}\b", "[TIME]");
    // Durations measured in milliseconds, as text and as JSON fields.
    s.add_filter(r"\b\d+(\.\d+)?ms\b", "[MS]");
    s.add_filter(r#""(\w+_ms)":( ?)\d+"#, "\"$1\":$2\"[MS]\"");
    // The build's version, byte sizes shown in units, process ids and the ports of local servers.
    s.add_filter(&format!(r"\b{}\b", regex::escape(env!("CARGO_PKG_VERSION"))), "[VERSION]");
    s.add_filter(r"\b\d+(\.\d+)? ?(B|KB|KiB|MB|MiB|GB|GiB)\b", "[SIZE]");
    s.add_filter(r"\bpid:? \d+", "pid [PID]");
    s.add_filter(r"127\.0\.0\.1:\d+", "127.0.0.1:[PORT]");
    s
}
