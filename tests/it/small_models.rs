//! What small models on local servers need from the loop, against fakes on 127.0.0.1 that
//! behave like llama-cpp-python: a refused answer's correction in a form every chat template
//! shows, answers capped per phase, and a read timeout said, recorded and not sent again.

use crate::common::*;
use serde_json::{json, Value};

/// A valid answer for each phase's forced tool (the run writes x.md and finishes).
fn answer(tool: &str) -> Value {
    match tool {
        "frame_answer" => json!({"goal": "write x", "definition_of_done": ["x written", "x is short", "run ends"]}),
        "plan_answer" => json!({
            "next_action": {"tool": "file_write", "args": {"path": "artifacts/x.md", "content": "hello"}},
            "expected_outcome": "x written", "rationale": "the one thing to do"
        }),
        _ => {
            json!({"satisfied": [{"item": 1, "steps": [1], "artifacts": ["artifacts/x.md"]}, {"item": 2, "steps": [1]}, {"item": 3, "steps": [1]}],
            "decision": "done", "reason": "x written", "outcome": "wrote x", "artifacts": ["artifacts/x.md"]})
        }
    }
}

fn tool_reply(name: &str, args: &str, finish: &str) -> Reply {
    Reply::json(
        200,
        json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "smollm2",
            "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": "",
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}]}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10}}),
    )
}

/// What a small model wrote for its first plan answer: JSON cut off mid-object.
const CUT: &str = "{\"next_action\": {\"tool\": \"file_write\", \"args\": {\"path\": \"artifacts/x.md\"";

/// A server whose first plan answer is `CUT` (with `finish`), every other answer valid; it
/// answers `models test`'s report_color probes as a template that shows every message would.
fn server(finish: &'static str) -> Server {
    let plans = std::sync::atomic::AtomicUsize::new(0);
    Server::start_with(move |_, req| {
        let body = req.json();
        let tool = forced_tool(&body);
        if tool == "report_color" {
            let (color, tokens) = Template::default().answer(&body);
            let mut r = tool_reply("report_color", &json!({"color": color}).to_string(), "tool_calls");
            r.body = r.body.replace("\"prompt_tokens\":100", &format!("\"prompt_tokens\":{tokens}"));
            return r;
        }
        if tool == "plan_answer" && plans.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            return tool_reply(&tool, CUT, finish);
        }
        tool_reply(&tool, &answer(&tool).to_string(), "tool_calls")
    })
}

fn run(t: &T, url: &str) -> std::process::Output {
    t.cmd()
        .args(["-w", "ws", "--provider", "openai", "--base-url", url, "--model", "smollm2", "run", "--goal", "write x"])
        .env("AGENTLOOP_LLM__BACKOFF_MS", "600000")
        .output()
        .unwrap()
}

/// A lean run (`prompts: lean`, `frame: goal`, the four file tools) of `goal` in the workspace
/// `ws`, against the server at `url`.
fn lean_run(t: &T, url: &str, ws: &str, goal: &str) -> std::process::Output {
    t.write("lean.yaml", "frame: goal\nprompts: lean\nallowed_tools: [file_read, file_write, list_dir, finish]\n");
    let flags = ["-w", ws, "--config", "lean.yaml", "--provider", "openai", "--base-url", url, "--model", "smollm2"];
    t.cmd().args(flags).args(["run", "--goal", goal]).output().unwrap()
}

/// The body of the n-th request that forced `tool`.
fn nth(s: &Server, tool: &str, n: usize) -> Value {
    (0..s.count()).map(|i| s.request(i).json()).filter(|b| forced_tool(b) == tool).nth(n).unwrap()
}

/// On a local server nobody probed, a refused answer goes back as the assistant's text, as the
/// model wrote it, and the error as a user message: a template that drops `role: tool`
/// messages (upstream chatml-function-calling, llama-2, gemma) still shows the model its error.
#[test]
fn a_refused_answer_is_corrected_in_a_user_message_every_template_shows() {
    let s = server("tool_calls");
    let t = T::new();
    let out = run(&t, &s.url);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let retry = nth(&s, "plan_answer", 1);
    let msgs = retry["messages"].as_array().unwrap();
    assert!(msgs.iter().all(|m| m["role"] != "tool"), "{retry}");
    let [.., said, error] = msgs.as_slice() else { panic!("{retry}") };
    assert_eq!(said["role"], "assistant");
    assert!(said.get("tool_calls").is_none(), "{said}");
    assert_eq!(said["content"], format!("`plan_answer` {CUT}"));
    assert_eq!(error["role"], "user");
    let e = error["content"].as_str().unwrap();
    // CUT stops inside its JSON: the model is told it was cut off, and how it began.
    assert!(
        e.starts_with("error: that answer was refused: the arguments were cut off before their JSON closed"),
        "{e}"
    );
    // What a template that drops tool messages renders still holds the error.
    let shown = Template { drops_tool: true, ..Default::default() }.render(&retry);
    assert!(shown.contains("that answer was refused"), "{shown}");
    // The transcript shows the refused answer as written, not as the `{}` it was read as.
    let transcript = t.read("ws/transcript.md");
    assert!(transcript.contains(&format!("`plan_answer` {CUT}")), "{transcript}");
    assert!(!transcript.contains("call plan_answer {}"), "{transcript}");
}

/// `llm.tool_messages: tool` keeps the refused call and the error as its tool result.
#[test]
fn tool_messages_tool_sends_the_correction_as_a_tool_result() {
    let s = server("tool_calls");
    let t = T::new();
    t.write("ws/agentloop.yaml", "llm:\n  tool_messages: tool\n");
    let out = run(&t, &s.url);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let retry = nth(&s, "plan_answer", 1);
    let msgs = retry["messages"].as_array().unwrap();
    let [.., call, result] = msgs.as_slice() else { panic!("{retry}") };
    assert_eq!(call["tool_calls"][0]["function"]["arguments"], CUT, "{call}");
    assert_eq!((result["role"].clone(), result["tool_call_id"].clone()), (json!("tool"), json!("call_1")));
    assert!(result["content"].as_str().unwrap().contains("cut off before their JSON closed"), "{result}");
    let transcript = t.read("ws/transcript.md");
    assert!(transcript.contains(&format!("call plan_answer {CUT}")), "{transcript}");
}

/// Where `models test` saw a tool result reach the model, `auto` sends corrections as tool
/// results from then on (the finding is kept with the server's request form).
#[test]
fn models_test_finding_tool_results_shown_makes_auto_use_tool_messages() {
    let s = server("tool_calls");
    let t = T::new();
    let out =
        t.al(&["--provider", "openai", "--base-url", &s.url, "--model", "smollm2", "models", "test"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let cache = t.read("cache/agentloop/wire.json");
    assert!(cache.contains("\"tool_results\": true"), "{cache}");
    let out = run(&t, &s.url);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let retry = nth(&s, "plan_answer", 1);
    assert_eq!(retry["messages"].as_array().unwrap().last().unwrap()["role"], "tool", "{retry}");
}

/// An unknown `llm.tool_messages` value is refused naming the key and its choices.
#[test]
fn an_unknown_tool_messages_value_is_refused() {
    let t = T::new();
    t.write("ws/agentloop.yaml", "llm:\n  tool_messages: sometimes\n");
    let out = t.al(&["config", "show"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("llm.tool_messages") && err.contains("`auto`, `tool`, `user`"), "{err}");
}

/// Each phase's answer is capped to suit it: plan (an action's content) half of
/// `llm.max_tokens`, frame and reflect a quarter; a cut-off answer's correction names the cap.
#[test]
fn answers_are_capped_per_phase_and_a_cut_answer_is_told_so() {
    let s = server("length");
    let t = T::new();
    // Each phase's own cap is the point, Reflect's too, so Reflect and Plan are asked apart.
    t.write("ws/agentloop.yaml", "llm:\n  fuse_phases: false\n");
    let out = run(&t, &s.url);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let cap = |tool: &str| nth(&s, tool, 0)["max_tokens"].clone();
    assert_eq!(
        (cap("frame_answer"), cap("plan_answer"), cap("reflect_answer")),
        (json!(1024), json!(2048), json!(1024))
    );
    let retry = nth(&s, "plan_answer", 1);
    let e = retry["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_string();
    assert!(e.contains("your answer was cut off at this phase's limit of 2048 tokens"), "{e}");

    let s = server("tool_calls");
    let t = T::new();
    t.write("ws/agentloop.yaml", "llm:\n  max_tokens: 600\n");
    let out = run(&t, &s.url);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!((cap2(&s, "frame_answer"), cap2(&s, "plan_answer")), (json!(256), json!(300)));
}

fn cap2(s: &Server, tool: &str) -> Value {
    nth(s, tool, 0)["max_tokens"].clone()
}

/// A local server that gives no answer within `llm.read_timeout`: said on stderr without `-v`
/// or a terminal, recorded in the trace and the transcript with what it may cost, and the
/// request is not sent again (the server would queue it behind the abandoned one).
#[test]
fn a_read_timeout_on_a_local_server_is_recorded_and_not_sent_again() {
    // The server holds the request until the test ends: no answer ever comes in time.
    let (hold, wait) = std::sync::mpsc::channel::<()>();
    let wait = std::sync::Mutex::new(wait);
    let s = Server::start_with(move |_, _| {
        let _ = wait.lock().unwrap().recv();
        Reply::text(500, "text/plain", "too late")
    });
    let t = T::new();
    t.write("ws/agentloop.yaml", "llm:\n  read_timeout: 1s\n");
    let out = run(&t, &s.url);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert_eq!(s.count(), 1, "the request was sent again");
    let err = stderr(&out);
    assert!(err.contains("warning: provider openai: no answer from"), "{err}");
    assert!(err.contains("within llm.read_timeout (1s)") && err.contains("up to 1024 tokens"), "{err}");
    assert!(err.contains("not sent again"), "{err}");
    let trace = t.trace();
    let e = trace.iter().find(|e| e["event"] == "model.timeout").unwrap_or_else(|| panic!("{trace:?}"));
    assert_eq!((e["phase"].clone(), e["retryable"].clone()), (json!("frame"), json!(false)), "{e}");
    assert_eq!((e["data"]["max_tokens"].clone(), e["data"]["output_tokens"].clone()), (json!(1024), Value::Null));
    assert!(e["duration_ms"].as_u64().unwrap() >= 1000, "{e}");
    let transcript = t.read("ws/transcript.md");
    assert!(transcript.contains("frame · model call timed out (attempt 1, smollm2)"), "{transcript}");
    assert!(
        transcript
            .contains("tokens: unknown (a server reports usage only with a whole answer); at most 1024 generated"),
        "{transcript}"
    );
    let result = t.json("ws/result.json");
    assert!(result["reason"].as_str().unwrap().contains("llm.read_timeout"), "{result}");
    drop(hold);
}

/// A model with no price reads one way everywhere: `$?` for people (`status`, `runs`,
/// `trace show`, `trace stats`, the report) and null in JSON.
#[test]
fn an_unknown_price_reads_one_way_everywhere() {
    // A model served from this machine costs $0, so the unpriced model is a remote provider's.
    let s = crate::chat::model_server();
    let t = T::new();
    let out = t
        .cmd()
        .args(["-w", "ws", "--provider", "anthropic", "--base-url", &s.url, "--model", "mystery-1"])
        .args(["run", "--goal", "write x"])
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(t.json("ws/result.json")["cost_usd"], Value::Null);
    let out = stdout(&t.al(&["status"]).output().unwrap());
    assert!(out.contains("cost        $? (no price for mystery-1: add one under `prices:`)"), "{out}");
    let out = stdout(&t.al(&["runs"]).output().unwrap());
    assert!(out.lines().nth(1).is_some_and(|l| l.contains(" $? ")), "{out}");
    let out = stdout(&t.al(&["trace", "stats"]).output().unwrap());
    let total = out.lines().find(|l| l.starts_with("total")).unwrap();
    assert!(total.ends_with(" $?"), "{out}");
    let v: Value = serde_json::from_slice(&t.al(&["trace", "stats", "--json"]).output().unwrap().stdout).unwrap();
    assert_eq!(v["total"]["cost_usd"], Value::Null, "{v}");
    let out = stdout(&t.al(&["trace", "show"]).output().unwrap());
    assert!(out.lines().any(|l| l.contains(" frame ") && l.contains("$?")), "{out}");
    assert!(t.al(&["report"]).output().unwrap().status.success());
    let html = t.read("ws/report.html");
    assert!(html.contains("$?") && !html.contains("unpriced"), "the report shows the unknown cost as $?");
}

/// A scripted run of the task `context` says.
fn scripted_in_context(t: &T, context: &str, script: &str) -> std::process::Output {
    let out = t.cmd().args(["init", "ws", "--goal", "write x"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    t.write("ws/context.md", context);
    t.write("script.yaml", script);
    t.al(&["--script", "script.yaml", "run"]).output().unwrap()
}

fn scripted(t: &T, script: &str) -> std::process::Output {
    t.write("script.yaml", script);
    t.al(&["--script", "script.yaml", "run", "--goal", "write x"]).output().unwrap()
}

/// plan.md's risk for `finish` says what it does as things stand: with items open, the run ends
/// only if Reflect then ticks them all, and the open items are named; never "None".
#[test]
fn finish_risk_names_the_open_items() {
    let t = T::new();
    let out = scripted(
        &t,
        r#"frame:
  - answer: {goal: write x, definition_of_done: [x written, x is short, run ends], can_proceed: true}
plan:
  - answer: {next_action: {tool: finish, args: {summary: all done}}, rationale: done already}
  - answer: {next_action: {tool: file_write, args: {path: artifacts/x.md, content: hi}}, rationale: write it}
  - answer: {next_action: {tool: finish, args: {summary: wrote x, artifacts: [artifacts/x.md]}}, rationale: done now}
reflect:
  - answer: {decision: continue, reason: not yet}
  - answer: {satisfied: [{item: 1, steps: [2], artifacts: [artifacts/x.md]}, {item: 2, steps: [2]}, {item: 3, steps: [2]}], decision: continue, reason: x written}
  - answer: {decision: done, reason: finished, outcome: wrote x}
"#,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let decisions = t.read("ws/decisions.md");
    assert!(
        decisions.contains("Risk: Refused while Definition-of-Done items are open (3 are open: \"x written\", \"x is short\", \"run ends\"); the run ends only if Reflect then ticks each, citing the steps that showed it."),
        "{decisions}"
    );
    assert!(decisions.contains("Risk: Ends the run: every Definition-of-Done item is ticked."), "{decisions}");
    assert!(!decisions.contains("Risk: None; ends the run."), "{decisions}");
}

/// `finish` with items open is held, not run: step 1's finish is a refusal naming the open
/// items, the run goes on, and the finish after the work ends it with that finish's summary.
#[test]
fn finish_is_refused_while_items_are_open_and_names_them() {
    let t = T::new();
    let out = scripted(
        &t,
        r#"frame:
  - answer: {goal: write x, definition_of_done: [x written, x is short, x says hi], can_proceed: true}
plan:
  - answer: {next_action: {tool: finish, args: {summary: all done}}, rationale: done already}
  - answer: {next_action: {tool: file_write, args: {path: artifacts/x.md, content: hi}}, rationale: write it}
  - answer: {next_action: {tool: finish, args: {summary: wrote x, artifacts: [artifacts/x.md]}}, rationale: done now}
reflect:
  - answer: {decision: continue, reason: not yet}
  - answer: {satisfied: [{item: 1, steps: [2], artifacts: [artifacts/x.md]}, {item: 2, steps: [2]}, {item: 3, steps: [2]}], decision: continue, reason: x written}
  - answer: {decision: done, reason: finished}
"#,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let trace = t.trace();
    let acts: Vec<&Value> = trace.iter().filter(|e| e["event"] == "act").collect();
    assert_eq!(acts.len(), 3, "{acts:?}");
    assert_eq!(acts[0]["result_status"], "error", "{:?}", acts[0]);
    let refusal = acts[0]["error"].as_str().unwrap_or_default();
    assert!(
        refusal.contains("`finish` refused: 3 of the Definition of Done items are still open (\"x written\", \"x is short\", \"x says hi\")"),
        "{refusal}"
    );
    assert_eq!(acts[0]["data"]["finish_held"], true);
    assert_eq!(acts[2]["result_status"], "ok");
    let r = t.json("ws/result.json");
    assert_eq!(r["outcome"], "wrote x", "{r}");
    assert_eq!(r["artifacts"], serde_json::json!(["artifacts/x.md"]), "{r}");
}

/// A model that only ever calls `finish`, with items nothing has shown, meets the failure limit
/// after three held finishes (and reframes, as any run at that limit does) instead of spending
/// every step on an ending that cannot count.
#[test]
fn a_model_that_only_finishes_meets_the_failure_limit() {
    let t = T::new();
    let finish = "  - answer: {next_action: {tool: finish, args: {summary: done}}, rationale: done}\n".repeat(3);
    let reflect = "  - answer: {decision: continue, reason: not yet}\n".repeat(3);
    let frame =
        "  - answer: {goal: write x, definition_of_done: [x written, x is short, x says hi], can_proceed: true}\n";
    let out = scripted(&t, &format!("frame:\n{frame}plan:\n{finish}reflect:\n{reflect}"));
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    let trace = t.trace();
    let acts = trace.iter().filter(|e| e["event"] == "act").count();
    assert_eq!(acts, 3, "{trace:?}");
    let limit =
        trace.iter().position(|e| e.to_string().contains("3 consecutive tool failures (max_consecutive_failures)"));
    let last_act = trace.iter().rposition(|e| e["event"] == "act");
    assert!(limit.is_some() && limit > last_act, "{trace:?}");
    assert_ne!(t.json("ws/result.json")["status"], "done");
}

/// A held `finish` ran nothing, so citing its step is refused (issue 51: "report.md exists"
/// ticked from a finish that wrote nothing). When Reflect then ticks the last open item on the
/// evidence of a step that did the work, the held finish ends the run in that step, with its
/// summary.
#[test]
fn a_held_finish_is_no_evidence_but_ends_the_run_once_the_work_is_shown() {
    let t = T::new();
    let out = scripted(
        &t,
        r#"frame:
  - answer: {goal: answer, definition_of_done: [the answer is written, it is one word, it is lower case], can_proceed: true}
plan:
  - answer: {next_action: {tool: finish, args: {summary: forty-two}}, rationale: known}
  - answer: {next_action: {tool: file_write, args: {path: answer.md, content: forty-two}}, rationale: write it}
  - answer: {next_action: {tool: finish, args: {summary: forty-two}}, rationale: written}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: answered}
  - answer: {decision: continue, reason: written, finish next}
  - answer: {satisfied: [{item: 1, steps: [2], artifacts: [answer.md]}, {item: 2, steps: [2]}, {item: 3, steps: [2]}], decision: done, reason: answered}
"#,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let trace = t.trace();
    let refused: Vec<&Value> = trace.iter().filter(|e| e["event"] == "tick.refused").collect();
    assert_eq!(refused.len(), 3, "{trace:?}");
    assert!(
        refused.iter().all(|e| e["data"]["reasons"] == serde_json::json!(["step 1's action failed"])),
        "{refused:?}"
    );
    let acts: Vec<&Value> = trace.iter().filter(|e| e["event"] == "act").collect();
    assert_eq!(acts.len(), 3, "{acts:?}");
    assert_eq!(acts[2]["data"]["finish_held"], true, "{:?}", acts[2]);
    let r = t.json("ws/result.json");
    assert_eq!(r["status"], "done", "{r}");
    assert_eq!(r["outcome"], "forty-two", "{r}");
}

/// A Definition of Done item with no words is refused back to the model by the schema itself
/// (its `pattern`, which a grammar also keeps a model to), which frames again; the second answer
/// is taken. An item written as a heading is mended (its marks dropped), and an item the schema
/// admits is never refused, even one that only repeats a heading of the task.
#[test]
fn a_junk_definition_of_done_is_refused_back_to_the_model() {
    let t = T::new();
    let out = scripted_in_context(
        &t,
        "# Context\n\nWrite x.\n\n## Benchmark\n\nx is short.\n",
        r###"frame:
  - answer: {goal: write x, definition_of_done: [definition_of_done, "0", "# Context", Benchmark], can_proceed: true}
  - answer: {goal: write x, definition_of_done: ["## x written", x is short, run ends], can_proceed: true}
plan:
  - answer: {next_action: {tool: file_write, args: {path: artifacts/x.md, content: hi}}, rationale: write it}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1], artifacts: [artifacts/x.md]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: x written, outcome: wrote x}
"###,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let frame = t.trace().into_iter().find(|e| e["event"] == "frame").unwrap();
    assert_eq!(frame["attempt"], 2, "{frame}");
    let transcript = t.read("ws/transcript.md");
    let why = "argument `definition_of_done.1`: \"0\" is a heading or has no words";
    assert!(transcript.contains(why), "{why}: {transcript}");
    assert_eq!(
        transcript.matches("is a heading or has no words").count(),
        1,
        "only the item with no words: {transcript}"
    );
    let memory = t.read("ws/memory.md");
    assert!(memory.contains("- [x] x written") && memory.contains("x is short"), "{memory}");
}

/// A model that frames junk twice escalates with the problem named, instead of a run whose
/// Definition of Done no step can meet.
#[test]
fn a_junk_definition_of_done_twice_escalates() {
    let t = T::new();
    let out = scripted(
        &t,
        "frame:\n  - answer: {goal: g, definition_of_done: [\"1\", \"2\", \"3\"], can_proceed: true}\n  - answer: {goal: g, definition_of_done: [\"1\", \"2\", \"3\"], can_proceed: true}\n",
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let result = t.json("ws/result.json");
    let reason = result["reason"].as_str().unwrap();
    assert!(reason.contains("`definition_of_done.0`: \"1\" is a heading or has no words"), "{result}");
}

/// A write that would leave a file holding something empty is refused, naming the file and its
/// size, so a model copying an example with empty `content` cannot destroy an input; writing a
/// new empty file, or real content over the old, still works.
#[test]
fn an_empty_write_over_a_file_with_content_is_refused() {
    let t = T::new();
    t.write("ws/notes.txt", "the user's notes\n");
    let call = |args: &str| t.al(&["tools", "call", "file_write", "--args", args]).output().unwrap();
    let out = call(r#"{"path": "notes.txt", "content": ""}"#);
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(said.contains("notes.txt holds 17 bytes and this write would leave it empty"), "{said}");
    assert_eq!(t.read("ws/notes.txt"), "the user's notes\n");
    assert_eq!(call(r#"{"path": "empty.txt", "content": ""}"#).status.code(), Some(0));
    assert_eq!(call(r#"{"path": "notes.txt", "content": "new notes"}"#).status.code(), Some(0));
    assert_eq!(t.read("ws/notes.txt"), "new notes");
}

/// Skills are opened with `skill_read`: where it is not offered, the prompt names no skill and
/// never tells the model to call it.
#[test]
fn the_prompt_names_no_skill_when_skill_read_is_not_offered() {
    let t = T::new();
    t.write("ws/agentloop.yaml", "allowed_tools: [file_read, file_write, finish]\n");
    let out = scripted(
        &t,
        "frame:\n  - answer: {goal: g, definition_of_done: [x written, y read, z done], can_proceed: true}\nplan:\n  - answer: {next_action: {tool: finish, args: {}}}\n",
    );
    let transcript = t.read("ws/transcript.md");
    assert!(transcript.contains("## Tools"), "{}: {transcript}", stderr(&out));
    assert!(!transcript.contains("skill_read"), "{transcript}");
}

/// `frame: goal`: Frame asks no model; the goal as given (whitespace folded) is the objective and
/// the one Definition-of-Done item, which Reflect ticks with evidence like any other. A
/// workspace the user has not trusted may not set it over the user's `model`.
#[test]
fn frame_goal_holds_the_run_to_the_goal_with_no_frame_call() {
    let t = T::new();
    t.write(
        "script.yaml",
        "plan:\n  - answer: {next_action: {tool: file_write, args: {path: hello.txt, content: hello}}}\n\
         reflect:\n  - answer: {satisfied: [{item: 1, steps: [1]}], decision: done, outcome: wrote hello.txt}\n",
    );
    t.write("lean.yaml", "frame: goal\n");
    let goal = "Write a file hello.txt\n   containing the word hello.";
    let out = t.al(&["--config", "lean.yaml", "--script", "script.yaml", "run", "--goal", goal]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mem = t.read("ws/memory.md");
    assert!(mem.contains("## Definition of Done\n- [x] Write a file hello.txt containing the word hello."), "{mem}");
    let frame = t.trace().into_iter().find(|e| e["event"] == "frame").unwrap();
    assert_eq!(frame["data"]["from"], "goal", "{frame}");
    assert!(frame.get("model").is_none() && frame.get("usage").is_none(), "no model was asked: {frame}");
    // The dry run says Frame asks nothing.
    let out = t
        .al(&["--config", "lean.yaml", "--script", "script.yaml", "run", "--dry-run", "--goal", goal])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(
        text.contains("frame        no model call (frame: goal)\n") && text.contains("(none sent: with `frame: goal`"),
        "{text}"
    );
    // A tick without evidence is still refused: the goal is no easier to tick than an item.
    t.write(
        "script.yaml",
        "plan:\n  - answer: {next_action: {tool: list_dir, args: {}}}\n  - answer: {next_action: {tool: list_dir, args: {}}}\n\
         reflect:\n  - answer: {satisfied: [{item: 1}], decision: done}\n  - answer: {decision: escalate, reason: stuck}\n",
    );
    let out = t
        .al(&["--config", "lean.yaml", "--script", "script.yaml", "run", "--force", "--goal", "x y"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(t.read("ws/memory.md").contains("- [ ] x y"));
    // Untrusted, `goal` over the user's `model` widens; `model` is always taken.
    t.write("ws/agentloop.yaml", "frame: goal\n");
    let out =
        t.untrusted().args(["-w", "ws", "--script", "script.yaml", "run", "--force", "--goal", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("`frame` (a Definition of Done of the goal alone"), "{}", stderr(&out));
    t.write("ws/agentloop.yaml", "frame: model\n");
    let out = t.untrusted().args(["-w", "ws", "config", "show"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// `prompts: lean` (with `frame: goal`): each call sends its own answer tool alone and a prompt
/// of a few lines; Plan's schema holds `next_action` alone, without descriptions and without
/// `finish` while the item is open; Reflect's `done` must tick the open item citing a step that
/// succeeded. The run ends done through the binary as any other.
#[test]
fn lean_prompts_send_few_lines_and_schemas_that_hold_a_small_model() {
    let s = Server::start_with(|_, req| {
        let tool = forced_tool(&req.json());
        let args = match tool.as_str() {
            "plan_answer" => {
                json!({"next_action": {"tool": "file_write", "args": {"path": "hello.txt", "content": "hello"}}})
            }
            // Files a small model cites beside its steps are not in the lean tick: dropped.
            _ => {
                json!({"satisfied": [{"item": 1, "steps": [1], "artifacts": ["tid:4"]}], "decision": "done", "outcome": "wrote hello.txt"})
            }
        };
        tool_reply(&tool, &args.to_string(), "tool_calls")
    });
    let t = T::new();
    t.write("ws/notes.txt", "keep me\n");
    let out = lean_run(&t, &s.url, "ws", "Read notes.txt, then write a file hello.txt containing the word hello.");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(t.read("ws/hello.txt"), "hello");
    assert_eq!(s.count(), 2, "no frame call: a plan and a reflection");
    let plan = nth(&s, "plan_answer", 0);
    assert_eq!(plan["tools"].as_array().unwrap().len(), 1, "its own tool alone");
    let params = &plan["tools"][0]["function"]["parameters"];
    assert_eq!(params["required"], json!(["next_action"]), "{params}");
    assert!(params["properties"].get("rationale").is_none() && !params.to_string().contains("description"), "{params}");
    let offered: Vec<&str> = params["properties"]["next_action"]["anyOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["properties"]["tool"]["enum"][0].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["file_read", "file_write", "list_dir"], "no finish while the item is open");
    // Paths held to what exists and what the goal names: the input it names is not written,
    // and the run's own `artifacts/`, empty, is not offered to list.
    let args = |i: usize| &params["properties"]["next_action"]["anyOf"][i]["properties"]["args"]["properties"]["path"];
    assert_eq!(args(0)["enum"], json!(["notes.txt"]), "{params}");
    assert_eq!((args(1)["enum"].clone(), args(2)["enum"].clone()), (json!(["hello.txt"]), json!(["."])), "{params}");
    let system = plan["messages"][0]["content"].as_str().unwrap();
    assert!(system.starts_with("You are agentloop: you work toward one goal"), "{system}");
    assert!(system.contains("Tools: file_read, file_write, list_dir, finish."), "{system}");
    let prompt = plan["messages"][1]["content"].as_str().unwrap();
    assert!(prompt.starts_with("Goal: Read notes.txt, then write a file hello.txt containing the word hello.\nDefinition of Done:\n1. [ ] Read"), "{prompt}");
    assert!(!prompt.contains("<memory.md>") && prompt.contains("Steps so far: none."), "{prompt}");
    let reflect = nth(&s, "reflect_answer", 0);
    let prompt = reflect["messages"][1]["content"].as_str().unwrap();
    assert!(
        prompt.contains("Step 1: file_write {\"path\":\"hello.txt\",\"content\":\"hello\"}\nstep 1: status ok"),
        "{prompt}"
    );
    let done = &reflect["tools"][0]["function"]["parameters"]["anyOf"][0];
    assert_eq!(done["required"], json!(["satisfied", "decision"]), "{done}");
    assert_eq!(done["properties"]["satisfied"]["items"]["properties"]["steps"]["items"]["enum"], json!([1]));
    assert_eq!(done["properties"]["satisfied"]["minItems"], json!(1));
    // Lean prompts ask Reflect and Plan apart: fusing them too is refused, not ignored.
    t.write("lean.yaml", "prompts: lean\nllm: {fuse_phases: true}\n");
    let out = t.al(&["--config", "lean.yaml", "run", "--dry-run", "--goal", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("`llm.fuse_phases: true` cannot apply with `prompts: lean`"), "{}", stderr(&out));
    // Its union-shaped Reflect schema is a local server's: the Anthropic API's is refused.
    t.write("lean.yaml", "prompts: lean\n");
    let out = t
        .al(&["--config", "lean.yaml", "--provider", "anthropic", "run", "--dry-run", "--goal", "x"])
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`prompts: lean` is for a model on a local server; the Anthropic API"),
        "{}",
        stderr(&out)
    );
}

/// The tools of a lean Plan answer, in the order its schema offers them.
fn offered(plan: &Value) -> Vec<String> {
    let next = &plan["tools"][0]["function"]["parameters"]["properties"]["next_action"]["anyOf"];
    next.as_array().unwrap().iter().map(|v| v["properties"]["tool"]["enum"][0].as_str().unwrap().to_string()).collect()
}

/// A lean Plan offers what a small model should pick next first: reading while the goal's
/// input is unread, `file_write` first once the step just run read it (or listed the folder,
/// for a goal that names no input), no `file_read` when there is no file to read, and of the
/// optional arguments only `path` (the others keep their defaults).
#[test]
fn a_lean_plan_offers_writing_first_once_the_goals_input_is_read() {
    let plans = std::sync::atomic::AtomicUsize::new(0);
    let s = Server::start_with(move |_, req| {
        let tool = forced_tool(&req.json());
        let args = match tool.as_str() {
            "plan_answer" => match plans.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                0 => json!({"next_action": {"tool": "file_read", "args": {"path": "notes.txt"}}}),
                _ => json!({"next_action": {"tool": "file_write", "args": {"path": "out.txt", "content": "keep me"}}}),
            },
            _ => match req.json().to_string().contains("Step 1:") {
                true => json!({"decision": "continue"}),
                false => json!({"satisfied": [{"item": 1, "steps": [2]}], "decision": "done"}),
            },
        };
        tool_reply(&tool, &args.to_string(), "tool_calls")
    });
    let t = T::new();
    t.write("ws/notes.txt", "keep me\n");
    let out = lean_run(&t, &s.url, "ws", "Copy the first line of notes.txt to out.txt.");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(t.read("ws/out.txt"), "keep me");
    let (first, second) = (nth(&s, "plan_answer", 0), nth(&s, "plan_answer", 1));
    assert_eq!(offered(&first), ["file_read", "file_write", "list_dir"]);
    assert_eq!(offered(&second), ["file_write", "file_read", "list_dir"], "notes.txt was just read");
    let args = |v: &Value, tool: &str| {
        let next = v["tools"][0]["function"]["parameters"]["properties"]["next_action"]["anyOf"].clone();
        let variant = next.as_array().unwrap().iter().find(|x| x["properties"]["tool"]["enum"][0] == tool).cloned();
        let props = variant.unwrap()["properties"]["args"]["properties"].as_object().unwrap().clone();
        props.keys().cloned().collect::<Vec<_>>()
    };
    assert_eq!(args(&first, "file_read"), ["path"], "offset, limit and encoding keep their defaults");
    assert_eq!(args(&first, "file_write"), ["path", "content"], "mode and encoding keep their defaults");
    // Nothing to read: no `file_read`.
    t.write("empty/.keep", "");
    let _ = lean_run(&t, &s.url, "empty", "Write a file hello.txt containing the word hello.");
    assert_eq!(offered(&nth(&s, "plan_answer", 2)), ["file_write", "list_dir"]);
}

/// A lean run shows a listing of the workspace as the names it may read — none of agentloop's
/// own files, no empty `artifacts/`, no sizes — in the prompts and in plan.md's step line, and
/// offers `file_write` first after it when the goal names no input.
#[test]
fn a_lean_run_shows_a_listing_as_the_names_it_may_read() {
    let s = Server::start_with(move |_, req| {
        let body = req.json();
        let tool = forced_tool(&body);
        let prompt = body["messages"][1]["content"].as_str().unwrap_or_default().to_string();
        let args = match (tool.as_str(), prompt.contains("Steps so far: none.")) {
            ("plan_answer", true) => json!({"next_action": {"tool": "list_dir", "args": {}}}),
            ("plan_answer", false) => {
                json!({"next_action": {"tool": "file_write", "args": {"path": "files.txt", "content": "a.txt b.md"}}})
            }
            _ if prompt.contains("Step 1:") => json!({"satisfied": [], "decision": "continue"}),
            _ => json!({"satisfied": [{"item": 1, "steps": [2]}], "decision": "done"}),
        };
        tool_reply(&tool, &args.to_string(), "tool_calls")
    });
    let t = T::new();
    t.write("ws/a.txt", "a\n");
    t.write("ws/b.md", "b\n");
    let out = lean_run(&t, &s.url, "ws", "List the names of the files here in files.txt.");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let reflect = nth(&s, "reflect_answer", 0);
    let prompt = reflect["messages"][1]["content"].as_str().unwrap();
    assert!(prompt.contains("output:\na.txt\nb.md\n"), "{prompt}");
    let plan = nth(&s, "plan_answer", 1);
    let prompt = plan["messages"][1]["content"].as_str().unwrap();
    assert!(prompt.contains("- step 1: list_dir ok — a.txt b.md\nThe last step's output:\na.txt\nb.md\n"), "{prompt}");
    assert_eq!(offered(&plan), ["file_write", "file_read", "list_dir"]);
    assert!(t.read("ws/plan.md").contains("- step 1: list_dir ok — a.txt b.md\n"), "{}", t.read("ws/plan.md"));
    // Lean calls sample greedily unless a temperature is set.
    assert!(nth(&s, "reflect_answer", 1)["temperature"] == json!(0.0) && plan["temperature"] == json!(0.0), "{plan}");
    let flags = ["-w", "ws", "--config", "lean.yaml", "--provider", "openai", "--base-url", &s.url, "--model", "m"];
    let mut cmd = t.cmd();
    cmd.args(flags).args(["run", "--new", "--goal", "List the names of the files here in more.txt."]);
    // (The fake answers for files.txt: only the request matters here.)
    let _ = cmd.env("AGENTLOOP_LLM__TEMPERATURE", "0.7").output().unwrap();
    assert_eq!(nth(&s, "plan_answer", 2)["temperature"], json!(0.7));
}

/// Listing the workspace again and again is the same action with the same result, though
/// agentloop's own files change size at every step: each repeat raises frustration, and the
/// third meets `max_repeats`.
#[test]
fn listing_the_workspace_again_and_again_counts_as_a_repeat() {
    let t = T::new();
    t.write("ws/notes.txt", "keep me\n");
    let frame =
        "  - answer: {goal: write x, definition_of_done: [x written, x is short, run ends], can_proceed: true}\n";
    let plan = "  - answer: {next_action: {tool: list_dir, args: {path: .}}, rationale: look}\n";
    let reflect = "  - answer: {decision: continue, reason: look again}\n";
    t.write(
        "script.yaml",
        &format!("frame:\n{}plan:\n{}reflect:\n{}", frame.repeat(2), plan.repeat(3), reflect.repeat(3)),
    );
    let out = t.al(&["--script", "script.yaml", "--max-steps", "3", "run", "--goal", "write x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let trace = t.read("ws/trace.jsonl");
    let repeats =
        trace.lines().filter(|l| l.contains("\"reason\":\"the same action (list_dir) again with the same result\""));
    assert_eq!(repeats.count(), 2, "steps 2 and 3 repeat step 1:\n{trace}");
    let reason = t.json("ws/result.json")["reason"].as_str().unwrap_or_default().to_string();
    assert!(
        reason.contains("the same action (list_dir) was repeated 3 times with the same result (max_repeats)"),
        "{reason}"
    );
}
