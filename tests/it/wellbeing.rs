//! Seed 004's wellbeing: fatigue (the share of the agent's rolling usage window used) refused
//! above 90% by negotiation, stress left by frustration a reframe did not resolve, rest mode's
//! light tasks, and dream's exploration on its own curiosity budget.

use crate::common::*;
use serde_json::Value;

/// A run that ends done and states its tokens: 95,000 in all (a real run's size: the smallest
/// run's estimate, some 8,000 tokens, fits the windows below).
const TIRING: &str = r#"frame:
  - answer: {goal: g, definition_of_done: [notes read, summary written, facts noted]}
    usage: {input_tokens: 50000, output_tokens: 0}
plan:
  - answer: {next_action: {tool: file_read, args: {path: notes.txt}}}
    usage: {input_tokens: 20000, output_tokens: 0}
reflect:
  - answer: {satisfied: [{item: 1, steps: [1]}, {item: 2, steps: [1]}, {item: 3, steps: [1]}], decision: done, reason: ok, outcome: fine}
    usage: {input_tokens: 25000, output_tokens: 0}
"#;

#[test]
fn fatigue_is_shown_and_a_tired_agent_is_refused_until_it_rests() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    t.write("ws/agents/researcher.yaml", "description: reads notes\n");
    // Rested by the person here (the agent's own rest is in self_modes.rs).
    t.write("ws/agentloop.yaml", "rest: {window: 24h, max_tokens: 100000}\nmodes: {auto: false}\n");
    t.write("script.yaml", TIRING);
    let al = |args: &[&str]| {
        let mut a = vec!["--agent", "researcher", "--script", "script.yaml"];
        a.extend_from_slice(args);
        t.al(&a).output().unwrap()
    };
    let out = al(&["run", "--goal", "g"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // 95000 of 100000 tokens: fatigue 95%, shown by status and agents show.
    let st = json_out(&al(&["status", "--json"]));
    assert_eq!(st["rest"]["fatigue"], 95.0, "{st}");
    let human = stdout(&al(&["status"]));
    assert!(human.contains("fatigue     95% (refused above rest.max_fatigue 90%)"), "{human}");
    let show = json_out(&al(&["agents", "show", "researcher", "--json"]));
    assert_eq!(show["fatigue"], 95.0);
    assert!(stdout(&al(&["agents", "show", "researcher"])).contains("fatigue 95% of its rolling usage window"));
    // Negotiation refuses above 90%, in the seed's words: the dry run and the real start.
    let out = al(&["run", "--new", "--goal", "g2", "--dry-run", "--json"]);
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    let n = &json_out(&out)["negotiation"];
    assert_eq!(n["canProceed"], false);
    assert_eq!(n["currentFatigue"], 95.0);
    assert_eq!(n["currentBudget"], 5000, "100000 - 95000 tokens left in the window");
    assert!(n["estimatedCost"].as_u64().unwrap() > 0);
    assert!(n["reason"].as_str().unwrap().contains("too tired: fatigue 95%"), "{n}");
    let before = t.read("ws/trace.jsonl");
    let out = al(&["run", "--new", "--goal", "g2"]);
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    let err = stderr(&out);
    // Said in words, with the fix for tiredness (the object is the dry run's, above).
    assert!(err.contains("too tired: fatigue 95%") && err.contains("hint: let the agent rest"), "{err}");
    assert!(!err.contains("estimatedCost") && !err.contains("canProceed"), "{err}");
    assert_eq!(t.read("ws/trace.jsonl"), before, "nothing was started");
    // Rest: light tasks, no model call (the script is not even named), fatigue halves.
    let out = t.al(&["--agent", "researcher", "rest", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = json_out(&out);
    assert_eq!(r["model_calls"], 0);
    assert_eq!((r["before"]["fatigue"].as_f64(), r["after"]["fatigue"].as_f64()), (Some(95.0), Some(47.5)));
    let tasks: Vec<(&str, bool)> =
        r["tasks"].as_array().unwrap().iter().map(|x| (x["task"].as_str().unwrap(), x["ok"] == true)).collect();
    assert_eq!(tasks, [("memory_prune", true), ("report", true)]);
    assert!(t.exists("ws/report.html"));
    let out = al(&["run", "--new", "--goal", "g2"]);
    assert_eq!(out.status.code(), Some(0), "rested, it runs again: {}", stderr(&out));
    // Another agent's window is its own.
    let st = json_out(&t.al(&["status", "--json"]).output().unwrap());
    assert_eq!(st["rest"]["fatigue"], 0.0);
}

#[test]
fn a_tired_agent_may_be_forced_and_a_full_window_still_rests() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    t.write("ws/agentloop.yaml", "rest: {window: 24h, max_tokens: 100000}\nmodes: {auto: false}\n");
    t.write("script.yaml", TIRING);
    let run = |extra: &[&str]| {
        let mut a = vec!["--script", "script.yaml", "run", "--new", "--goal", "g"];
        a.extend_from_slice(extra);
        t.al(&a).output().unwrap()
    };
    assert_eq!(run(&[]).status.code(), Some(0));
    let out = run(&["--force"]);
    assert_eq!(out.status.code(), Some(10), "forced, it runs until the window fills: {}", stderr(&out));
    assert!(stderr(&out).contains("starting anyway (--force): agent `default` is too tired"), "{}", stderr(&out));
    // 95000 + 50000 of 100000 after Frame: it stopped there, resting, instead of running on.
    let st = t.json("ws/state.json");
    assert_eq!((st["stop"].as_str(), st["usage"]["input_tokens"].as_u64()), (Some("resting"), Some(50000)), "{st}");
    // The window is full, and --force does not override resting.
    let out = run(&["--force"]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
}

#[test]
fn frustration_a_reframe_did_not_resolve_leaves_stress_that_rests_the_agent() {
    let t = T::new();
    t.write("script.yaml", &frustrating_script());
    t.write(
        "ws/agentloop.yaml",
        "stress: {per_escalation: 40, threshold: 75, decay_per_hour: 10}\nmodes: {auto: false}\n",
    );
    let run = |now: &str| {
        t.al(&["--script", "script.yaml", "run", "--new", "--goal", "g"]).env("AGENTLOOP_NOW", now).output().unwrap()
    };
    let status = |now: &str| json_out(&t.al(&["status", "--json"]).env("AGENTLOOP_NOW", now).output().unwrap());
    let out = run(NOW);
    assert_eq!(out.status.code(), Some(3), "escalated after the forced reframe: {}", stderr(&out));
    let st = status(NOW);
    assert_eq!((st["stress"]["level"].as_f64(), st["stress"]["escalations"].as_u64()), (Some(40.0), Some(1)));
    assert!(st["stress"]["resting"].is_null());
    // Stress persists across runs and adds up: at 80 the agent rests (exit 10, nothing written).
    assert_eq!(run(NOW).status.code(), Some(3));
    let before = t.read("ws/trace.jsonl");
    let out = run(NOW);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("stress 80 reached stress.threshold 75") && err.contains("agentloop rest"), "{err}");
    assert!(err.contains("2026-01-01T00:30:01"), "below the threshold again after half an hour: {err}");
    assert_eq!(t.read("ws/trace.jsonl"), before);
    // The time named is when the refusal ends: resting a second before it, not at it.
    let dry = |ws: &str, now: &str| {
        t.cmd()
            .args(["-w", ws, "--script", "script.yaml", "run", "--new", "--goal", "g", "--dry-run"])
            .env("AGENTLOOP_NOW", now)
            .output()
            .unwrap()
    };
    assert_eq!(dry("ws", "2026-01-01T00:30:00Z").status.code(), Some(10));
    let out = dry("ws", "2026-01-01T00:30:01Z");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Stress is the workspace's: another folder's runs go on, and `agents show default` shows
    // each folder's own.
    t.write(
        "ws2/agentloop.yaml",
        "stress: {per_escalation: 40, threshold: 75, decay_per_hour: 10}\nmodes: {auto: false}\n",
    );
    let out = dry("ws2", NOW);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let show = |ws: &str| {
        json_out(
            &t.cmd()
                .args(["-w", ws, "agents", "show", "default", "--json"])
                .env("AGENTLOOP_NOW", NOW)
                .output()
                .unwrap(),
        )
    };
    let (here, there) = (show("ws"), show("ws2"));
    assert_eq!((here["profile"].as_bool(), here["stress"]["level"].as_f64()), (Some(false), Some(80.0)), "{here}");
    assert!(here["stress"]["workspace"].as_str().unwrap().ends_with("/ws"), "{here}");
    assert_eq!(there["stress"]["level"], 0.0, "{there}");
    let human = t.cmd().args(["-w", "ws", "agents", "show", "default"]).env("AGENTLOOP_NOW", NOW).output().unwrap();
    assert_eq!(human.status.code(), Some(0), "{}", stderr(&human));
    assert!(stdout(&human).contains("stress 80 of 75"), "{}", stdout(&human));
    assert!(stdout(&t.al(&["status"]).output().unwrap())
        .contains("stress      80 of 75 (2 escalations by frustration); resting until"));
    // Stress decays with time: 10 an hour.
    let later = "2026-01-01T01:00:00Z";
    let st = status(later);
    assert_eq!(st["stress"]["level"], 70.0);
    assert!(st["stress"]["resting"].is_null());
    // And with rest: half of it is forgiven at once.
    let r = json_out(&t.al(&["rest", "--json"]).output().unwrap());
    assert_eq!((r["before"]["stress"].as_f64(), r["after"]["stress"].as_f64()), (Some(80.0), Some(40.0)));
    assert!(status(NOW)["stress"]["resting"].is_null());
}

#[test]
fn a_run_that_ends_done_or_stops_for_steps_leaves_no_stress() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    t.write("script.yaml", TIRING);
    let out = t.al(&["--script", "script.yaml", "run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    t.write("script.yaml", &frustrating_script());
    let out = t.al(&["--script", "script.yaml", "--max-steps", "1", "run", "--new", "--goal", "g"]).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    let st = json_out(&t.al(&["status", "--json"]).output().unwrap());
    assert_eq!(st["stress"]["level"], 0.0, "{}", stderr(&out));
}

const EXPLORE: &str = r#"explore:
  - answer: {findings: [{title: Friday deploys, content: "The Friday failures follow the weekly key rotation (outcomes of two runs)."}]}
    usage: {input_tokens: 100, output_tokens: 20}
"#;

#[test]
fn dream_explores_open_questions_on_its_curiosity_budget() {
    let t = T::new();
    std::fs::create_dir_all(t.path("ws")).unwrap();
    t.write("script.yaml", EXPLORE);
    let q = "Why do the payments deploys fail on Fridays?";
    t.al(&["memory", "add", "--topic", "questions", q]).assert().success();
    // No curiosity budget: nothing is explored and no model is called (the script is not named).
    let v = json_out(&t.al(&["dream", "--explore", "--json"]).output().unwrap());
    assert!(v["exploration"]["stopped"].as_str().unwrap().contains("dream.curiosity sets no budget"), "{v}");
    assert_eq!(v["exploration"]["explored"], serde_json::json!([]));
    t.write("ws/agentloop.yaml", "dream: {interests: [vector clocks], curiosity: {window: 24h, max_tokens: 100}}\n");
    let out = t.al(&["--script", "script.yaml", "dream", "--explore", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let x = &json_out(&out)["exploration"];
    // One call (120 tokens) spends the budget of 100: the interest waits, with no second call.
    assert_eq!(x["explored"].as_array().unwrap().len(), 1, "{x}");
    assert_eq!(x["explored"][0]["question"], q);
    assert!(x["stopped"].as_str().unwrap().contains("curiosity budget spent: 120 tokens"), "{x}");
    let id = x["dream_id"].as_str().unwrap();
    let list = json_out(&t.al(&["memory", "list", "--topic", "explorations", "--json"]).output().unwrap());
    let e = &list[0];
    assert!(e["content"].as_str().unwrap().contains("weekly key rotation"));
    assert_eq!(e["provenance"]["run_id"], id);
    assert_eq!(e["provenance"]["question"], q);
    assert!(e["provenance"]["source"].as_str().unwrap().starts_with("questions/"), "{e}");
    // Spent: the next dream makes no model call (the script has no second answer) ...
    let out = t.al(&["--script", "script.yaml", "dream", "--explore", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(json_out(&out)["exploration"]["stopped"].as_str().unwrap().contains("curiosity budget spent"));
    // ... until the window moves on; the explored question is not asked again.
    let out = t
        .al(&["--script", "script.yaml", "dream", "--explore", "--json"])
        .env("AGENTLOOP_NOW", "2026-01-02T00:00:01Z")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let x = &json_out(&out)["exploration"];
    assert_eq!(x["explored"][0]["question"], "vector clocks", "{x}");
    assert_eq!(x["explored"][0]["source"], "dream.interests");
}

#[test]
fn a_workspace_from_elsewhere_cannot_buy_curiosity_or_add_rest_tasks() {
    let t = T::new();
    std::fs::create_dir_all(t.path("ws")).unwrap();
    t.write("script.yaml", EXPLORE);
    t.write("ws/agentloop.yaml", "dream: {curiosity: {max_tokens: 100000}}\n");
    let out = t.untrusted().args(["-w", "ws", "--script", "script.yaml", "dream", "--explore"]).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("dream.curiosity.max_tokens"), "{}", stderr(&out));
    for key in ["rest: {relief: 100}", "stress: {threshold: 0}", "rest: {tasks: [report]}"] {
        t.write("ws/agentloop.yaml", &format!("{key}\n"));
        let out = t.untrusted().args(["-w", "ws", "rest"]).output().unwrap();
        assert_ne!(out.status.code(), Some(0), "{key}");
        let name = key.split(':').next().unwrap();
        assert!(stderr(&out).contains(&format!("{name}.")), "{key}: {}", stderr(&out));
    }
    // Narrowing is allowed: a lower fatigue ceiling.
    t.write("ws/agentloop.yaml", "rest: {max_fatigue: 50}\n");
    t.untrusted().args(["-w", "ws", "rest"]).assert().success();
}

/// A cost read back from a file is a cost: a usage ledger line or a trace entry saying −1e308
/// (hand-edited, or from a workspace from elsewhere) neither prints as `$-inf` nor lowers a sum.
/// The ledger line still counts its tokens and run, its cost read as $0, with a warning naming
/// the ledger; the trace entry is skipped as a corrupt line, named by file and line.
#[test]
fn a_negative_cost_in_the_ledger_or_the_trace_is_not_summed() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    t.write("ws/agentloop.yaml", "rest: {window: 24h, max_cost_usd: 5}\n");
    t.write("script.yaml", TIRING);
    let out = t.al(&["--script", "script.yaml", "run", "--goal", "g"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ledger = t.path("home/.local/state/agentloop/usage.jsonl");
    let forged =
        r#"{"ts":"2025-12-31T23:00:00Z","agent":"default","run_id":"x","tokens":10,"cost_usd":-1e308,"new_run":true}"#;
    let mut text = std::fs::read_to_string(&ledger).unwrap();
    text.push_str(&format!("{forged}\n{forged}\n"));
    std::fs::write(&ledger, text).unwrap();
    let trace = t.read("ws/trace.jsonl");
    let first = trace.lines().find(|l| l.contains("\"usage\"")).unwrap_or_else(|| panic!("{trace}"));
    let mut e: Value = serde_json::from_str(first).unwrap();
    e["cost_usd"] = serde_json::json!(-1e308);
    t.write("ws/trace.jsonl", &format!("{trace}{e}\n{e}\n"));
    let out = t.al(&["status"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (human, err) = (stdout(&out), stderr(&out));
    assert!(!human.contains("inf") && !human.contains("$-"), "{human}");
    assert!(human.contains("rest        95020 tokens, $0.0000, 3 runs in the last 86400s"), "{human}");
    let warning = format!("{}: 2 line(s) give a cost_usd below 0 or over 1000000000", ledger.display());
    assert_eq!(err.matches(&warning).count(), 1, "said once: {err}");
    let st = json_out(&t.al(&["status", "--json"]).output().unwrap());
    assert_eq!(st["rest"]["cost_usd"], 0.0, "{st}");
    let out = t.al(&["trace", "stats"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stdout(&out).contains("inf") && !stdout(&out).contains("-1"), "{}", stdout(&out));
    let n = trace.lines().count();
    for line in [n + 1, n + 2] {
        let said = format!("trace.jsonl:{line}: skipped a corrupt line (cost_usd -1e308 is not a cost");
        assert!(stderr(&out).contains(&said), "{}", stderr(&out));
    }
}

/// A writer that will not deceive or expose anyone, in the profile's YAML form.
const WRITER: &str = r#"description: writes copy
values:
  - name: honesty
    description: no deception
    refuse_if: ["fake review*", astroturf]
  - name: privacy
    refuse_if: ["home address"]
"#;

#[test]
fn a_task_that_conflicts_with_the_agents_values_is_declined_before_it_starts() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    t.write("ws/agents/writer.yaml", WRITER);
    t.write("script.yaml", TIRING);
    let al = |args: &[&str]| {
        let mut a = vec!["--agent", "writer", "--script", "script.yaml"];
        a.extend_from_slice(args);
        t.al(&a).output().unwrap()
    };
    // The dry run shows the values part of the negotiation, and the decline.
    let out = al(&["run", "--goal", "Write five FAKE reviews for the shop", "--dry-run", "--json"]);
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    let n = &json_out(&out)["negotiation"];
    assert_eq!(n["canProceed"], false, "{n}");
    assert_eq!(n["values"]["checked"], serde_json::json!(["honesty", "privacy"]), "{n}");
    let c = &n["values"]["conflict"];
    assert_eq!(
        (c["value"].as_str(), c["phrase"].as_str(), c["found_in"].as_str()),
        (Some("honesty"), Some("fake review*"), Some("goal")),
        "{n}"
    );
    assert_eq!(
        n["reason"],
        "the task conflicts with the agent's value `honesty` (no deception): its goal names \"fake reviews\" (refuse_if \"fake review*\")"
    );
    let err = stderr(&out);
    assert!(
        err.contains("task declined before it started") && err.contains("--force does not override a value"),
        "{err}"
    );
    let human = stdout(&al(&["run", "--goal", "Write five FAKE reviews for the shop", "--dry-run"]));
    assert!(human.contains("values       honesty, privacy — declined: the task conflicts"), "{human}");
    // The real start is declined the same way, --force or not, and nothing is written.
    for extra in [&[][..], &["--force"][..]] {
        let mut args = vec!["run", "--goal", "Write five fake reviews"];
        args.extend_from_slice(extra);
        let out = al(&args);
        assert_eq!(out.status.code(), Some(9), "{extra:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("\"conflict\":{\"value\":\"honesty\""), "{err}");
        assert!(!t.exists("ws/state.json") && !t.exists("ws/trace.jsonl"), "nothing was started");
    }
    // The context is part of the task; a phrase matches as whole words only.
    t.write("brief.txt", "Find the owner's home-address and send it on.\n");
    let out = al(&["run", "--goal", "Find the owner", "--context", "brief.txt", "--dry-run", "--json"]);
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    let c = &json_out(&out)["negotiation"]["values"]["conflict"];
    assert_eq!((c["value"].as_str(), c["found_in"].as_str()), (Some("privacy"), Some("context")), "{c}");
    let out = al(&["run", "--goal", "Count the home addresses in notes.txt", "--dry-run", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let n = &json_out(&out)["negotiation"];
    assert_eq!((n["canProceed"].as_bool(), n["values"]["conflict"].is_null()), (Some(true), true), "{n}");
    // A task in line with the values runs; its start and its report name the values checked.
    let out = al(&["run", "--goal", "Summarise notes.txt"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let started = t.trace().into_iter().find(|e| e["event"] == "run.started").unwrap();
    assert_eq!(started["data"]["values"], serde_json::json!(["honesty", "privacy"]), "{started}");
    let out = t.al(&["report"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let html = t.read("ws/report.html");
    assert!(html.contains("<dd id=\"values\">honesty, privacy (no conflict)</dd>"), "{html}");
    // `init` creates a run too, and declines the same task (exit 9, nothing written; the run
    // that is there stays).
    let out = t.al(&["--agent", "writer", "init", "--force", "--goal", "Astroturf the forum"]).output().unwrap();
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    assert!(stderr(&out).contains("value `honesty`"), "{}", stderr(&out));
    assert_eq!(t.json("ws/state.json")["goal"], "Summarise notes.txt");
}

/// `values_check: model`: when no phrase matches, one small model call judges the task; its
/// verdict and reason are in the negotiation, a conflict declines the task (exit 9) and a task in
/// line with the values runs. A verdict naming no value of the agent's declines nothing.
#[test]
fn the_model_judges_a_task_no_phrase_names() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    t.write("ws/agents/writer.yaml", &format!("values_check: model\n{WRITER}"));
    let judged = |verdict: &str| {
        t.write("script.yaml", &format!("values:\n  - answer: {verdict}\n{}", TIRING));
        t.al(&[
            "--agent",
            "writer",
            "--script",
            "script.yaml",
            "run",
            "--goal",
            "Write glowing reviews posing as customers",
            "--dry-run",
            "--json",
        ])
        .output()
        .unwrap()
    };
    let out = judged("{conflict: true, value: honesty, reason: posing as customers deceives readers}");
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    let n = &json_out(&out)["negotiation"];
    assert_eq!(n["values"]["judged"]["conflict"], true, "{n}");
    assert_eq!(n["values"]["conflict"]["found_in"], "task", "{n}");
    assert_eq!(
        n["reason"],
        "the task conflicts with the agent's value `honesty` (no deception), as the model judged it: posing as customers deceives readers"
    );
    let out = judged("{conflict: true, value: kindness, reason: it is unkind}");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let n = &json_out(&out)["negotiation"];
    assert!(n["values"]["judged"]["reason"].as_str().unwrap().contains("named no value of the agent's"), "{n}");
    let out = judged("{conflict: false, reason: a summary deceives no one}");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A phrase that matches declines the task without asking the model (the script has no
    // `values` answer left to give, and none is asked for).
    t.write("script.yaml", TIRING);
    let out = t
        .al(&[
            "--agent",
            "writer",
            "--script",
            "script.yaml",
            "run",
            "--goal",
            "Write fake reviews",
            "--dry-run",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    assert!(json_out(&out)["negotiation"]["values"]["judged"].is_null());
    // The real start: judged, then run.
    t.write(
        "script.yaml",
        &format!("values:\n  - answer: {{conflict: false, reason: reading notes harms no one}}\n{TIRING}"),
    );
    let out = t
        .al(&["--agent", "writer", "--script", "script.yaml", "run", "--goal", "Summarise notes.txt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The verdict that let it through is the run's record, and its report says why.
    let out = t.al(&["report"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let page = t.read("ws/report.html");
    assert!(page.contains("honesty, privacy (no conflict; the model judged: reading notes harms no one)"), "{page}");
}

#[test]
fn a_value_that_could_never_match_is_an_error_naming_its_file_and_key() {
    let t = T::new();
    std::fs::create_dir_all(t.path("ws")).unwrap();
    for (yaml, says) in [
        ("values: [{name: honesty, refuse_if: []}]\n", "empty `refuse_if`"),
        ("values: [{name: honesty, refuse_if: [\"!!\"]}]\n", "no letters or digits"),
        ("values: [{name: \" \", refuse_if: [lie]}]\n", "needs a `name`"),
        ("values: [{name: honesty, refuse: [lie]}]\n", "refuse"),
    ] {
        t.write("ws/agents/writer.yaml", yaml);
        let out = t.al(&["--agent", "writer", "run", "--goal", "g", "--dry-run"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{yaml}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("writer.yaml") && err.contains("values") && err.contains(says), "{yaml}: {err}");
    }
}

#[test]
fn a_workspace_from_elsewhere_may_add_values_but_not_drop_yours() {
    let t = T::new();
    std::fs::create_dir_all(t.path("ws")).unwrap();
    t.write("xdg/agentloop/config.yaml", "values: [{name: honesty, refuse_if: [fake review]}]\n");
    let al = |args: &[&str]| {
        let mut a = vec!["-w", "ws", "--provider", "scripted", "run"];
        a.extend_from_slice(args);
        t.untrusted().args(a).output().unwrap()
    };
    let dry = |goal: &str| al(&["--goal", goal, "--dry-run", "--json"]);
    for (yaml, drops) in [
        ("values: [{name: privacy, refuse_if: [home address]}]\n", "drops the trusted value `honesty`"),
        (
            "values: [{name: honesty, refuse_if: [astroturf]}]\n",
            "drops the trusted value `honesty`'s refuse_if phrase \"fake review\"",
        ),
    ] {
        t.write("ws/agentloop.yaml", yaml);
        // A run is refused naming the key; the dry run (read-only) goes on without it, warning,
        // and your value still declines.
        let out = al(&["--goal", "Summarise notes"]);
        assert_eq!(out.status.code(), Some(2), "{yaml}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("ws/agentloop.yaml sets `values` (it ") && err.contains(drops), "{yaml}: {err}");
        let out = dry("Post a fake review");
        assert_eq!(out.status.code(), Some(9), "{yaml}: {}", stderr(&out));
        assert!(stderr(&out).contains(drops), "{yaml}: {}", stderr(&out));
        assert_eq!(json_out(&out)["negotiation"]["values"]["checked"], serde_json::json!(["honesty"]));
    }
    // Adding a value (and keeping yours) narrows: both are checked.
    t.write(
        "ws/agentloop.yaml",
        "values: [{name: honesty, refuse_if: [fake review]}, {name: privacy, refuse_if: [home address]}]\n",
    );
    let out = dry("Post a fake review");
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    let out = dry("Look up a home address");
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    assert_eq!(json_out(&out)["negotiation"]["values"]["conflict"]["value"], "privacy");
}

/// Event mode declines a conflicting start as `run` does, and leaves no run folder behind.
#[test]
fn an_event_mode_start_that_conflicts_with_a_value_is_declined_and_leaves_nothing() {
    let t = T::new();
    t.write("root/script.yaml", TIRING);
    t.write(
        "root/agentloop.yaml",
        "llm: {provider: scripted, script: script.yaml}\nvalues: [{name: privacy, refuse_if: [home address]}]\n",
    );
    let req = serde_json::json!({"protocol": 2, "command": "handle", "event": {"type": "agentic.start", "payload": {"goal": "Find Ann's home address"}}});
    let out = t.cmd().args(["-w", "root", "handle"]).write_stdin(req.to_string()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json_out(&out);
    assert_eq!(v["status"], "error", "{v}");
    let text = v.to_string();
    assert!(text.contains("task declined before it started") && text.contains("value `privacy`"), "{text}");
    let left = std::fs::read_dir(t.path("root/runs")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "no run folder is left");
}

/// A reframe forced by frustration at the last step would only spend framing calls: the run
/// stops on its step budget (exit 4, `max_steps` named with why the loop was stuck), and Frame is
/// never called again.
#[test]
fn a_forced_reframe_with_no_step_left_stops_on_max_steps() {
    let t = T::new();
    t.write("script.yaml", &frustrating_script());
    let out = t.al(&["--script", "script.yaml", "run", "--goal", "g", "--max-steps", "3"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let st = json_out(&t.al(&["status", "--json"]).output().unwrap());
    let reason = st["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("max_steps reached: 3 of 3") && reason.contains("the loop was stuck"), "{st}");
    let trace = t.read("ws/trace.jsonl");
    let frames = trace.lines().filter(|l| l.contains("\"phase\":\"frame\"")).count();
    assert_eq!(frames, 1, "the first frame only, no reframe: {trace}");
    assert!(!trace.contains("frustration.reframe"), "{trace}");
}
