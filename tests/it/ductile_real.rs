//! agentloop under the real Ductile (`make test-ductile`; `.ci/run` builds it with
//! ../shared/ductile/install.sh): the walk of docs/EVENT-MODE.md ("Under Ductile, from zero to a
//! finished run") with its config block as written and the shipped `ductile/` folder, Ductile on a
//! free 127.0.0.1 port, a fake Anthropic API that records every prompt and a local page server for
//! Ductile's `fetch`. Ductile is found at `DUCTILE_BIN` or
//! `${XDG_CACHE_HOME:-$HOME/.cache}/agentloop-ductile/bin/ductile` (its bundled plugins at
//! `DUCTILE_PLUGINS` or `../src/plugins` beside its `bin/`); without it each test says so and
//! returns, and under CI fails.

use crate::common::*;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most any one wait of these tests takes (each test stays well under a minute).
const DEADLINE: Duration = Duration::from_secs(45);
const ADMIN: &str = "test-admin-token";
const PAGE_TEXT: &str = "Ductile routed this page to the agent";

/// Where the built Ductile and its bundled plugins are; None (said, or a failure under CI) without them.
fn ductile() -> Option<(PathBuf, PathBuf)> {
    let bin = std::env::var_os("DUCTILE_BIN").map(PathBuf::from).unwrap_or_else(|| {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache"));
        cache.join("agentloop-ductile/bin/ductile")
    });
    if !bin.is_file() {
        missing(&format!(
            "no Ductile at {} (build it with ../shared/ductile/install.sh or set DUCTILE_BIN)",
            bin.display()
        ));
        return None;
    }
    let plugins = std::env::var_os("DUCTILE_PLUGINS")
        .map(PathBuf::from)
        .unwrap_or_else(|| bin.parent().and_then(Path::parent).unwrap_or(Path::new("/")).join("src/plugins"));
    if !plugins.join("fetch/manifest.yaml").is_file() {
        missing(&format!("Ductile's bundled plugins are not at {} (set DUCTILE_PLUGINS)", plugins.display()));
        return None;
    }
    Some((bin, plugins))
}

fn repo(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

/// The block of docs/EVENT-MODE.md whose first line is `first`.
fn doc_block(first: &str) -> String {
    let doc = repo("docs/EVENT-MODE.md");
    let start = doc.find(first).unwrap_or_else(|| panic!("EVENT-MODE.md has no block starting `{first}`"));
    let body = &doc[start..];
    body[..body.find("```").unwrap()].to_string()
}

/// A fake Anthropic API answering each phase from its own list, in order (the last repeats),
/// recording every request.
fn model(frame: Value, plans: Vec<Value>, reflects: Vec<Value>) -> Server {
    let seen: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    Server::start_with(move |i, req| {
        let body = req.json();
        let tool = body["tool_choice"]["name"].as_str().unwrap_or("").to_string();
        let n = {
            let mut s = seen.lock().unwrap();
            let n = s.entry(tool.clone()).or_default();
            *n += 1;
            *n - 1
        };
        let pick = |l: &Vec<Value>| l.get(n).or(l.last()).cloned().unwrap();
        let input = match tool.as_str() {
            "frame_answer" => frame.clone(),
            "plan_answer" => pick(&plans),
            "reflect_answer" => pick(&reflects),
            other => panic!("the fake model has no answer for `{other}`"),
        };
        Reply::json(
            200,
            json!({"id": format!("msg_{i}"), "type": "message", "role": "assistant", "model": body["model"],
            "content": [{"type": "tool_use", "id": format!("tu_{i}"), "name": tool, "input": input}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}}),
        )
    })
}

/// A model server that hands each request to `inner` and returns its answer, first waiting
/// `delay(i)` for the request numbered `i` (from 0).
fn delayed(inner: &Server, delay: impl Fn(usize) -> Duration + Send + Sync + 'static) -> Server {
    forwarding(inner, move |i| {
        std::thread::sleep(delay(i));
        None
    })
}

/// A model server that answers the request numbered `i` with `first(i)` when it gives one, else
/// hands it to `inner` and returns its answer.
fn forwarding(inner: &Server, first: impl Fn(usize) -> Option<Reply> + Send + Sync + 'static) -> Server {
    let inner_url = inner.url.clone();
    Server::start_with(move |i, req| {
        if let Some(reply) = first(i) {
            return reply;
        }
        let resp = ureq::post(&format!("{inner_url}{}", req.url))
            .header("content-type", "application/json")
            .send(req.body.as_bytes())
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap();
        Reply::json(200, serde_json::from_str(&resp).unwrap())
    })
}

fn plan(tool: &str, args: Value) -> Value {
    json!({"next_action": {"tool": tool, "args": args}, "expected_outcome": "it works", "rationale": "the next item"})
}

fn page_server() -> Server {
    Server::start(vec![Reply::text(
        200,
        "text/html",
        &format!("<html><head><title>T</title></head><body><p>{PAGE_TEXT}.</p></body></html>"),
    )])
}

/// Everything a prompt sent to the fake model says.
fn prompts(m: &Server) -> String {
    (0..m.count()).map(|i| m.request(i).body).collect::<Vec<_>>().join("\n")
}

/// A Ductile gateway of the test's own, set up as EVENT-MODE.md walks it (killed when dropped).
struct Gateway {
    child: Child,
    bin: PathBuf,
    port: u16,
    dir: PathBuf,
    root: PathBuf,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("ductile log:\n{}", std::fs::read_to_string(self.dir.join("ductile.log")).unwrap_or_default());
        }
    }
}

impl Gateway {
    /// Steps 1-3 of the walk: the plugin folder and root from `ductile/`, `agentloop trust`, the
    /// doc's config (its paths and port made the test's, `extra` appended), `ductile system start`.
    fn start(t: &T, model: &Server, extra: &str) -> Option<Gateway> {
        Self::start_tuned(t, model, |c| format!("{c}{extra}"), |r| r)
    }

    /// `start` with the doc's Ductile config and the shipped root config each passed through an
    /// edit first (shorter timeouts, retries, parallelism for a test that needs them).
    fn start_tuned(
        t: &T,
        model: &Server,
        edit_config: impl Fn(String) -> String,
        edit_root: impl Fn(String) -> String,
    ) -> Option<Gateway> {
        let (bin, bundled) = ductile()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = t.path("ductile");
        let plugin = dir.join("plugins/agentloop");
        std::fs::create_dir_all(&plugin).unwrap();
        std::fs::create_dir_all(t.path("notes")).unwrap();
        for f in ["manifest.yaml", "run.sh", "pipelines.yaml"] {
            std::fs::write(plugin.join(f), repo(&format!("ductile/{f}"))).unwrap();
        }
        let run_sh = plugin.join("run.sh");
        std::fs::set_permissions(&run_sh, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        // The root, where run.sh looks by default (HOME is the test's).
        let root = t.path("home/.local/share/agentloop/ductile");
        std::fs::create_dir_all(&root).unwrap();
        let shipped = repo("ductile/agentloop.yaml")
            .replace("http://localhost:8080", &format!("http://localhost:{port}"))
            .replace(
                "llm: {provider: anthropic, model: claude-sonnet-4-5-20250929}",
                &format!("llm: {{provider: anthropic, model: claude-sonnet-4-5-20250929, base_url: '{}', structured: tools}}", model.url),
            );
        assert!(shipped.contains("base_url"), "ductile/agentloop.yaml's llm line changed");
        std::fs::write(root.join("agentloop.yaml"), edit_root(shipped)).unwrap();
        let out = t.untrusted().arg("trust").arg(&root).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "agentloop trust: {}", stderr(&out));
        let notes = t.path("notes");
        let config = doc_block("# ~/ductile/config.yaml")
            .replace("127.0.0.1:8080", &format!("127.0.0.1:{port}"))
            .replace("/opt/ductile/plugins", bundled.to_str().unwrap())
            .replace("/home/me/notes", notes.to_str().unwrap());
        std::fs::write(dir.join("config.yaml"), edit_config(config)).unwrap();
        let log = std::fs::File::create(dir.join("ductile.log")).unwrap();
        let child = Command::new(&bin)
            .args(["system", "start", "--config", "config.yaml"])
            .current_dir(&dir)
            .env_clear()
            .envs(Self::env(t, port))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start ductile");
        let g = Gateway { child, bin, port, dir, root };
        let started = Instant::now();
        while ureq::get(&format!("{}/healthz", g.url())).call().is_err() {
            assert!(started.elapsed() < DEADLINE, "Ductile did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(g)
    }

    /// The environment of step 3: agentloop on PATH, the tokens, the model's key.
    fn env(t: &T, port: u16) -> Vec<(String, String)> {
        let al = assert_cmd::cargo::cargo_bin("agentloop");
        let path = format!("{}:{}", al.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
        [
            ("PATH", path),
            ("HOME", t.path("home").display().to_string()),
            ("XDG_CONFIG_HOME", t.path("xdg").display().to_string()),
            ("XDG_CACHE_HOME", t.path("cache").display().to_string()),
            ("PORT", port.to_string()),
            ("DUCTILE_TOKEN_ADMIN", ADMIN.into()),
            ("DUCTILE_AGENT_TOKEN", ADMIN.into()),
            ("DUCTILE_API_KEY", ADMIN.into()),
            ("ANTHROPIC_API_KEY", "sk-ant-test".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Kills Ductile as a crash would (SIGKILL: its plugins' turns go on, their answers lost).
    fn crash(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts Ductile again on the same config, database and port.
    fn restart(&mut self, t: &T) {
        let log = std::fs::OpenOptions::new().append(true).open(self.dir.join("ductile.log")).unwrap();
        self.child = Command::new(&self.bin)
            .args(["system", "start", "--config", "config.yaml"])
            .current_dir(&self.dir)
            .env_clear()
            .envs(Self::env(t, self.port))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start ductile again");
        let started = Instant::now();
        while ureq::get(&format!("{}/healthz", self.url())).call().is_err() {
            assert!(started.elapsed() < DEADLINE, "Ductile did not start again");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn cli(&self, t: &T, args: &[&str]) -> String {
        let out = Command::new(&self.bin)
            .args(args)
            .current_dir(&self.dir)
            .env_clear()
            .envs(Self::env(t, self.port))
            .output()
            .unwrap();
        assert!(out.status.success(), "ductile {args:?}: {}{}", stdout(&out), stderr(&out));
        stdout(&out)
    }

    /// `ductile plugin run ... agentloop` as the walk gives it: the queued job's id.
    fn start_goal(&self, t: &T, goal: &str) -> String {
        let url = self.url();
        let payload = json!({"goal": goal}).to_string();
        let out = self
            .cli(t, &["plugin", "run", "--api-url", &url, "--command", "handle", "--payload", &payload, "agentloop"]);
        out.split_whitespace()
            .nth(2)
            .filter(|_| out.starts_with("Queued job"))
            .unwrap_or_else(|| panic!("{out}"))
            .to_string()
    }

    fn jobs(&self) -> Vec<Value> {
        let body = ureq::get(&format!("{}/jobs?limit=200", self.url()))
            .header("Authorization", &format!("Bearer {ADMIN}"))
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        v["jobs"].as_array().cloned().unwrap_or_default()
    }

    /// The one run under the root, once it has ended, and every job Ductile ran once none is
    /// queued or running.
    fn finished_run(&self) -> (Value, Vec<Value>) {
        let (mut runs, jobs) = self.finished_runs(1);
        (runs.remove(0), jobs)
    }

    /// Every run's state.json under the root (run folders without one yet count as running).
    fn runs(&self) -> Vec<Value> {
        let Ok(dir) = std::fs::read_dir(self.root.join("runs")) else { return Vec::new() };
        dir.filter_map(|e| {
            let s = std::fs::read_to_string(e.ok()?.path().join("state.json")).unwrap_or_default();
            Some(serde_json::from_str::<Value>(&s).unwrap_or_else(|_| json!({"status": "running"})))
        })
        .collect()
    }

    /// The `n` runs under the root once each has ended (sorted by run id), and every job Ductile
    /// ran once none is queued or running; more runs than `n` fail at once.
    fn finished_runs(&self, n: usize) -> (Vec<Value>, Vec<Value>) {
        let started = Instant::now();
        loop {
            let mut runs = self.runs();
            assert!(runs.len() <= n, "{} runs where {n} were started: {runs:#}", runs.len(), runs = json!(runs));
            let jobs = self.jobs();
            let idle = jobs.iter().all(|j| !matches!(j["status"].as_str(), Some("queued" | "running")));
            if runs.len() == n && idle && runs.iter().all(|s| s["status"] != "running") {
                runs.sort_by_key(|s| s["run_id"].as_str().unwrap_or("").to_string());
                return (runs, jobs);
            }
            assert!(started.elapsed() < DEADLINE, "the runs did not end: {:#}; jobs: {jobs:#?}", json!(runs));
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The job Ductile ran under `id` as `GET /jobs` lists it (status, attempt).
    fn job(&self, id: &str) -> Value {
        self.jobs().into_iter().find(|j| j["job_id"] == id).unwrap_or_else(|| panic!("no job {id}"))
    }

    /// agentloop's plugin_state as Ductile holds it, read with the query its docs/DATABASE.md
    /// gives (`SELECT state FROM plugin_state WHERE plugin_name = ...`) through Python's sqlite3.
    fn plugin_state(&self) -> Option<Value> {
        let db = self.dir.join("ductile.db");
        let script = "import sqlite3,sys\nc=sqlite3.connect('file:'+sys.argv[1]+'?mode=ro',uri=True)\nprint(c.execute(\"SELECT state FROM plugin_state WHERE plugin_name='agentloop'\").fetchone()[0])";
        let out = match Command::new("python3").arg("-c").arg(script).arg(&db).output() {
            Ok(out) => out,
            Err(e) => {
                missing(&format!("python3 (to read Ductile's plugin_state): {e}"));
                return None;
            }
        };
        assert!(out.status.success(), "reading plugin_state from {}: {}", db.display(), stderr(&out));
        Some(serde_json::from_str(&stdout(&out)).unwrap())
    }
}

fn frame() -> Value {
    json!({"goal": "note a page", "definition_of_done": ["page fetched", "note written", "nothing else changed"], "can_proceed": true})
}

fn succeeded(jobs: &[Value]) {
    for j in jobs {
        assert_eq!(j["status"], "succeeded", "every job of the run succeeds: {jobs:#?}");
    }
}

#[test]
fn a_run_fetches_a_page_and_writes_a_note_through_ductiles_own_plugins() {
    let t = T::new();
    let page = page_server();
    let note = t.path("notes/page.md");
    let m = model(
        frame(),
        vec![
            plan("web_fetch", json!({"url": format!("{}/article", page.url)})),
            plan(
                "file_handler",
                json!({"action": "write", "content": "# The note\nwritten by the agent", "output_path": note.to_str().unwrap()}),
            ),
        ],
        vec![
            json!({"satisfied": [{"item": 1, "steps": [1]}], "decision": "continue", "reason": "fetched"}),
            json!({"satisfied": [{"item": 2, "steps": [2]}, {"item": 3, "steps": [2]}], "decision": "done", "reason": "all met", "outcome": "the note is written", "artifacts": []}),
        ],
    );
    let Some(g) = Gateway::start(&t, &m, "") else { return };
    let job = g.start_goal(&t, "Fetch the page and write a note on it");
    let (state, jobs) = g.finished_run();
    assert_eq!(state["status"], "done", "{state:#}");
    succeeded(&jobs);
    // Two tool pipelines (fetch → agentloop, file_handler → agentloop) after the start: the
    // resume jobs got the run from the pipeline's baggage, across pipelines (max_depth 0).
    let plugins: Vec<&str> = jobs.iter().filter_map(|j| j["plugin"].as_str()).collect();
    for p in ["fetch", "file_handler"] {
        assert_eq!(plugins.iter().filter(|x| **x == p).count(), 1, "{plugins:?}");
    }
    // Three turns (the walk's `poll` schedule adds a sweep of its own at Ductile's start).
    let turns = jobs.iter().filter(|j| j["plugin"] == "agentloop" && j["command"] == "handle").count();
    assert_eq!(turns, 3, "{plugins:?}");
    // The page, as the fetch plugin gave it, reached the model; Ductile's control keys did not.
    let said = prompts(&m);
    assert!(said.contains(PAGE_TEXT), "the page is in a prompt");
    for key in ["ductile_pipeline", "ductile_upstream", "ductile_route_depth", "ductile_plugin"] {
        assert!(!said.contains(key), "`{key}` reached the model");
    }
    // file_handler wrote the content it was given, not agentloop's one-line summary.
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "# The note\nwritten by the agent");
    // The walk's last steps: the start job as `ductile job inspect` shows it, the run as `runs` does.
    let inspect = g.cli(&t, &["job", "inspect", "--config", "config.yaml", &job]);
    assert!(inspect.contains("succeeded"), "{inspect}");
    let out = t.untrusted().arg("-w").arg(&g.root).arg("runs").output().unwrap();
    assert!(stdout(&out).contains("done"), "{}{}", stdout(&out), stderr(&out));
    // Ductile reads the shipped manifest's input schema as the JSON Schema it is: `system skills`
    // prints it as JSON (a compact `field: type` map with a schema inside printed Go's `map[...]`).
    let skills = g.cli(&t, &["system", "skills", "--config", "config.yaml"]);
    let line = skills.lines().find(|l| l.starts_with("- agentloop.handle ")).unwrap_or_else(|| panic!("{skills}"));
    let quoted = &line[line.find(" in=").unwrap_or_else(|| panic!("{line}")) + 4..line.find(" d=").unwrap()];
    let schema: Value = serde_json::from_str(&serde_json::from_str::<String>(quoted).unwrap()).unwrap();
    assert_eq!(schema["properties"]["result"]["type"], json!(["string", "object"]), "{line}");
    assert_eq!(schema["properties"]["goal"]["type"], "string", "{line}");
    assert!(!skills.contains("map["), "{skills}");
}

#[test]
fn a_root_that_trusts_request_config_runs_on_the_operators_plugin_block_alone() {
    let t = T::new();
    let page = page_server();
    let m = model(
        frame(),
        vec![plan("web_fetch", json!({"url": page.url}))],
        vec![
            json!({"satisfied": [{"item": 1, "steps": [1]}, {"item": 2, "steps": [1]}, {"item": 3, "steps": [1]}], "decision": "done", "reason": "met", "outcome": "the page says hello", "artifacts": []}),
        ],
    );
    // The root repeats none of the plugin's `config:` block (budgets, provider, model, gateway,
    // token): it only says the block is the operator's own.
    let bare = |root: String| {
        let kept: String = root
            .lines()
            .filter(|l| {
                !["#", "max_steps:", "max_reframes:", "ductile:", "  api_url:", "  api_token_env:"]
                    .iter()
                    .any(|k| l.starts_with(k))
            })
            .map(|l| format!("{}\n", l.replace("provider: anthropic, model: claude-sonnet-4-5-20250929, ", "")))
            .collect();
        assert!(!kept.contains("claude") && !kept.contains("api_url") && !kept.contains("max_steps"), "{kept}");
        format!("{kept}handle: {{trust_request_config: true}}\n")
    };
    // The block's list with a typo, taken as written: the entry that names no tool is a warning
    // Ductile keeps with the job, and the run goes on with the tools the others name.
    let typo = |c: String| {
        let c = c
            .replace("allowed_plugins: [web_fetch, file_handler]", "allowed_plugins: [web_fetch, file_handler, fecth]");
        assert!(c.contains("fecth]"), "the walk's allowed_plugins changed");
        c
    };
    let Some(g) = Gateway::start_tuned(&t, &m, typo, bare) else { return };
    g.start_goal(&t, "Fetch the page");
    let (state, jobs) = g.finished_run();
    assert_eq!(state["status"], "done", "{state:#}");
    succeeded(&jobs);
    let logs =
        g.cli(&t, &["job", "logs", "--config", "config.yaml", "--plugin", "agentloop", "--query", "names no tool"]);
    assert!(logs.contains("`fecth` names no tool"), "{logs}");
    // The block's model and budgets ran the run.
    assert_eq!(m.request(0).json()["model"], "claude-sonnet-4-5-20250929");
    assert_eq!(state["limits"]["max_steps"], 20, "{state:#}");
}

#[test]
fn a_pipeline_on_agent_completed_gets_the_outcome() {
    let t = T::new();
    let page = page_server();
    let m = model(
        frame(),
        vec![plan("web_fetch", json!({"url": page.url}))],
        vec![
            json!({"satisfied": [{"item": 1, "steps": [1]}, {"item": 2, "steps": [1]}, {"item": 3, "steps": [1]}], "decision": "done", "reason": "met", "outcome": "the page says hello", "artifacts": []}),
        ],
    );
    // The doc's downstream example, its path the test's.
    let downstream = doc_block("pipelines:\n  - name: agentloop-done-note")
        .replace("/home/me/notes", t.path("notes").to_str().unwrap());
    let Some(g) = Gateway::start(&t, &m, &downstream) else { return };
    g.start_goal(&t, "Fetch the page");
    let (state, jobs) = g.finished_run();
    assert_eq!(state["status"], "done", "{state:#}");
    succeeded(&jobs);
    // file_handler, run by Ductile on agentloop's `agent.completed`, wrote the event's outcome
    // itself, not agentloop's one-line summary of the turn.
    assert_eq!(std::fs::read_to_string(t.path("notes/last-outcome.md")).unwrap(), "the page says hello");
    let plugins: Vec<&str> = jobs.iter().filter_map(|j| j["plugin"].as_str()).collect();
    assert_eq!(plugins.iter().filter(|x| **x == "file_handler").count(), 1, "{plugins:?}");
}

#[test]
fn run_calls_ductiles_fetch_plugin_as_a_tool_and_reads_the_page() {
    let t = T::new();
    let page = page_server();
    let m = model(
        frame(),
        vec![plan("fetch__handle", json!({"url": page.url}))],
        vec![
            json!({"satisfied": [{"item": 1, "steps": [1]}, {"item": 2, "steps": [1]}, {"item": 3, "steps": [1]}], "decision": "done", "reason": "met", "outcome": "read", "artifacts": []}),
        ],
    );
    let Some(g) = Gateway::start(&t, &m, "") else { return };
    t.write(
        "ws/agentloop.yaml",
        &format!(
            "llm: {{provider: anthropic, model: m, base_url: '{}', structured: tools}}\nductile: {{api_url: '{}', api_token_env: DUCTILE_AGENT_TOKEN, plugins: [fetch, file_handler], poll_interval: 200ms}}\n",
            m.url,
            g.url()
        ),
    );
    // The gateway's commands as tools: not file_handler's `poll`, a scheduler tick, nor `health`.
    let out = t.al(&["tools", "list"]).env("DUCTILE_AGENT_TOKEN", ADMIN).output().unwrap();
    let list = stdout(&out);
    assert!(list.contains("fetch__handle") && list.contains("file_handler__handle"), "{list}{}", stderr(&out));
    for tick in ["file_handler__poll", "fetch__health", "file_handler__health"] {
        assert!(!list.contains(tick), "`{tick}` is offered as a tool: {list}");
    }
    // The list a plugin block writes names the plugin: its commands are the run's tools.
    let cfg = t.read("ws/agentloop.yaml");
    t.write("ws/agentloop.yaml", &format!("{cfg}allowed_plugins: [fetch]\n"));
    let out = t
        .al(&["run", "--goal", "Read the page"])
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("DUCTILE_AGENT_TOKEN", ADMIN)
        .timeout(DEADLINE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(!stderr(&out).contains("names no tool"), "{}", stderr(&out));
    let said = prompts(&m);
    assert!(said.contains(PAGE_TEXT), "the fetched page (events[0].payload.content) is in a prompt");
    assert!(!said.contains("file_handler__handle"), "the list left file_handler out");
    assert!(!said.contains("ductile_"), "Ductile's control keys reached the model");
    let jobs = g.jobs();
    assert!(jobs.iter().any(|j| j["plugin"] == "fetch" && j["status"] == "succeeded"), "{jobs:#?}");
}

/// Ductile's config of the walk with its scheduler ticking every second and the walk's `poll`
/// sweep (docs/EVENT-MODE.md, "Runs never hang") on that schedule, its grace short.
fn sweeping(config: String) -> String {
    let c = config
        .replace("service: {name: ductile}", "service: {name: ductile, tick_interval: 1s}")
        .replace("      - {id: sweep, command: poll, every: 5m}", "      - {id: sweep, command: poll, every: 1s}")
        .replace(
            "      allowed_plugins: [web_fetch, file_handler]\n",
            "      allowed_plugins: [web_fetch, file_handler]\n      handle: {pending_grace: 1s}\n",
        );
    assert!(
        c.contains("tick_interval") && c.contains("every: 1s}") && c.contains("pending_grace"),
        "the walk's config changed: {c}"
    );
    c
}

/// A root config whose tools time out after a second (so a sweep finds a step overdue soon).
fn short_tools(root: String) -> String {
    assert!(root.contains("\ntools:\n"), "ductile/agentloop.yaml has no tools block");
    root.replace("\ntools:\n", "\ntools:\n  timeout: 1s\n")
}

#[test]
fn a_tool_that_keeps_failing_is_retried_by_the_poll_sweep_and_the_run_escalates() {
    let t = T::new();
    let broken = Server::start(vec![Reply::text(500, "text/plain", "the page is broken")]);
    let m = model(
        frame(),
        vec![plan("web_fetch", json!({"url": format!("{}/article", broken.url)}))],
        vec![json!({"satisfied": [], "decision": "continue", "reason": "no page yet"})],
    );
    // fetch answers an HTTP 500 with `status: error`: Ductile retries it, then the job has failed
    // and no event reaches agentloop. A routed job gets Ductile's 4 attempts whatever the plugin's
    // `retry: {max_attempts}` says (EVENT-MODE.md, "Provider outages"); its `backoff_base` spaces
    // them. Ductile routes the escalation to a note.
    let escalated = t.path("notes/escalated.md");
    let edit = |c: String| {
        let c = sweeping(c).replace(
            "  fetch:\n    enabled: true\n",
            "  fetch:\n    enabled: true\n    retry: {max_attempts: 2, backoff_base: 1s}\n",
        );
        assert!(c.contains("max_attempts: 2"), "the walk's fetch entry changed");
        format!(
            "{c}\npipelines:\n  - name: agentloop-escalated-note\n    on: agent.escalated\n    steps:\n      - uses: file_handler\n        with: {{action: write, content: \"{{payload.reason}}\", output_path: {}}}\n",
            escalated.display()
        )
    };
    let Some(g) = Gateway::start_tuned(&t, &m, edit, short_tools) else { return };
    g.start_goal(&t, "Fetch the broken page");
    let started = Instant::now();
    while !escalated.exists() {
        assert!(
            started.elapsed() < DEADLINE,
            "no agent.escalated was routed; runs {:#}; jobs {:#?}",
            json!(g.runs()),
            g.jobs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (state, jobs) = g.finished_run();
    assert_eq!(state["status"], "escalated", "{state:#}");
    // Three requests of the step (the first and handle.tool_retries = 2 more), each a fetch job
    // Ductile retried and gave up on; every re-request came from a `poll` job.
    let fetches: Vec<&Value> = jobs.iter().filter(|j| j["plugin"] == "fetch").collect();
    assert_eq!(fetches.len(), 3, "{fetches:#?}");
    for f in &fetches {
        assert!(matches!(f["status"].as_str(), Some("dead" | "failed")), "{f:#}");
        assert_eq!(f["attempt"], 4, "4 attempts, not fetch's `max_attempts: 2`: {f:#}");
    }
    assert_eq!(broken.count(), 12, "each fetch attempt reached the page");
    let run = state["run_id"].as_str().unwrap();
    let trace = std::fs::read_to_string(g.root.join("runs").join(run).join("trace.jsonl")).unwrap();
    assert_eq!(trace.matches("\"event\":\"act.retry\"").count(), 2, "{trace}");
    assert!(trace.contains("no result for step 1 from tool `web_fetch`"), "{trace}");
    let note = std::fs::read_to_string(&escalated).unwrap();
    assert!(note.starts_with("tool `web_fetch` failed at step 1 and its 2 retries are spent"), "{note}");
    assert!(jobs.iter().any(|j| j["command"] == "poll" && j["status"] == "succeeded"), "{jobs:#?}");
}

#[test]
fn a_turn_ductile_times_out_is_retried_into_the_same_run() {
    let t = T::new();
    let page = page_server();
    let inner = model(
        frame(),
        vec![plan("web_fetch", json!({"url": page.url}))],
        vec![
            json!({"satisfied": [{"item": 1, "steps": [1]}, {"item": 2, "steps": [1]}, {"item": 3, "steps": [1]}], "decision": "done", "reason": "met", "outcome": "read", "artifacts": []}),
        ],
    );
    // The first model call takes longer than Ductile's handle timeout; the rest answer at once.
    let slow = delayed(&inner, |i| Duration::from_secs(if i == 0 { 5 } else { 0 }));
    let edit = |c: String| {
        let c =
            c.replace("    timeouts: {handle: 10m}\n", "    timeouts: {handle: 3s}\n    retry: {backoff_base: 1s}\n");
        assert!(c.contains("handle: 3s"), "the walk's agentloop entry changed");
        c
    };
    let Some(g) = Gateway::start_tuned(&t, &slow, edit, |r| r) else { return };
    let job = g.start_goal(&t, "Fetch the page");
    let (runs, _) = g.finished_runs(1);
    assert_eq!(runs[0]["status"], "done", "{:#}", runs[0]);
    let start = g.job(&job);
    assert_eq!(start["status"], "succeeded", "{start:#}");
    assert_eq!(start["attempt"], 2, "Ductile timed out the first attempt and retried: {start:#}");
    // The killed turn's frame call and the retried turn's.
    assert_eq!(slow.request(0).body, slow.request(1).body, "the retry framed the same start again");
}

#[test]
fn four_runs_at_once_under_parallelism_4_all_finish_and_plugin_state_agrees() {
    let t = T::new();
    let page = page_server();
    let m = model(
        frame(),
        vec![plan("web_fetch", json!({"url": page.url}))],
        vec![
            json!({"satisfied": [{"item": 1, "steps": [1]}, {"item": 2, "steps": [1]}, {"item": 3, "steps": [1]}], "decision": "done", "reason": "met", "outcome": "read", "artifacts": []}),
        ],
    );
    let edit = |c: String| {
        let c = c
            .replace("service: {name: ductile}", "service: {name: ductile, max_workers: 8}")
            .replace("    timeouts: {handle: 10m}\n", "    timeouts: {handle: 10m}\n    parallelism: 4\n")
            .replace("  fetch:\n    enabled: true\n", "  fetch:\n    enabled: true\n    parallelism: 4\n");
        assert_eq!(c.matches("parallelism: 4").count(), 2, "the walk's config changed");
        c
    };
    let Some(g) = Gateway::start_tuned(&t, &m, edit, |r| r) else { return };
    let jobs: Vec<String> = std::thread::scope(|s| {
        let starts: Vec<_> = (0..4)
            .map(|i| {
                s.spawn({
                    let (g, t) = (&g, &t);
                    move || g.start_goal(t, &format!("Fetch the page, take {i}"))
                })
            })
            .collect();
        starts.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let (runs, all) = g.finished_runs(4);
    succeeded(&all);
    for r in &runs {
        assert_eq!(r["status"], "done", "{r:#}");
    }
    for j in &jobs {
        assert_eq!(g.job(j)["status"], "succeeded");
    }
    // Ductile ran agentloop jobs side by side: some started before another had completed.
    let agentloop: Vec<&Value> = all.iter().filter(|j| j["plugin"] == "agentloop").collect();
    let overlap = agentloop.iter().any(|a| {
        agentloop.iter().any(|b| {
            a["job_id"] != b["job_id"]
                && a["started_at"].as_str() < b["completed_at"].as_str()
                && b["started_at"].as_str() < a["completed_at"].as_str()
        })
    });
    assert!(overlap, "no two agentloop jobs ran at once: {agentloop:#?}");
    // Every run's key in Ductile's plugin_state says what its workspace says.
    let Some(state) = g.plugin_state() else { return };
    for r in &runs {
        let id = r["run_id"].as_str().unwrap();
        let key = &state[format!("run:{id}")];
        assert_eq!(key["status"], r["status"], "plugin_state `run:{id}` against the workspace: {state:#}");
        assert_eq!(key["step"], r["step"], "{state:#}");
    }
    let keys = state.as_object().unwrap().keys().filter(|k| k.starts_with("run:")).count();
    assert_eq!(keys, 4, "{state:#}");
}

#[test]
fn a_model_outage_is_retried_by_ductile_and_the_run_finishes_once_the_model_is_back() {
    let t = T::new();
    let page = page_server();
    let inner = model(
        frame(),
        vec![plan("web_fetch", json!({"url": page.url}))],
        vec![
            json!({"satisfied": [{"item": 1, "steps": [1]}, {"item": 2, "steps": [1]}, {"item": 3, "steps": [1]}], "decision": "done", "reason": "met", "outcome": "read", "artifacts": []}),
        ],
    );
    // The provider is down for its first two calls: three attempts of the start job, one more
    // than the plugin's `max_attempts: 2`, which does not apply to a `handle` job (EVENT-MODE.md,
    // "Provider outages").
    let flaky = forwarding(&inner, |i| {
        (i < 2).then(|| {
            Reply::json(503, json!({"type": "error", "error": {"type": "overloaded_error", "message": "down"}}))
        })
    });
    let edit = |c: String| {
        let c = c.replace(
            "    timeouts: {handle: 10m}\n",
            "    timeouts: {handle: 10m}\n    retry: {max_attempts: 2, backoff_base: 1s}\n",
        );
        assert!(c.contains("max_attempts: 2"), "the walk's agentloop entry changed");
        c
    };
    // agentloop gives up on the provider after one call, so the outage reaches Ductile.
    let root = |r: String| {
        let r = r.replace("structured: tools}", "structured: tools, attempts: 1}");
        assert!(r.contains("attempts: 1"), "the root's llm line changed");
        r
    };
    let Some(g) = Gateway::start_tuned(&t, &flaky, edit, root) else { return };
    let job = g.start_goal(&t, "Fetch the page");
    let (runs, _) = g.finished_runs(1);
    assert_eq!(runs[0]["status"], "done", "{:#}", runs[0]);
    let start = g.job(&job);
    assert_eq!(start["status"], "succeeded", "{start:#}");
    assert_eq!(start["attempt"], 3, "two failed attempts retried by Ductile past max_attempts 2: {start:#}");
    assert!(prompts(&inner).contains(PAGE_TEXT));
}

/// Ductile is killed while a turn runs: the turn finishes on its own (the run waits for its next
/// tool, whose request went nowhere), and when Ductile comes back it delivers the orphaned job
/// again under its job id; agentloop answers it with the answer it kept, so the request is routed
/// and the run goes on at once (before, the job was "stale or duplicate" and the run stalled).
#[test]
fn a_turn_whose_answer_was_lost_in_a_crash_is_answered_again_and_the_run_goes_on() {
    let t = T::new();
    let page = page_server();
    let inner = model(
        frame(),
        vec![
            plan("web_fetch", json!({"url": format!("{}/one", page.url)})),
            plan("web_fetch", json!({"url": format!("{}/two", page.url)})),
        ],
        vec![
            json!({"satisfied": [{"item": 1, "steps": [1]}], "decision": "continue", "reason": "one more"}),
            json!({"satisfied": [{"item": 2, "steps": [2]}, {"item": 3, "steps": [2]}], "decision": "done", "reason": "met", "outcome": "read both", "artifacts": []}),
        ],
    );
    // The first call after the first page came back is slow: Ductile is killed meanwhile.
    let slow = delayed(&inner, |i| Duration::from_secs(if i == 2 { 3 } else { 0 }));
    let Some(mut g) = Gateway::start(&t, &slow, "") else { return };
    g.start_goal(&t, "Fetch both pages");
    let started = Instant::now();
    while slow.count() < 3 {
        assert!(started.elapsed() < DEADLINE, "the resume turn never called the model");
        std::thread::sleep(Duration::from_millis(20));
    }
    g.crash();
    // The orphaned turn finishes: the run now waits for step 2's tool, requested nowhere.
    let started = Instant::now();
    while !g.runs().first().is_some_and(|s| s["pending"]["step"] == 2 && s["pending"]["handed_off"] == true) {
        assert!(started.elapsed() < DEADLINE, "the orphaned turn did not finish: {:?}", g.runs());
        std::thread::sleep(Duration::from_millis(50));
    }
    g.restart(&t);
    let (runs, jobs) = g.finished_runs(1);
    assert_eq!(runs[0]["status"], "done", "{:#}", runs[0]);
    assert_eq!(runs[0]["tools_called"], json!(["web_fetch", "web_fetch"]), "{:#}", runs[0]);
    // The recovered job was the lost turn's, delivered again and answered as the first time.
    let retried: Vec<&Value> =
        jobs.iter().filter(|j| j["plugin"] == "agentloop" && j["attempt"].as_u64() > Some(1)).collect();
    assert_eq!(retried.len(), 1, "{jobs:#?}");
    let kept = std::fs::read_dir(g.root.join(".agentloop-handle/jobs")).unwrap().count();
    assert!(kept >= 3, "the turns' answers are kept: {kept}");
}
