//! `agentloop eval` through the binary: suites of scripted cases (a passing and a failing one),
//! the table, `--json` against its published schema, `--junit`, the pass-rate exit code,
//! `--baseline` (exit 12), `--trials`, `--jobs`, `--models` forwarded to each trial, `--record`
//! then `--replay` giving the same result, bad suites (exit 2 naming the file, line and key),
//! and the bundled smoke suite.

use crate::chat::model_server;
use crate::common::*;
use serde_json::Value;

/// A run that writes hello.txt holding `word` and ends done.
fn writes(word: &str) -> String {
    format!(
        r#"frame:
  - answer: {{goal: write hello.txt, definition_of_done: [hello.txt written, it holds the word, the result said], can_proceed: true}}
plan:
  - answer: {{next_action: {{tool: file_write, args: {{path: hello.txt, content: "{word}\n"}}}}, expected_outcome: written, rationale: asked}}
reflect:
  - answer: {{satisfied: [{{item: 1, steps: [1], artifacts: [hello.txt]}}, {{item: 2, steps: [1], artifacts: [hello.txt]}}, {{item: 3, steps: [1]}}], decision: done, reason: written, outcome: "wrote {word}"}}
"#
    )
}

/// Two cases: `hello` passes (the script writes hello), `goodbye` fails its file check.
const SUITE: &str = r#"name: greet
trials: 3
cases:
  - name: hello
    goal: Write hello.txt containing hello
    script: hello.yaml
    files:
      notes/seed.txt: "seeded\n"
    checks:
      - stop: done
      - file: {path: hello.txt, contains: hello}
      - file: {path: notes/seed.txt, equals: seeded}
      - output: {contains: wrote hello}
      - steps_at_most: 2
      - tokens_at_most: 0
      - cost_at_most: 0.01
  - name: goodbye
    goal: Write hello.txt containing goodbye
    script: hello.yaml
    checks:
      stop: done
      file: {path: hello.txt, contains: goodbye}
"#;

fn setup(t: &T) {
    t.write("hello.yaml", &writes("hello"));
    t.write("suite.yaml", SUITE);
}

/// The document with what differs from one run to the next taken out: folders, times, and
/// costs (a replay spends nothing).
fn comparable(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("out");
    for c in v["cases"].as_array_mut().unwrap() {
        c.as_object_mut().unwrap().remove("median_seconds");
        c.as_object_mut().unwrap().remove("median_cost_usd");
        for r in c["results"].as_array_mut().unwrap() {
            let r = r.as_object_mut().unwrap();
            for k in ["workspace", "seconds", "cost_usd"] {
                r.remove(k);
            }
        }
    }
    v
}

#[test]
fn a_passing_and_a_failing_case_give_a_table_json_junit_and_exit_1() {
    let t = T::new();
    setup(&t);
    let out =
        t.cmd().args(["eval", "suite.yaml", "--jobs", "2", "--out", "o", "--junit", "junit.xml"]).output().unwrap();
    let (so, se) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "{so}{se}");
    let lines: Vec<&str> = so.lines().collect();
    assert!(lines[0].contains("case") && lines[0].contains("commonest failure"), "{so}");
    assert!(lines[1].starts_with("ok") && lines[1].contains("hello") && lines[1].contains("3/3"), "{so}");
    assert!(
        lines[2].starts_with("FAIL") && lines[2].contains("0/3") && lines[2].contains("file hello.txt contains"),
        "{so}"
    );
    assert!(se.contains("below their pass rate: goodbye (default) 0/3"), "{se}");
    assert!(!se.contains("hello (default)"), "{se}");
    // Every trial kept in a fresh workspace of its own, its files seeded, its command beside it.
    for trial in 1..=3 {
        assert_eq!(t.read(&format!("o/hello/default/{trial}/hello.txt")), "hello\n");
        assert_eq!(t.read(&format!("o/hello/default/{trial}/notes/seed.txt")), "seeded\n");
        assert!(t.read(&format!("o/goodbye/default/{trial}.run/command.sh")).contains("run --goal"));
    }
    let junit = t.read("junit.xml");
    assert!(junit.starts_with("<?xml") && junit.contains("tests=\"2\" failures=\"1\""), "{junit}");
    assert!(junit.contains("<testcase classname=\"greet.default\" name=\"hello\""), "{junit}");
    assert!(
        junit.contains("<failure message=\"0/3 trials passed, below pass_rate 1: file hello.txt contains\""),
        "{junit}"
    );
    assert!(junit.contains("wanted text containing &quot;goodbye&quot;"), "{junit}");
    let parsed = std::process::Command::new("python3")
        .args(["-c", "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])", "junit.xml"])
        .current_dir(t.root())
        .status();
    match parsed {
        Ok(s) => assert!(s.success(), "junit.xml is not well-formed XML:\n{junit}"),
        Err(_) => missing("python3 (to parse the JUnit XML)"),
    }

    // --json: one document, valid against docs/schema/eval.json.
    let out = t.cmd().args(["--json", "eval", "suite.yaml", "--trials", "2", "--out", "j"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v = json_out(&out);
    crate::schemas::check("eval.json", &v);
    assert_eq!(v["suite"], "greet");
    assert_eq!(v["passed"], false);
    let (hello, bye) = (&v["cases"][0], &v["cases"][1]);
    assert_eq!(
        (hello["passed"].as_u64(), hello["trials"].as_u64(), hello["ok"].as_bool()),
        (Some(2), Some(2), Some(true))
    );
    assert_eq!(hello["median_steps"], 1.0);
    assert_eq!(hello["median_cost_usd"], Value::Null, "a scripted run spends nothing");
    assert_eq!((bye["passed"].as_u64(), bye["rate"].as_f64()), (Some(0), Some(0.0)));
    assert_eq!(bye["commonest_failure"], "file hello.txt contains");
    assert_eq!(bye["results"][1]["stop"], "done");
    assert!(bye["results"][0]["failures"][0].as_str().unwrap().contains("goodbye"), "{bye}");
}

#[test]
fn the_exit_code_follows_each_cases_pass_rate() {
    let t = T::new();
    setup(&t);
    // The failing case may fail: a pass rate of 0 is reached by any trial.
    let lenient = SUITE.replace("  - name: goodbye\n", "  - name: goodbye\n    pass_rate: 0\n");
    t.write("lenient.yaml", &lenient);
    let out = t.cmd().args(["eval", "lenient.yaml", "--trials", "1", "--out", "a"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(!stderr(&out).contains("below"), "{}", stderr(&out));
    // --case runs only the cases it names.
    let out = t
        .cmd()
        .args(["--json", "eval", "suite.yaml", "--case", "hello", "--trials", "1", "--out", "h"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_out(&out)["cases"].as_array().unwrap().len(), 1);
    let out = t.cmd().args(["eval", "suite.yaml", "--case", "hello,nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--case: suite.yaml has no case `nope`; its cases: hello, goodbye"),
        "{}",
        stderr(&out)
    );
    // A suite-level pass rate holds for every case that sets none.
    let half = format!("pass_rate: 0.5\n{}", lenient.replace("    pass_rate: 0\n", ""));
    t.write("half.yaml", &half);
    let out = t.cmd().args(["eval", "half.yaml", "--trials", "1", "--out", "b"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("goodbye (default) 0/1 < 0.5"), "{}", stderr(&out));
    // Without --out each eval gets a new folder under eval/, said on stderr.
    for _ in 0..2 {
        let out = t.cmd().args(["eval", "lenient.yaml", "--trials", "1"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    assert!(t.exists("eval/greet-20260101T000000/hello/default/1/hello.txt"));
    assert!(t.exists("eval/greet-20260101T000000-2/hello/default/1/hello.txt"));
    // An --out that already holds trials is refused: each trial needs a fresh workspace.
    let out = t.cmd().args(["eval", "lenient.yaml", "--out", "a"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--out a is not empty"), "{}", stderr(&out));
}

#[test]
fn a_regression_against_the_baseline_exits_12_naming_the_case() {
    let t = T::new();
    setup(&t);
    t.write("bye.yaml", &writes("goodbye"));
    let out = t.cmd().args(["--json", "eval", "suite.yaml", "--trials", "1", "--out", "a"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    t.write("base.json", &stdout(&out));
    // The same results: no regression, the failing case still exits 1.
    let out = t
        .cmd()
        .args(["eval", "suite.yaml", "--trials", "1", "--out", "b", "--baseline", "base.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // `hello` now fails (its script writes goodbye) while `goodbye` passes: a regression.
    t.write("suite.yaml", &SUITE.replace("script: hello.yaml", "script: bye.yaml"));
    let out = t
        .cmd()
        .args(["eval", "suite.yaml", "--trials", "1", "--out", "c", "--baseline", "base.json"])
        .output()
        .unwrap();
    let se = stderr(&out);
    assert_eq!(out.status.code(), Some(12), "{se}");
    assert!(se.contains("worse than the baseline base.json: hello (default): pass rate 1.00 → 0.00"), "{se}");
    assert!(!se.contains("goodbye (default): pass rate"), "{se}");
    // A baseline that is not an eval document is refused before any trial runs.
    t.write("bad.json", "[1]");
    let out =
        t.cmd().args(["eval", "suite.yaml", "--trials", "1", "--out", "d", "--baseline", "bad.json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--baseline bad.json: not an `eval --json` document"), "{}", stderr(&out));
    assert!(!t.exists("d"));
}

/// A suite run against a model server with `--models`: each trial gets the user's provider
/// flags and its own `--model`; recorded, then replayed with no server, the same result.
#[test]
fn recorded_trials_replay_offline_to_the_same_result() {
    let t = T::new();
    t.write(
        "s.yaml",
        "cases:\n  - name: digest\n    goal: Write the digest\n    checks:\n      - stop: done\n      - file: {path: artifacts/out.md, contains: digest}\n  \
         - name: missing\n    goal: Write the digest\n    checks: [{file: {path: nothing.txt}}]\n",
    );
    let server = model_server();
    let url = server.url.clone();
    let record = |extra: &[&str]| {
        let mut c = t.cmd();
        c.env("OPENAI_API_KEY", "sk-test").args([
            "--json",
            "--provider",
            "openai",
            "--base-url",
            &url,
            "eval",
            "s.yaml",
        ]);
        c.args(["--models", "m-one,m-two", "--trials", "2", "--jobs", "2"]).args(extra);
        c.output().unwrap()
    };
    let out = record(&["--record", "rec", "--out", "live"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let live = json_out(&out);
    crate::schemas::check("eval.json", &live);
    let rows: Vec<(String, String, u64)> = live["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (c["case"].as_str().unwrap().into(), c["model"].as_str().unwrap().into(), c["passed"].as_u64().unwrap())
        })
        .collect();
    let want = [("digest", "m-one", 2), ("digest", "m-two", 2), ("missing", "m-one", 0), ("missing", "m-two", 0)];
    assert_eq!(rows, want.map(|(a, b, n)| (a.to_string(), b.to_string(), n)));
    assert_eq!(live["cases"][2]["commonest_failure"], "file nothing.txt missing");
    let summary = &live["models"][1];
    assert_eq!(
        (summary["model"].as_str(), summary["cases_ok"].as_u64(), summary["trials_passed"].as_u64()),
        (Some("m-two"), Some(1), Some(2))
    );
    assert!(live["cases"][0]["median_tokens"].as_f64().unwrap() > 0.0);
    let models: Vec<String> =
        server.requests.lock().unwrap().iter().map(|r| r.json()["model"].as_str().unwrap().into()).collect();
    assert!(models.contains(&"m-one".to_string()) && models.contains(&"m-two".to_string()), "{models:?}");
    assert!(models.iter().all(|m| m == "m-one" || m == "m-two"), "{models:?}");
    for trial in ["digest/m-one/1", "digest/m-two/2", "missing/m-two/1"] {
        assert!(t.exists(&format!("rec/{trial}.jsonl")), "{trial}");
    }
    drop(server);
    let mut c = t.cmd();
    c.args([
        "--json",
        "eval",
        "s.yaml",
        "--models",
        "m-one,m-two",
        "--trials",
        "2",
        "--replay",
        "rec",
        "--out",
        "again",
    ]);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let again = json_out(&out);
    assert_eq!(comparable(again.clone()), comparable(live), "the replay differs");
    assert!(t.read("again/digest/m-one/1.run/command.sh").contains("--provider scripted"));
    // A trial with no recording is refused before anything runs.
    let out = t.cmd().args(["eval", "s.yaml", "--trials", "3", "--replay", "rec", "--out", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no recording rec/digest/default/1.jsonl"), "{}", stderr(&out));
    assert!(!t.exists("x"), "a refused eval leaves no folder");
}

#[test]
fn a_bad_suite_is_refused_naming_the_file_the_line_and_the_key() {
    let t = T::new();
    t.write("hello.yaml", &writes("hello"));
    let case = "cases:\n  - name: a\n    goal: g\n";
    let bad = [
        (format!("{case}    chekcs: []\n"), vec!["bad.yaml", "unknown field `chekcs`", "line 4"]),
        (
            format!("{case}    checks:\n      - stop: done\n      - fiel: {{path: a}}\n"),
            vec!["unknown field `fiel`", "line 6"],
        ),
        (format!("{case}    checks: [{{file: {{path: a, contain: x}}}}]\n"), vec!["unknown field `contain`"]),
        (format!("{case}    files: {{../x: y}}\n"), vec!["bad.yaml", "`../x` must be a relative path"]),
        (format!("{case}    files: {{/etc/x: y}}\n"), vec!["`/etc/x` must be a relative path"]),
        (format!("{case}    files: {{d: y, d/e: z}}\n"), vec!["`d` is a file and the folder of `d/e`"]),
        (format!("{case}    checks: [{{file: {{path: ../up}}}}]\n"), vec!["`../up`"]),
        (format!("{case}    config: {{llm: {{modle: x}}}}\n"), vec!["bad.yaml", "`llm.modle`"]),
        (format!("{case}    checks: {{stop: finished}}\n"), vec!["`finished` is no stop kind"]),
        (format!("{case}    checks: [{{output: {{regex: \"(\"}}}}]\n"), vec!["regex", "does not compile"]),
        (format!("{case}    timeout: soon\n"), vec!["timeout"]),
        (format!("{case}    script: nowhere.yaml\n"), vec!["script", "nowhere.yaml"]),
        (format!("pass_rate: 2\n{case}"), vec!["pass_rate: 2"]),
        (format!("{case}  - name: a\n    goal: h\n"), vec!["same folder as case `a`"]),
        ("cases:\n  - name: a\n   goal: g\n".to_string(), vec!["bad.yaml", "line 3"]),
        ("cases: []\n".to_string(), vec!["at least one case"]),
        ("nme: x\ncases: []\n".to_string(), vec!["unknown field `nme`", "line 1"]),
    ];
    for (text, words) in bad {
        t.write("bad.yaml", &text);
        let out = t.cmd().args(["eval", "bad.yaml", "--out", "never"]).output().unwrap();
        let se = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{text}: {se}");
        for w in words {
            assert!(se.contains(w), "{text}: `{w}` not in {se}");
        }
        assert!(!t.exists("never/a"), "{text}: a trial ran");
    }
    let out = t.cmd().args(["eval", "missing.yaml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("missing.yaml does not exist"), "{}", stderr(&out));
    // A suite on stdin runs with its paths taken from here.
    let suite = "cases:\n  - name: a\n    goal: Write hello.txt\n    script: hello.yaml\n";
    let out = t.cmd().args(["eval", "-", "--out", "stdin"]).write_stdin(suite).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// The bundled smoke suite prints as a file a user can copy, and runs: here against a model
/// that frames and then cannot proceed, so every case fails on its stop.
#[test]
fn the_bundled_smoke_suite_prints_and_runs() {
    let t = T::new();
    let out = t.cmd().args(["eval", "--builtin", "smoke", "--print"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    let names: Vec<&str> = v["cases"].as_sequence().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["summarise", "list-files", "arithmetic", "hello", "count-lines"]);
    // The printed file runs as the bundled suite does.
    t.write("smoke.yaml", &text);
    t.write(
        "stuck.yaml",
        "frame:\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: false, question: which file?}\n",
    );
    let out =
        t.cmd().args(["--script", "stuck.yaml", "eval", "smoke.yaml", "--out", "s", "--jobs", "2"]).output().unwrap();
    let so = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{so}{}", stderr(&out));
    assert_eq!(so.lines().filter(|l| l.starts_with("FAIL") && l.contains("stop escalated")).count(), 5, "{so}");
    assert!(t.read("s/count-lines/default/1/data.csv").starts_with("name,colour\n"));
    assert!(t.read("s/summarise/default/1.run/command.sh").contains("--script stuck.yaml"));
    // Flags every trial's run refuses: the table says so, and stderr says why once.
    let out = t.cmd().args(["--provider", "bogus", "eval", "--builtin", "smoke", "--out", "b"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("no result (exit 2)"), "{}", stdout(&out));
    assert!(stderr(&out).contains("no trial ran to a result; the first: the run left no result.json (exit 2): error:"));
    assert!(stderr(&out).contains("`bogus`"), "{}", stderr(&out));
    let out = t.cmd().args(["eval", "--builtin", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no bundled suite `nope`; there are smoke, digest, critique"), "{}", stderr(&out));
    // A suite for each bundled skill: each reads as a suite, and its trials run and are judged
    // (a model that only asks a question finishes none; the digest stops at its first slot).
    for (name, case) in [("digest", "three-mornings"), ("critique", "essay")] {
        let out = t
            .cmd()
            .args(["--script", "stuck.yaml", "--json", "eval", "--builtin", name, "--out", name])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
        let v = json_out(&out);
        assert_eq!(v["cases"][0]["case"], case, "{v}");
        assert_eq!(v["cases"][0]["passed"], 0, "{v}");
    }
    assert_eq!(
        json_out(
            &t.cmd()
                .args(["--script", "stuck.yaml", "--json", "eval", "--builtin", "digest", "--out", "d2"])
                .output()
                .unwrap()
        )["cases"][0]["commonest_failure"],
        "slot 2026-03-01 stopped"
    );
    assert!(t.read("digest/three-mornings/default/1/feed.txt").starts_with("alpha"));
}

/// A case's context reaches the run's context.md, its configuration the run (here a step limit
/// the script outlasts), and the suite's defaults every case that sets none.
#[test]
fn a_cases_context_config_and_defaults_reach_its_run() {
    let t = T::new();
    let two_steps = "frame:\n  - answer: {goal: g, definition_of_done: [a, b, c], can_proceed: true}\nplan:\n  \
                     - answer: {next_action: {tool: file_write, args: {path: one.txt, content: x}}}\n  \
                     - answer: {next_action: {tool: file_write, args: {path: two.txt, content: x}}}\n\
                     reflect:\n  - answer: {satisfied: [], decision: continue, reason: more}\n";
    t.write("two.yaml", two_steps);
    t.write(
        "s.yaml",
        "defaults:\n  script: two.yaml\n  config: {max_steps: 1}\ncases:\n  - name: limited\n    goal: Write two files\n    \
         context: The files are for the audit.\n    checks:\n      - stop: budget\n      - stop: max_steps\n      \
         - file: {path: context.md, contains: for the audit}\n      - file: {path: two.txt, exists: false}\n  \
         - name: wider\n    goal: Write two files\n    config: {max_steps: 2}\n    checks: [{file: {path: two.txt}}, {steps_at_most: 2}]\n  \
         - name: budgeted\n    goal: Write two files\n    budgets: {max_steps: 1, max_cost: 1}\n    config: {max_steps: 5}\n    \
         checks: [{stop: max_steps}]\n",
    );
    let out = t.cmd().args(["--json", "eval", "s.yaml", "--out", "o"]).output().unwrap();
    let v = json_out(&out);
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["cases"][0]["results"][0]["stop"], "max_steps");
    assert!(t.read("o/limited/default/1.run/command.sh").starts_with("AGENTLOOP_MAX_STEPS=1 "));
    // A case's budgets are flags of its run, over its configuration.
    assert!(t.read("o/budgeted/default/1.run/command.sh").contains("--max-steps 1 --max-cost 1 "));
}

/// A suite's `models:` may give each model's provider flags; seeded files may be written as
/// YAML (a JSON file), `contains` may list texts, and a timeout may be whole seconds.
#[test]
fn a_suites_models_carry_their_provider_flags() {
    let t = T::new();
    let server = model_server();
    t.write(
        "s.yaml",
        &format!(
            "models:\n  - {{name: local, provider: openai, base_url: \"{}\", model: m-three}}\n  - m-four\ntimeout: 60\n\
             cases:\n  - name: digest\n    goal: Write the digest\n    files:\n      data.json: {{day: Friday, items: [1, 2]}}\n    \
             checks:\n      - file: {{path: artifacts/out.md, contains: [the, digest]}}\n      \
             - file: {{path: data.json, schema: {{type: object, required: [day], properties: {{items: {{type: array}}}}}}}}\n",
            server.url
        ),
    );
    // m-four takes the provider and base URL the flags give.
    let mut c = t.cmd();
    c.env("OPENAI_API_KEY", "sk-test").args([
        "--provider",
        "openai",
        "--base-url",
        &server.url,
        "--json",
        "eval",
        "s.yaml",
    ]);
    let out = c.args(["--out", "o"]).output().unwrap();
    let v = json_out(&out);
    assert_eq!(out.status.code(), Some(0), "{v}{}", stderr(&out));
    let labels: Vec<&str> = v["cases"].as_array().unwrap().iter().map(|c| c["model"].as_str().unwrap()).collect();
    assert_eq!(labels, ["local", "m-four"]);
    let models: Vec<String> =
        server.requests.lock().unwrap().iter().map(|r| r.json()["model"].as_str().unwrap().into()).collect();
    assert!(models.contains(&"m-three".to_string()) && models.contains(&"m-four".to_string()), "{models:?}");
    assert!(t.read("o/digest/local/1.run/command.sh").contains("--timeout 60s"));
    assert!(t.read("o/digest/local/1/data.json").contains("\"day\": \"Friday\""));
    // Two models of one name are refused.
    t.write("twice.yaml", "models: [a, {model: a}]\ncases: [{name: x, goal: g}]\n");
    let out = t.cmd().args(["eval", "twice.yaml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`a` is named twice"), "{}", stderr(&out));
}

/// Progress lines go to stderr only on a terminal; colour only when asked for or on a terminal.
#[test]
fn progress_and_colour_only_where_they_belong() {
    let t = T::new();
    setup(&t);
    let out = t.cmd().args(["eval", "suite.yaml", "--trials", "1", "--out", "a"]).output().unwrap();
    assert!(!stdout(&out).contains('\x1b') && !stderr(&out).contains("[1/2]"), "{}", stderr(&out));
    let out =
        t.cmd().args(["--color", "always", "eval", "suite.yaml", "--trials", "1", "--out", "b"]).output().unwrap();
    assert!(stdout(&out).contains("\x1b[31mFAIL"), "{}", stdout(&out));
    let (code, shown, _) = t.on_terminal(&["eval", "suite.yaml", "--trials", "1", "--out", "c"], 100);
    assert_eq!(code, Some(1));
    assert!(shown.contains("\x1b[32mok"), "{shown}");
}

/// The bundled smoke suite against a real OpenAI-compatible server (`make test-real`; skipped
/// without `AGENTLOOP_REAL_BASE_URL`), with docs/MODELS.md's lean.yaml: prints the pass table, and asserts that every trial ran
/// to a result (a pass rate is the model's, not agentloop's, so none is asserted).
/// `AGENTLOOP_REAL_EVAL_TRIALS` sets the trials per case (default 1).
#[test]
#[ignore = "needs a real model server: make test-real"]
fn the_smoke_suite_against_a_real_server() {
    let Some(base) = std::env::var("AGENTLOOP_REAL_BASE_URL").ok().filter(|v| !v.trim().is_empty()) else {
        eprintln!("skipped: set AGENTLOOP_REAL_BASE_URL (e.g. http://127.0.0.1:8088/v1) to run the smoke suite");
        return;
    };
    let model = std::env::var("AGENTLOOP_REAL_MODEL").unwrap_or_else(|_| "smollm2".into());
    let trials = std::env::var("AGENTLOOP_REAL_EVAL_TRIALS").unwrap_or_else(|_| "1".into());
    let t = T::new();
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"));
    c.env_remove("AGENTLOOP_NOW").current_dir(t.root()).env("HOME", t.path("home"));
    // With MODELS.md's configuration for a small model on a local server.
    t.write(
        "lean.yaml",
        "allowed_tools: [file_read, file_write, list_dir, finish]\nskills: {disabled: [critique, daily-digest, web-research]}\n\
         memory: {enabled: false}\nllm: {max_tokens: 512, temperature: 0}\nframe: goal\nprompts: lean\n",
    );
    c.args(["--config", "lean.yaml", "--provider", "openai", "--base-url", &base, "--model", &model]);
    c.args(["eval", "--builtin", "smoke"]);
    let out = c.args(["--trials", &trials, "--out", "smoke", "--junit", "smoke.xml"]).output().unwrap();
    println!("{}", stdout(&out));
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    assert!(!stdout(&out).contains("no result"), "a trial left no result.json:\n{}", stdout(&out));
}

/// The shorter spellings: models as one line of ids, files as a list of `{path, content}`, and
/// `file: PATH` for a file that must exist.
#[test]
fn the_shorter_spellings_of_a_suite_read_alike() {
    let t = T::new();
    t.write("hello.yaml", &writes("hello"));
    t.write(
        "s.yaml",
        "models: m-a, m-b\ncases:\n  - name: one\n    goal: Write hello.txt\n    script: hello.yaml\n    files:\n      \
         - {path: in/notes.txt, content: seeded}\n    checks:\n      - file: hello.txt\n      - file: in/notes.txt\n",
    );
    let out = t.cmd().args(["--json", "eval", "s.yaml", "--out", "o"]).output().unwrap();
    let v = json_out(&out);
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["models"].as_array().unwrap().len(), 2);
    // A schema may be a file beside the suite.
    t.write("checks/day.schema.json", r#"{"type": "object", "required": ["day"]}"#);
    t.write(
        "checks/s.yaml",
        "cases:\n  - name: j\n    goal: g\n    script: ../hello.yaml\n    checks: [{file: {path: hello.txt, schema: day.schema.json}}]\n",
    );
    let out = t.cmd().args(["--json", "eval", "checks/s.yaml", "--out", "j"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let why = &json_out(&out)["cases"][0]["results"][0]["failures"][0];
    assert!(why.as_str().unwrap().contains("wanted JSON for its schema"), "{why}");
    assert_eq!(t.read("o/one/m-b/1/in/notes.txt"), "seeded");
    t.write("s.yaml", "cases:\n  - name: one\n    goal: g\n    files: [{path: a, contnet: x}]\n");
    let out = t.cmd().args(["eval", "s.yaml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown field `contnet`"), "{}", stderr(&out));
}

/// A signal to `eval` (a CI job's SIGTERM) ends every trial as it would end a run, each marked
/// interrupted in its workspace, and then `eval`, which dies of the signal saying where the
/// trials are.
#[test]
fn a_signal_ends_every_trial_and_then_eval() {
    use std::os::unix::process::ExitStatusExt;
    let t = T::new();
    let _server = Server::start_with(|_, _| {
        std::thread::sleep(std::time::Duration::from_secs(20));
        Reply::text(500, "text/plain", "late")
    });
    t.write("s.yaml", "cases:\n  - {name: a, goal: g}\n  - {name: b, goal: g}\n");
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", t.path("home"))
        .env("XDG_CONFIG_HOME", t.path("xdg"))
        .env("XDG_CACHE_HOME", t.path("cache"))
        .env("OPENAI_API_KEY", "sk-test")
        .args(["--provider", "openai", "--base-url", &_server.url, "eval", "s.yaml", "--jobs", "2", "--out", "o"])
        .current_dir(t.root())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !(t.exists("o/a/default/1/state.json") && t.exists("o/b/default/1/state.json")) {
        assert!(started.elapsed().as_secs() < 30, "the trials did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let killed = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.signal(), Some(15), "{}", stderr(&out));
    assert!(stderr(&out).contains("eval of s (its trials kept in o/) stopped by SIGTERM"), "{}", stderr(&out));
    for case in ["a", "b"] {
        let state = t.read(&format!("o/{case}/default/1/state.json"));
        assert!(state.contains("\"interrupted\""), "{case}: {state}");
    }
}

/// A slot's scripted run of a digest: it reads the seen list, writes the new items of
/// feed.txt into the digest and the seen list back, and ends done with the digest as its
/// outcome. `seen` is what the earlier slots reported.
fn digest_slot(slot: &str, seen: &[&str], feed: &[&str]) -> Value {
    let new: Vec<&str> = feed.iter().copied().filter(|i| !seen.contains(i)).collect();
    let all: Vec<&str> = seen.iter().chain(&new).copied().collect();
    let digest = format!("# Digest {slot}\n{}", new.iter().map(|i| format!("- {i}\n")).collect::<String>());
    let act = |tool: &str, args: Value| serde_json::json!({"answer": {"next_action": {"tool": tool, "args": args}}});
    let go = serde_json::json!({"answer": {"decision": "continue", "reason": "next"}});
    serde_json::json!({
        "frame": [{"answer": {"goal": "the digest", "definition_of_done": ["digest written", "seen list saved", "outcome given"], "can_proceed": true}}],
        "plan": [
            act("file_read", serde_json::json!({"path": "feed.txt"})),
            act("file_write", serde_json::json!({"path": "digest.md", "content": digest})),
            act("file_write", serde_json::json!({"path": "state/seen.json", "content": serde_json::json!({"seen": all}).to_string()})),
        ],
        "reflect": [go, go,
            {"answer": {"satisfied": [{"item": 1, "steps": [2], "artifacts": ["digest.md"]}, {"item": 2, "steps": [3], "artifacts": ["state/seen.json"]}, {"item": 3, "steps": [3]}],
                "decision": "done", "reason": "saved", "outcome": digest}},
        ],
    })
}

/// A case with `slots` runs its goal once per slot in one workspace, as a scheduled job's
/// mornings do (`run --slot`), each slot's files written first and its own answers replayed;
/// the checks read what the last slot left, `lacks` says what must not be reported again; the
/// first slot that does not end done ends the trial, naming the slot; bad slots are refused.
#[test]
fn a_case_runs_its_goal_once_per_slot_in_one_workspace() {
    let t = T::new();
    let days = [
        ("2026-03-01", vec!["alpha", "beta"]),
        ("2026-03-02", vec!["alpha", "beta", "gamma"]),
        ("2026-03-03", vec!["beta", "gamma", "delta"]),
    ];
    let mut seen: Vec<&str> = Vec::new();
    let mut slots = Vec::new();
    for (slot, feed) in &days {
        let feed_text: String = feed.iter().map(|i| format!("{i}\n")).collect();
        slots.push(serde_json::json!({"slot": slot, "files": {"feed.txt": feed_text}, "script": digest_slot(slot, &seen, feed)}));
        seen.extend(feed.iter().filter(|i| !seen.contains(i)).copied().collect::<Vec<_>>());
    }
    let checks = serde_json::json!([
        {"stop": "done"},
        {"output": {"contains": "delta", "lacks": ["alpha", "beta", "gamma"]}},
        {"file": {"path": "state/seen.json", "schema": {"type": "object", "required": ["seen"], "properties": {"seen": {"type": "array", "uniqueItems": true, "minItems": 4, "maxItems": 4}}}}},
    ]);
    let suite = serde_json::json!({"name": "digest", "cases": [{"name": "three-mornings", "goal": "Digest of the new items in feed.txt", "slots": slots, "checks": checks}]});
    t.write("digest.yaml", &suite.to_string());
    let out = t.cmd().args(["--json", "eval", "digest.yaml", "--out", "o"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}\n{}", stderr(&out), stdout(&out));
    let v = json_out(&out);
    crate::schemas::check("eval.json", &v);
    assert_eq!(v["cases"][0]["passed"], 1, "{v}");
    // Three runs, one per slot: two archived, each slot's command line kept.
    for (slot, _) in &days {
        assert!(t
            .read(&format!("o/three-mornings/default/1.run/slot-{slot}/command.sh"))
            .contains(&format!("--slot {slot}")));
    }
    let runs = std::fs::read_dir(t.path("o/three-mornings/default/1/runs")).unwrap().count();
    assert_eq!(runs, 2, "the first two mornings archived");
    // A later slot that reports an item again fails `lacks`, naming it.
    let mut again = suite.clone();
    again["cases"][0]["slots"][2]["script"] = digest_slot("2026-03-03", &[], &days[2].1);
    t.write("again.yaml", &again.to_string());
    let out = t.cmd().args(["--json", "eval", "again.yaml", "--out", "o2"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v = json_out(&out);
    assert!(v["cases"][0]["commonest_failure"].as_str().unwrap().contains("lacks"), "{v}");
    // A slot whose run does not end done ends the trial there, naming the slot.
    let mut short = suite.clone();
    short["cases"][0]["slots"][1]["script"]["reflect"] = serde_json::json!([]);
    t.write("short.yaml", &short.to_string());
    let out = t.cmd().args(["--json", "eval", "short.yaml", "--out", "o3"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let case = &json_out(&out)["cases"][0];
    assert_eq!(case["commonest_failure"], "slot 2026-03-02 stopped", "{case}");
    assert!(!t.exists("o3/three-mornings/default/1.run/slot-2026-03-03"), "the third slot did not run");
    // Slots named twice or not as a slot is named are refused, naming the key.
    for (bad, says) in [
        (serde_json::json!([{"slot": "a"}, {"slot": "a"}]), "slots[1].slot: `a` is named twice"),
        (serde_json::json!([{"slot": "a b"}]), "slots[0].slot: `a b` is no slot name"),
        (serde_json::json!([{"slot": "a", "files": {"../x": "y"}}]), "slots[0].files: `../x`"),
    ] {
        let mut s = suite.clone();
        s["cases"][0]["slots"] = bad;
        t.write("bad.yaml", &s.to_string());
        let out = t.cmd().args(["eval", "bad.yaml", "--out", "o4"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{says}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{says}: {}", stderr(&out));
    }
}
