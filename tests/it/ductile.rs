//! Ductile plugins as tools from `run`, against a fake of the gateway's API on 127.0.0.1 that
//! follows the documented shapes: GET /plugins, GET /plugin/{name} (bearer), POST
//! /plugin/{plugin}/{command} → 202 {job_id}, GET /job/{id} → queued|running|succeeded|failed.

use crate::common::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const TOKEN: &str = "tok-ductile-1234";

fn echo_details() -> Value {
    json!({"name": "echo", "version": "0.1.0", "description": "A demonstration plugin", "protocol": 2, "commands": [
        {"name": "say", "type": "write", "description": "Say a message back", "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}},
        {"name": "poll", "type": "write", "description": "No-op scheduled tick"},
        {"name": "health", "type": "read", "description": "Health check"}]})
}

/// The fake gateway. `polls_before_done` job polls answer `running` first; `post_status`
/// overrides the answer to POST (403 and friends).
fn gateway(polls_before_done: usize, post_status: Option<u16>) -> (Server, Arc<AtomicUsize>) {
    let polls = Arc::new(AtomicUsize::new(0));
    let p = polls.clone();
    let s = Server::start_with(move |_, req| {
        let authed = req.header("authorization") == Some(&format!("Bearer {TOKEN}"));
        let path = req.url.as_str();
        match (req.method.as_str(), path) {
            ("GET", "/plugins") => Reply::json(
                200,
                json!({"plugins": [
                {"name": "echo", "version": "0.1.0", "description": "A demonstration plugin", "commands": ["say", "health"]},
                {"name": "agentloop", "version": "0.1.0", "description": "agentloop itself", "commands": ["handle"]}]}),
            ),
            (_, _) if !authed => Reply::json(401, json!({"error": "missing or invalid token"})),
            ("GET", "/plugin/echo") => Reply::json(200, echo_details()),
            ("GET", "/plugin/agentloop") => Reply::json(
                200,
                json!({"name": "agentloop", "description": "agentloop itself", "commands": [
                {"name": "handle", "type": "write", "description": "Run a goal", "input_schema": {"type": "object", "properties": {"goal": {"type": "string"}}}}]}),
            ),
            ("POST", "/plugin/echo/say") => match post_status {
                Some(code) => Reply::json(code, json!({"error": "insufficient scope"})),
                None => {
                    let body: Value = serde_json::from_str(&req.body).unwrap();
                    assert_eq!(body["payload"]["message"], "hello", "the payload is the arguments");
                    Reply::json(202, json!({"job_id": "job-1", "status": "queued", "plugin": "echo", "command": "say"}))
                }
            },
            ("GET", "/job/job-1") => {
                let n = p.fetch_add(1, Ordering::SeqCst);
                if n < polls_before_done {
                    Reply::json(
                        200,
                        json!({"job_id": "job-1", "status": "running", "plugin": "echo", "command": "say"}),
                    )
                } else {
                    Reply::json(
                        200,
                        json!({"job_id": "job-1", "status": "succeeded", "plugin": "echo", "command": "say",
                        "result": {"status": "ok", "result": "Echoed: hello", "events": [], "logs": []}}),
                    )
                }
            }
            _ => Reply::json(404, json!({"error": format!("no route {path}")})),
        }
    });
    (s, polls)
}

const SCRIPT: &str = r#"frame:
  - answer: {goal: say hello through the echo plugin, definition_of_done: [the echo plugin was asked, its answer came back, the answer is known], can_proceed: true}
plan:
  - answer: {next_action: {tool: echo__say, args: {message: hello}}, expected_outcome: the echo, rationale: the plugin does it}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: echoed, outcome: "The echo plugin answered: Echoed: hello"}
"#;

fn setup(s: &Server) -> T {
    let t = T::new();
    t.write("ws/.keep", "");
    t.write(
        "ws/agentloop.yaml",
        &format!("ductile:\n  api_url: {}\n  api_token_env: DUCTILE_TOKEN\n  poll_interval: 50ms\n", s.url),
    );
    t.write("script.yaml", SCRIPT);
    t
}

fn posts(s: &Server) -> usize {
    s.requests.lock().unwrap().iter().filter(|r| r.method == "POST").count()
}

#[test]
fn a_run_whose_plan_uses_a_plugin_tool_reaches_done() {
    let (s, polls) = gateway(2, None);
    let t = setup(&s);
    let tools = t.al(&["tools", "list"]).env("DUCTILE_TOKEN", TOKEN).output().unwrap();
    let list = stdout(&tools);
    assert!(list.contains("echo__say"), "{list}");
    assert!(!list.contains("echo__health"), "operator commands are not tools: {list}");
    assert!(!list.contains("echo__poll"), "Ductile's scheduler tick is no tool: {list}");
    assert!(!list.contains("agentloop__handle"), "agentloop itself is no tool by default: {list}");
    let out =
        t.al(&["--script", "script.yaml", "run", "--goal", "say hello"]).env("DUCTILE_TOKEN", TOKEN).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(posts(&s), 1);
    assert_eq!(polls.load(Ordering::SeqCst), 3, "polled until the job succeeded");
    let act = t.trace().into_iter().find(|e| e["event"] == "act").unwrap();
    assert_eq!(act["tool"], "echo__say");
    assert_eq!(act["result_status"], "ok");
    assert_eq!(act["result_summary"], "Echoed: hello");
    assert_eq!(act["data"]["ductile_job"], "job-1", "the job id is in the trace");
    // The token never reaches a file.
    for f in ["trace.jsonl", "transcript.md", "state.json"] {
        assert!(!t.read(&format!("ws/{f}")).contains(TOKEN), "{f}");
    }
    // The catalog is cached: a second listing does not ask the gateway again.
    let before = s.count();
    t.al(&["tools", "list"]).env("DUCTILE_TOKEN", TOKEN).assert().success();
    assert_eq!(s.count(), before);
}

#[test]
fn a_kill_during_the_poll_resumes_without_a_second_trigger() {
    let (s, _) = gateway(1, None);
    let t = setup(&s);
    let out = t
        .al(&["--script", "script.yaml", "run", "--goal", "say hello"])
        .env("DUCTILE_TOKEN", TOKEN)
        .env("AGENTLOOP_CRASH_AT", "ductile:polling")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "killed while waiting for the job");
    assert_eq!(posts(&s), 1, "the job was started once");
    let out = t.al(&["--script", "script.yaml", "run"]).env("DUCTILE_TOKEN", TOKEN).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(posts(&s), 1, "resuming polled the same job instead of triggering the plugin again");
    assert_eq!(t.json("ws/result.json")["status"], "done");
}

#[test]
fn discovery_from_the_api_and_from_manifests_give_the_same_catalog() {
    let (s, _) = gateway(0, None);
    let t = setup(&s);
    let from_api = stdout(&t.al(&["skills", "gen"]).env("DUCTILE_TOKEN", TOKEN).output().unwrap());
    // A read-only command writes nothing outside the workspace: the discovery is not cached.
    assert!(!t.path("cache/agentloop/ductile").exists(), "skills gen wrote the discovery cache");
    t.write(
        "plugins/echo/manifest.yaml",
        "manifest_spec: ductile.plugin\nmanifest_version: 1\nname: echo\nversion: 0.1.0\nprotocol: 2\nentrypoint: run.py\ndescription: A demonstration plugin\ncommands:\n  - name: say\n    type: write\n    description: Say a message back\n    input_schema:\n      type: object\n      properties: {message: {type: string}}\n      required: [message]\n  - name: poll\n    type: write\n    description: No-op scheduled tick\n  - name: health\n    type: read\n    description: Health check\n",
    );
    t.write("other/agentloop.yaml", "");
    let from_files =
        stdout(&t.cmd().args(["-w", "other", "skills", "gen", "--ductile-manifests", "plugins"]).output().unwrap());
    assert!(from_api.contains("echo__say"), "{from_api}");
    assert_eq!(from_api, from_files, "the API and the manifests give one catalog");
    // A file that is not a plugin manifest is named.
    t.write("bad/x/manifest.yaml", "manifest_spec: something.else\nname: x\n");
    let out = t.cmd().args(["-w", "other", "skills", "gen", "--ductile-manifests", "bad"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("bad/x/manifest.yaml: `manifest_spec` is `something.else`"), "{}", stderr(&out));
}

#[test]
fn gateway_refusals_are_tool_errors_naming_the_plugin_and_scope() {
    let (s, _) = gateway(0, Some(403));
    let t = setup(&s);
    let out = t
        .al(&["tools", "call", "echo__say", "--args", r#"{"message": "hello"}"#])
        .env("DUCTILE_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", stdout(&out));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(text.contains("the token lacks the scope to run `echo` `say` (403): it needs plugin:rw"), "{text}");
    // A wrong token: 401 says which keys set it.
    let out = t
        .al(&["tools", "call", "echo__say", "--args", r#"{"message": "hello"}"#])
        .env("DUCTILE_TOKEN", "wrong-token")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(text.contains("401") && text.contains("ductile.api_token"), "{text}");
}

/// A gateway whose POST answers with `job_id` `id` and whose every other job path answers 404.
fn gateway_giving_job_id(id: &'static str) -> Server {
    Server::start_with(move |_, req| match (req.method.as_str(), req.url.as_str()) {
        ("GET", "/plugins") => Reply::json(200, json!({"plugins": [{"name": "echo", "commands": ["say"]}]})),
        ("GET", "/plugin/echo") => Reply::json(200, echo_details()),
        ("POST", "/plugin/echo/say") => Reply::json(202, json!({"job_id": id, "status": "queued"})),
        ("GET", "/job/..%2Fadmin%3Fdrop%3D1%23x") => Reply::json(
            200,
            json!({"job_id": id, "status": "succeeded", "result": {"status": "ok", "result": "Echoed: hello"}}),
        ),
        (_, path) => Reply::json(404, json!({"error": format!("no route {path}")})),
    })
}

/// A job id is the gateway's data: it goes into the job's address as one percent-encoded
/// segment (never more path, a query or a fragment), and one that cannot be a segment is
/// refused before anything is asked with it.
#[test]
fn a_job_id_from_the_gateway_is_one_encoded_path_segment() {
    let s = gateway_giving_job_id("../admin?drop=1#x");
    let t = setup(&s);
    let call = || {
        t.al(&["tools", "call", "echo__say", "--args", r#"{"message": "hello"}"#])
            .env("DUCTILE_TOKEN", TOKEN)
            .output()
            .unwrap()
    };
    let out = call();
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("Echoed: hello"), "{}", stdout(&out));
    let asked: Vec<String> = s.requests.lock().unwrap().iter().map(|r| r.url.clone()).collect();
    assert!(asked.contains(&"/job/..%2Fadmin%3Fdrop%3D1%23x".to_string()), "{asked:?}");
    assert!(!asked.iter().any(|u| u.starts_with("/admin") || u.contains('#')), "{asked:?}");
    drop(s);
    let s = gateway_giving_job_id("..");
    let t2 = setup(&s);
    let out = t2
        .al(&["tools", "call", "echo__say", "--args", r#"{"message": "hello"}"#])
        .env("DUCTILE_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}{}", stdout(&out), stderr(&out));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(text.contains("the Ductile job id `..` cannot be part of a gateway address"), "{text}");
    assert!(!s.requests.lock().unwrap().iter().any(|r| r.url.starts_with("/job")), "nothing asked with it");
    assert!(!t2.exists("ws/.agentloop.ductile-job.json"), "the id was not kept");
}

#[test]
fn agentloop_calling_itself_is_refused_unless_max_depth_allows() {
    let (s, _) = gateway(0, None);
    let t = setup(&s);
    // With max_depth 1 the plugin is a tool; a run started at depth 1 may not call it again.
    let cfg = t.read("ws/agentloop.yaml");
    t.write("ws/agentloop.yaml", &format!("{cfg}  max_depth: 1\n"));
    let list = stdout(&t.al(&["tools", "list"]).env("DUCTILE_TOKEN", TOKEN).output().unwrap());
    assert!(list.contains("agentloop__handle"), "{list}");
    // A run that agentloop itself started (depth 1) may not go one deeper.
    t.al(&["init", "--goal", "g", "--force"]).assert().success();
    let mut state = t.json("ws/state.json");
    state["depth"] = json!(1);
    t.write("ws/state.json", &state.to_string());
    let out = t
        .al(&["tools", "call", "agentloop__handle", "--args", r#"{"goal": "again"}"#])
        .env("DUCTILE_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(text.contains("recursion guard") && text.contains("depth 1"), "{text}");
    assert_eq!(posts(&s), 0, "nothing was triggered");
    // Event mode: a start deeper than max_depth is refused, not run.
    t.write("root/agentloop.yaml", "llm: {provider: scripted, script: script.yaml}\n");
    t.write("root/script.yaml", SCRIPT);
    let start = |depth: u64| {
        let req = json!({"protocol": 2, "command": "handle", "event": {"type": "agentic.start", "payload": {"goal": "g", "agentloop_depth": depth}}});
        let out = t.cmd().args(["-w", "root", "handle"]).write_stdin(req.to_string()).output().unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let v = start(1);
    assert_eq!(v["status"], "error");
    assert!(v["error"].as_str().unwrap().contains("recursion guard"), "{v}");
    assert_eq!(v["retry"], false);
    // An external tool named like agentloop itself is left out of the catalog by default.
    t.write("root/agentloop.yaml", "llm: {provider: scripted, script: script.yaml}\ntools:\n  external:\n    agentloop: {description: Run agentloop}\n");
    let list = stdout(&t.cmd().args(["-w", "root", "tools", "list"]).output().unwrap());
    assert!(!list.contains("agentloop "), "{list}");
    // Depth 0 starts (its script then runs out: a provider failure the router may retry).
    let v = start(0);
    assert!(v["logs"].to_string().contains("started run") && !v.to_string().contains("recursion guard"), "{v}");
}

#[test]
fn changing_what_chooses_the_plugins_lists_them_again_despite_the_cache() {
    let (s, _) = gateway(0, None);
    let t = setup(&s);
    let list = || stdout(&t.al(&["tools", "list"]).env("DUCTILE_TOKEN", TOKEN).output().unwrap());
    // A command that acts lists the plugins and caches the list.
    let act = || {
        let out = t.al(&["tools", "call", "list_dir", "--args", "{}"]).env("DUCTILE_TOKEN", TOKEN).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    };
    let details = || s.requests.lock().unwrap().iter().filter(|r| r.url == "/plugin/agentloop").count();
    // max_depth 0: agentloop itself is not listed, and its details are never asked for.
    act();
    assert!(!list().contains("agentloop__handle"));
    assert_eq!(details(), 0);
    // Within the cache's lifetime, max_depth 1 lists it at once: the cached list was chosen
    // without it.
    let cfg = t.read("ws/agentloop.yaml");
    t.write("ws/agentloop.yaml", &format!("{cfg}  max_depth: 1\n"));
    assert!(list().contains("agentloop__handle"), "the cached list was reused");
    assert_eq!(details(), 1);
    // A list cached for this choice serves it.
    act();
    assert_eq!(details(), 2);
    assert!(list().contains("agentloop__handle"));
    assert_eq!(details(), 2, "the list cached for the same choice was not used");
    // And the first choice again is listed afresh, not from the list cached for the other.
    t.write("ws/agentloop.yaml", &cfg);
    assert!(!list().contains("agentloop__handle"));
}

#[test]
fn the_routers_state_keeps_running_runs_and_the_last_finished_ones() {
    let t = T::new();
    t.write("root/agentloop.yaml", "llm: {provider: scripted, script: script.yaml}\nhandle: {keep_finished: 3}\n");
    t.write("root/script.yaml", "frame:\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: false}\n");
    let mut runs = serde_json::Map::new();
    for i in 0..10 {
        runs.insert(format!("old{i}"), json!({"status": "done", "updated_at": format!("2025-01-01T00:00:0{i}Z")}));
    }
    runs.insert("busy".into(), json!({"status": "running", "updated_at": "2020-01-01T00:00:00Z"}));
    let req = json!({"protocol": 2, "command": "handle", "state": {"runs": runs}, "event": {"type": "agentic.start", "payload": {"goal": "g"}}});
    let out = t.cmd().args(["-w", "root", "handle"]).write_stdin(req.to_string()).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let su = v["state_updates"].as_object().unwrap();
    // The older `runs` map moves into one key per run; finished runs past the bound are dropped.
    assert_eq!(su["runs"], Value::Null, "{v}");
    let kept: Vec<&String> =
        su.iter().filter(|(k, val)| k.starts_with("run:") && !val.is_null()).map(|(k, _)| k).collect();
    let new_run = format!("run:{}", su["last_run_id"].as_str().unwrap());
    assert!(kept.iter().any(|k| *k == "run:busy"), "running runs are kept: {kept:?}");
    assert!(kept.iter().any(|k| **k == new_run), "{kept:?}");
    // The new run (escalated: cannot proceed) and the two newest old ones fill the 3 finished places.
    assert!(kept.iter().any(|k| *k == "run:old9") && kept.iter().any(|k| *k == "run:old8"), "{kept:?}");
    assert_eq!(kept.len(), 4, "{kept:?}");
    assert!((0..8).all(|i| su[&format!("run:old{i}")].is_null()), "{v}");
}

/// A manifest that declares config keys (both forms) and example input/output.
const RICH_MANIFEST: &str = r#"manifest_spec: ductile.plugin
manifest_version: 1
name: weather
version: 0.2.0
protocol: 2
entrypoint: run.py
description: Current weather and forecasts for a city
commands:
  - name: current
    type: read
    description: The weather now
    input_schema:
      city: string
    example:
      input: {city: Oslo}
      output: {temp_c: 4, sky: cloudy}
  - name: forecast
    type: read
    description: Three days ahead
    input_schema:
      city: string
  - name: health
    type: read
    description: Health check
config_keys:
  required:
    - name: api_key
      description: The weather service's API key
  optional:
    - units
examples:
  - command: forecast
    description: a city by name
    input: {city: Lima}
    output: {days: 3}
"#;

#[test]
fn the_catalog_from_manifests_has_descriptions_config_keys_and_examples() {
    let t = T::new();
    t.write("plugins/weather/manifest.yaml", RICH_MANIFEST);
    t.write("ws/agentloop.yaml", "");
    let out = t.al(&["skills", "gen", "--ductile-manifests", "plugins"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let md = stdout(&out);
    let part = &md[md.find("## Ductile plugins").expect("a plugins part")..md.find("## Skills").unwrap()];
    assert_eq!(
        part,
        "## Ductile plugins\n\n### weather\nCurrent weather and forecasts for a city\n- commands: `weather__current`, `weather__forecast`\n- config keys (the plugin's own, set in Ductile):\n  - `api_key` (required): The weather service's API key\n  - `units`\n- example `weather__current`: input `{\"city\":\"Oslo\"}` → output `{\"temp_c\":4,\"sky\":\"cloudy\"}`\n- example `weather__forecast` (a city by name): input `{\"city\":\"Lima\"}` → output `{\"days\":3}`\n\n"
    );
    // The JSON catalog carries the same.
    let out = t.al(&["skills", "gen", "--ductile-manifests", "plugins", "--format", "json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["plugins"][0]["config_keys"][0],
        json!({"name": "api_key", "required": true, "description": "The weather service's API key"})
    );
    assert_eq!(v["plugins"][0]["commands"][0]["examples"][0]["input"], json!({"city": "Oslo"}));
    // A map of key to description is the other form manifests use.
    t.write("plugins/weather/manifest.yaml", &RICH_MANIFEST.replace(
        "config_keys:\n  required:\n    - name: api_key\n      description: The weather service's API key\n  optional:\n    - units\n",
        "config_keys:\n  api_key: The weather service's API key\n",
    ));
    let md = stdout(&t.al(&["skills", "gen", "--ductile-manifests", "plugins"]).output().unwrap());
    assert!(md.contains("  - `api_key`: The weather service's API key\n"), "{md}");
}

/// skills.md as a Ductile core seeds it (Option A): plugins, their commands, their config.
const SEEDED: &str = "# Available skills\n\n## echo\nA demonstration plugin.\n\n- `echo.say`: say a message back\n- `echo.shout`: say it louder\n\nFiles: use `file_write` to save `notes.md`.\n";

#[test]
fn a_skills_md_seeded_before_the_run_is_the_catalog_plan_uses() {
    let t = T::new();
    let s = crate::prefix::server(false);
    t.write("ws/skills.md", SEEDED);
    t.write("ws/agentloop.yaml", "llm:\n  structured: tools\n");
    let out = t
        .al(&["--provider", "openai", "--base-url", &s.url, "run", "--goal", "write x", "--max-steps", "3"])
        .env("OPENAI_API_KEY", "sk-test-seeded")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let system = s.request(0).json()["messages"][0]["content"].as_str().unwrap().to_string();
    assert!(system.contains("## echo\nA demonstration plugin."), "the seeded text is the catalog: {system}");
    assert!(
        system.contains("## Tools agentloop can call") && system.contains("- `file_write(path, content"),
        "{system}"
    );
    assert!(!system.contains("Generated by `agentloop skills gen`"), "{system}");
    // Its tools are still checked: the ones named that cannot be called are said, once.
    let err = stderr(&out);
    assert!(err.contains("names tools agentloop cannot call here: echo__say, echo__shout"), "{err}");
    assert_eq!(t.read("ws/skills.md"), SEEDED, "the seeded file is kept as it is");
    let trace = t.trace();
    assert_eq!(trace[0]["data"]["skills_md"], "seeded");
    let plan = trace.iter().find(|e| e["phase"] == "plan").unwrap();
    assert_eq!(plan["data"]["skills_md_unknown_tools"], json!(["echo__say", "echo__shout"]));
    assert_eq!(t.read("ws/artifacts/x.md"), "hello");
}

/// `allowed_tools` as a Ductile plugin block writes it (`allowed_plugins`): a plugin's name allows
/// its commands, `<plugin>__<command>` one of them, a tool's name that tool; an entry that names
/// nothing is a warning; `tools list` and `config show` say what each entry allowed.
#[test]
fn allowed_plugins_names_a_plugin_a_command_or_a_tool_and_says_what_each_allowed() {
    let (s, _) = gateway(0, None);
    let t = setup(&s);
    let base = t.read("ws/agentloop.yaml");
    t.write("ws/agentloop.yaml", &format!("{base}allowed_plugins: [echo, file_read, ehco]\n"));
    let out = t.al(&["tools", "list"]).env("DUCTILE_TOKEN", TOKEN).output().unwrap();
    let list = stdout(&out);
    let names: Vec<&str> =
        list.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(names, ["file_read", "finish", "echo__say"], "{list}");
    assert!(
        list.contains("# allowed_tools: `echo` → echo__say; `file_read` → file_read; `ehco` → no tool\n"),
        "{list}"
    );
    let err = stderr(&out);
    assert_eq!(err.matches("`ehco` names no tool, so it allows none").count(), 1, "said once: {err}");
    let out = t.al(&["tools", "list", "--json"]).env("DUCTILE_TOKEN", TOKEN).output().unwrap();
    let tools: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let by = |n: &str| tools.iter().find(|x| x["name"] == n).map(|x| x["allowed_by"].clone());
    assert_eq!((by("echo__say"), by("file_read")), (Some(json!("echo")), Some(json!("file_read"))));
    // config show says it too, as a line and in --json.
    let out = t.al(&["config", "show"]).env("DUCTILE_TOKEN", TOKEN).output().unwrap();
    assert!(stdout(&out).contains("# allowed_tools: `echo` → echo__say; "), "{}", stdout(&out));
    let out = t.al(&["config", "show", "--json"]).env("DUCTILE_TOKEN", TOKEN).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["allowed_tools_named"], json!({"echo": ["echo__say"], "file_read": ["file_read"], "ehco": []}));
    // The run calls the plugin the list names (it stopped at its first Plan with no tool before).
    let out =
        t.al(&["--script", "script.yaml", "run", "--goal", "say hello"]).env("DUCTILE_TOKEN", TOKEN).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(t.trace().into_iter().find(|e| e["event"] == "act").unwrap()["tool"], "echo__say");
    // One command by its tool name; a scheduler tick named is said to be none.
    t.write("ws/agentloop.yaml", &format!("{base}allowed_tools: [echo__say, echo__poll]\n"));
    let out = t.al(&["tools", "list"]).env("DUCTILE_TOKEN", TOKEN).output().unwrap();
    assert!(
        stdout(&out).contains("# allowed_tools: `echo__say` → echo__say; `echo__poll` → no tool"),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("`echo__poll` names no tool") && stderr(&out).contains("never tools"),
        "{}",
        stderr(&out)
    );
}

/// Event mode reads the request's `allowed_plugins` the same way: a plugin's name narrows to its
/// commands, and an entry naming nothing the root allows is refused naming it.
#[test]
fn a_requests_allowed_plugins_may_name_a_ductile_plugin() {
    let (s, _) = gateway(0, None);
    let t = T::new();
    let ductile = format!("ductile: {{api_url: '{}', api_token_env: DUCTILE_TOKEN}}\n", s.url);
    t.write("root/agentloop.yaml", &format!("llm: {{provider: scripted, script: script.yaml}}\n{ductile}"));
    t.write("root/script.yaml", SCRIPT);
    let send = |config: Value| {
        let req = json!({"protocol": 2, "command": "handle", "config": config, "event": {"type": "agentic.start", "payload": {"goal": "say hello"}}});
        let out = t
            .cmd()
            .args(["-w", "root", "handle"])
            .env("DUCTILE_TOKEN", TOKEN)
            .write_stdin(req.to_string())
            .output()
            .unwrap();
        (out.status.code(), serde_json::from_slice::<Value>(&out.stdout).unwrap())
    };
    let (code, v) = send(json!({"allowed_plugins": ["echo"]}));
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["events"][0]["type"], "agentic.tool_request.echo__say", "{v}");
    let (code, v) = send(json!({"allowed_plugins": ["ehco"]}));
    assert_eq!(code, Some(78), "{v}");
    let err = v["error"].as_str().unwrap();
    assert!(err.contains("may not set `allowed_tools`") && err.contains("`ehco` names none of"), "{err}");
    // A root that allows only a built-in: the plugin's name would widen it.
    t.write(
        "root/agentloop.yaml",
        &format!("llm: {{provider: scripted, script: script.yaml}}\n{ductile}allowed_tools: [file_read]\n"),
    );
    let (code, v) = send(json!({"allowed_plugins": ["echo"]}));
    assert_eq!(code, Some(78), "{v}");
    assert!(v["error"].as_str().unwrap().contains("`echo` allows `echo__say`, which is not in"), "{v}");
}
