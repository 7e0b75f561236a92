//! The model-facing contracts: an answer built only from the schema sent — the way a model under
//! constrained decoding builds it, reading no prose — is never refused, over both wire formats.

use crate::common::*;
use agentloop_engine::contract::{self, FrameAnswer, PlanAnswer, ReflectAnswer};
use serde_json::{json, Value};

/// A schema-literal model: a random instance of a JSON Schema (the subset the answer schemas
/// and tool parameters use), with edge cases a grammar allows — blank strings where only a
/// length is asked, the smallest and largest counts, optional fields left out or null.
pub struct Literal {
    rng: fastrand::Rng,
    /// Keep going: `can_proceed` true and `decision` continue (both still schema values), so a
    /// run goes on until its step budget.
    steer: bool,
}

impl Literal {
    pub fn new(seed: u64) -> Self {
        Literal { rng: fastrand::Rng::with_seed(seed), steer: false }
    }

    pub fn value(&mut self, s: &Value) -> Value {
        self.field("", s)
    }

    fn field(&mut self, name: &str, s: &Value) -> Value {
        if self.steer && name == "can_proceed" {
            return json!(true);
        }
        if self.steer && name == "decision" {
            return json!("continue");
        }
        if let Some(Value::Array(alts)) = s.get("anyOf") {
            let i = self.rng.usize(..alts.len());
            return self.value(&alts[i]);
        }
        if let Some(Value::Array(e)) = s.get("enum") {
            return e[self.rng.usize(..e.len())].clone();
        }
        if let Some(c) = s.get("const") {
            return c.clone();
        }
        let ty = match s.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(ts)) => ts[self.rng.usize(..ts.len())].as_str().unwrap().to_string(),
            _ => "object".to_string(),
        };
        match ty.as_str() {
            "null" => Value::Null,
            "boolean" => json!(self.rng.bool()),
            "integer" => {
                let lo = s.get("minimum").and_then(Value::as_i64).unwrap_or(0);
                let hi = s.get("maximum").and_then(Value::as_i64).unwrap_or(lo + 50);
                json!(self.rng.i64(lo..=hi))
            }
            "number" => json!(self.rng.f64() * 10.0),
            "string" => {
                let min = s.get("minLength").and_then(Value::as_u64).unwrap_or(0);
                let nonblank = s.get("pattern").is_some();
                match self.rng.u8(..10) {
                    0 if !nonblank && min == 0 => json!(""),
                    1 if !nonblank => json!(" ".repeat(min.max(1) as usize)),
                    _ => {
                        // What a pattern admits of these (a pattern with none fails here).
                        let re = s.get("pattern").and_then(Value::as_str).map(|p| regex::Regex::new(p).unwrap());
                        let fits: Vec<&str> = ["alpha", "beta gamma", "x", "note: 3 of 5", "ünï"]
                            .into_iter()
                            .filter(|c| re.as_ref().is_none_or(|re| re.is_match(c)))
                            .collect();
                        json!(fits[self.rng.usize(..fits.len())])
                    }
                }
            }
            "array" => {
                let lo = s.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
                let hi = s.get("maxItems").and_then(Value::as_u64).map(|m| m as usize).unwrap_or(lo + 3);
                let n = self.rng.usize(lo..=hi);
                let item = s.get("items").cloned().unwrap_or(json!({"type": "string"}));
                Value::Array((0..n).map(|_| self.value(&item)).collect())
            }
            _ => {
                let mut out = serde_json::Map::new();
                let required: Vec<&str> = s
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if let Some(Value::Object(props)) = s.get("properties") {
                    for (k, p) in props {
                        if required.contains(&k.as_str()) || self.rng.bool() {
                            out.insert(k.clone(), self.field(k, p));
                        }
                    }
                }
                Value::Object(out)
            }
        }
    }
}

fn registry_tools() -> Vec<agentloop_tools::tools::ToolSpec> {
    let cfg = agentloop_config::config::Config::default();
    agentloop_tools::tools::Registry::new(&cfg, camino::Utf8Path::new(".")).unwrap().all().to_vec()
}

#[test]
fn literal_answers_to_every_sent_schema_are_accepted() {
    let specs = registry_tools();
    let refs: Vec<&agentloop_tools::tools::ToolSpec> = specs.iter().collect();
    let tools = [
        contract::frame_tool(),
        contract::plan_tool(&refs, None),
        contract::reflect_tool(0),
        contract::reflect_tool(5),
    ];
    let mut lit = Literal::new(7);
    for tool in &tools {
        for variant in [Some(&tool.parameters), tool.strict.as_ref()].into_iter().flatten() {
            for _ in 0..300 {
                let answer = lit.value(variant);
                assert!(
                    jsonschema::is_valid(variant, &answer),
                    "the generator made an invalid {} answer: {answer}",
                    tool.name
                );
                let mut a = answer.clone();
                let parsed = match tool.name.as_str() {
                    "frame_answer" => contract::parse::<FrameAnswer>(tool, &mut a).map(|_| ()),
                    "plan_answer" => contract::parse::<PlanAnswer>(tool, &mut a).map(|_| ()),
                    _ => contract::parse::<ReflectAnswer>(tool, &mut a).map(|_| ()),
                };
                assert!(parsed.is_ok(), "{} refused a schema-valid answer {answer}: {parsed:?}", tool.name);
            }
        }
    }
}

#[test]
fn every_rule_is_in_the_schema() {
    let frame = contract::frame_tool().parameters;
    assert_eq!(frame["properties"]["definition_of_done"]["minItems"], 3);
    assert_eq!(frame["properties"]["definition_of_done"]["maxItems"], 7);
    let item = &frame["properties"]["definition_of_done"]["items"];
    assert_eq!(item["pattern"], agentloop_types::tool_spec::CHECKABLE_ITEM, "{item}");
    // A pattern grammar builders take: anchored, no `\s` class, no lookaround.
    let pattern = item["pattern"].as_str().unwrap();
    assert!(pattern.starts_with('^') && pattern.ends_with('$') && !pattern.contains("\\s") && !pattern.contains("(?"));
    let re = regex::Regex::new(pattern).unwrap();
    for ok in ["x written", "answer.txt holds 391", "  3 files listed", "résumé sent", "完成", "x"] {
        assert!(re.is_match(ok), "{ok}");
    }
    for bad in ["# Goal", "## Context", "3.", "0", "-", "", "  ", "two\nlines", "a \"quote\"", "a\\b"] {
        assert!(!re.is_match(bad), "{bad:?}");
    }
    // Free text has a cap a grammar keeps a model to (no answer runs to the token cap).
    assert_eq!(frame["properties"]["goal"]["maxLength"], 300);
    assert_eq!(item["maxLength"], 200);
    let reflect = contract::reflect_tool(4).parameters;
    assert_eq!(reflect["properties"]["reason"]["maxLength"], 500);
    assert_eq!(reflect["properties"]["outcome"]["maxLength"], 1000);
    // No cap past 1,000: llama.cpp's grammar parser refuses a longer bounded string, and the
    // server then samples with no grammar at all.
    let caps = |s: &Value| {
        let text = s.to_string();
        text.match_indices("\"maxLength\":")
            .map(|(i, _)| {
                text[i + 12..].chars().take_while(char::is_ascii_digit).collect::<String>().parse::<u64>().unwrap()
            })
            .max()
            .unwrap_or(0)
    };
    for s in [&frame, &reflect] {
        assert!(caps(s) <= 1000, "{s}");
    }
    assert_eq!(reflect["properties"]["facts"]["items"]["maxLength"], 300);
    assert_eq!(reflect["properties"]["decision"]["enum"], json!(["continue", "done", "reframe", "escalate"]));
    let tick = &reflect["properties"]["satisfied"]["items"];
    assert_eq!(tick["required"], json!(["item"]));
    assert_eq!(tick["properties"]["item"]["minimum"], 1);
    assert_eq!(tick["properties"]["item"]["maximum"], 4);
    assert_eq!(tick["properties"]["steps"]["items"]["minimum"], 1);
    assert_eq!(tick["properties"]["artifacts"]["items"]["type"], "string");
    assert_eq!(reflect["properties"]["satisfied"]["maxItems"], 4);
    let specs = registry_tools();
    let refs: Vec<&agentloop_tools::tools::ToolSpec> =
        specs.iter().filter(|s| s.name == "file_read" || s.name == "finish").collect();
    let plan = contract::plan_tool(&refs, None).parameters;
    let variants = plan["properties"]["next_action"]["anyOf"].as_array().unwrap();
    assert_eq!(variants.len(), 2);
    assert_eq!(variants[0]["properties"]["tool"]["enum"], json!(["file_read"]));
    assert_eq!(variants[0]["properties"]["args"], specs.iter().find(|s| s.name == "file_read").unwrap().parameters);
    assert_eq!(variants[1]["properties"]["tool"]["enum"], json!(["finish"]));
    // Not offered, so refused by the schema itself, with the error the model is shown.
    let tool = contract::plan_tool(&refs, None);
    let mut a = json!({"next_action": {"tool": "web_fetch", "args": {"url": "https://example.com"}}});
    assert!(contract::parse::<PlanAnswer>(&tool, &mut a).is_err());
}

#[test]
fn strict_variant_closes_objects_and_makes_optional_fields_nullable() {
    let frame = contract::frame_tool();
    let s = frame.strict.expect("frame has a strict form");
    assert_eq!(s["additionalProperties"], false);
    assert_eq!(s["required"].as_array().unwrap().len(), s["properties"].as_object().unwrap().len());
    assert_eq!(s["properties"]["goal"]["type"], json!(["string", "null"]));
    assert_eq!(s["properties"]["definition_of_done"]["items"]["pattern"], agentloop_types::tool_spec::CHECKABLE_ITEM);
    assert!(s.to_string().find("\"default\"").is_none());
    // A null for an optional field is read as absent.
    let tool = contract::frame_tool();
    let mut a = json!({"goal": null, "definition_of_done": ["a", "b", "c"], "constraints": null, "assumptions": null,
        "can_proceed": null, "open_question": null, "hypothesis": null});
    let f: FrameAnswer = contract::parse(&tool, &mut a).unwrap();
    assert!(f.can_proceed);
    // A free-form map (http_call headers) has no strict form: the plain schema is sent.
    let specs = registry_tools();
    let http: Vec<&agentloop_tools::tools::ToolSpec> = specs.iter().filter(|s| s.name == "http_call").collect();
    assert!(contract::plan_tool(&http, None).strict.is_none());
    let files: Vec<&agentloop_tools::tools::ToolSpec> = specs.iter().filter(|s| s.name.starts_with("file_")).collect();
    assert!(contract::plan_tool(&files, None).strict.is_some());
}

#[test]
fn near_misses_are_mended_before_validation() {
    let frame = contract::frame_tool();
    let mut a = json!({"goal": "g", "definition_of_done": "- one\n- two\n3. three", "can_proceed": "True", "extra": 1});
    let f: FrameAnswer = contract::parse(&frame, &mut a).unwrap();
    assert_eq!(f.definition_of_done, ["one", "two", "three"]);
    assert!(f.can_proceed);
    let mut a = json!({"definition_of_done": ["a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"]});
    let f: FrameAnswer = contract::parse(&frame, &mut a).unwrap();
    assert_eq!(f.definition_of_done.len(), 7, "more than 7 items are cut to the first 7");
    // Text past its cap is cut to it, not refused.
    let mut a = json!({"definition_of_done": ["x written", "y read", "z run"], "goal": "g".repeat(1000)});
    let f: FrameAnswer = contract::parse(&frame, &mut a).unwrap();
    assert_eq!(f.goal.chars().count(), 300);
    assert!(f.goal.ends_with('…'));
    // Headings lose their marks; an item with no words is refused, named in words.
    let mut a = json!({"definition_of_done": ["## Goal met", "# x written", "y.txt holds \"hi\"\nand C:\\x"]});
    let f: FrameAnswer = contract::parse(&frame, &mut a).unwrap();
    assert_eq!(f.definition_of_done, ["Goal met", "x written", "y.txt holds 'hi' and C:/x"]);
    let mut a = json!({"definition_of_done": ["1.", "x written", "y read"]});
    let e = contract::parse::<FrameAnswer>(&frame, &mut a).unwrap_err().to_string();
    assert!(e.contains("\"1.\" is a heading or has no words"), "{e}");

    let specs = registry_tools();
    let refs: Vec<&agentloop_tools::tools::ToolSpec> = specs.iter().collect();
    let plan = contract::plan_tool(&refs, None);
    for a in [
        json!({"next_action": {"tool": "web_fetch", "args": {"url": "u"}}}),
        json!({"next_action": {"name": "web_fetch", "arguments": "{\"url\": \"u\"}"}}),
        json!({"next_action": {"tool": "web_fetch", "url": "u"}}),
        json!({"next_action": {"tool": "web_fetch", "parameters": {"url": "u"}}}),
        json!({"next_action": "{\"tool\": \"web_fetch\", \"args\": {\"url\": \"u\"}}", "outline": "[\"a\", \"b\"]"}),
        json!({"next_action": {"tool": "web_fetch", "args": {"url": "u", "extract_mode": "Markdown", "max_length": "500"}}}),
    ] {
        let mut m = a.clone();
        let p: PlanAnswer = contract::parse(&plan, &mut m).unwrap_or_else(|e| panic!("{a}: {e}"));
        assert_eq!(p.next_action.tool, "web_fetch", "{a}");
        assert_eq!(p.next_action.args["url"], "u", "{a}");
    }
    let mut a = json!({"next_action": {"tool": "submit_response", "args": {"summary": "s"}}});
    assert_eq!(contract::parse::<PlanAnswer>(&plan, &mut a).unwrap().next_action.tool, "finish");
    let mut a =
        json!({"next_action": {"tool": "http_call", "args": {"method": "get", "url": "u", "timeout_seconds": 3.0}}});
    let p: PlanAnswer = contract::parse(&plan, &mut a).unwrap();
    assert_eq!(p.next_action.args["timeout_seconds"], json!(3), "3.0 is read as the integer 3");
    assert_eq!(p.next_action.args["method"], "GET", "an enum value in the wrong case is mended");

    let reflect = contract::reflect_tool(3);
    let items = ["Read the article".to_string(), "Write the critique".into(), "Cite a figure".into()];
    let mut a = json!({"satisfied": ["1, 3", "write the critique", 9], "decision": "Continue"});
    contract::mend_satisfied(&mut a, &items);
    let r: ReflectAnswer = contract::parse(&reflect, &mut a).unwrap();
    assert_eq!(r.satisfied.iter().map(|t| t.item).collect::<Vec<_>>(), [1, 3, 2]);
    assert!(r.satisfied.iter().all(|t| t.steps.is_empty() && t.artifacts.is_empty()), "no evidence is made up");
    assert_eq!(r.decision, contract::Decision::Continue);
    // Evidence laid out the ways small models give it lands in the schema's shape; a second
    // tick of one item adds its evidence to the first.
    let mut a = json!({"satisfied": [
        {"item": "1", "step": "step 2", "artifact": "artifacts/a.md"},
        {"item": 2, "evidence": "step 3, ./notes.txt"},
        {"item": "read the article", "steps": [4]},
    ], "decision": "continue"});
    contract::mend_satisfied(&mut a, &items);
    let r: ReflectAnswer = contract::parse(&reflect, &mut a).unwrap();
    let want = [
        contract::Tick { item: 1, steps: vec![2, 4], artifacts: vec!["artifacts/a.md".into()] },
        contract::Tick { item: 2, steps: vec![3], artifacts: vec!["./notes.txt".into()] },
    ];
    assert_eq!(r.satisfied, want);
    // An item ticked by its text as the model first wrote it (quotes and a line break that the
    // frame's mending turned into a single quote and a space) is still found.
    let items = ["answer.txt holds '391'".to_string(), "x written".into(), "y read".into()];
    let mut a = json!({"satisfied": ["answer.txt holds \"391\"", "x\nwritten"], "decision": "continue"});
    contract::mend_satisfied(&mut a, &items);
    let r: ReflectAnswer = contract::parse(&reflect, &mut a).unwrap();
    assert_eq!(r.satisfied.iter().map(|t| t.item).collect::<Vec<_>>(), [1, 2]);
}

/// A fake server that answers every forced tool call with a schema-literal answer, in the
/// wire format asked (`anthropic` or `openai`), strict form when the tool says strict.
fn literal_server(kind: &'static str, seed: u64, steer: bool) -> Server {
    let mut lit = Literal::new(seed);
    lit.steer = steer;
    let lit = std::sync::Mutex::new(lit);
    Server::start_with(move |i, req| {
        let body = req.json();
        // The forced tool among all the answer tools sent (the first when nothing names one).
        let named = body["tool_choice"]["name"].as_str().or(body["tool_choice"]["function"]["name"].as_str());
        let tools = body["tools"].as_array().cloned().unwrap_or_default();
        let tool = &tools
            .iter()
            .find(|t| named.is_some() && (t["name"].as_str() == named || t["function"]["name"].as_str() == named))
            .or(tools.first())
            .cloned()
            .unwrap_or(Value::Null);
        let (name, schema) = if kind == "anthropic" {
            (tool["name"].as_str().unwrap_or("").to_string(), tool["input_schema"].clone())
        } else if tool.is_object() {
            (tool["function"]["name"].as_str().unwrap_or("").to_string(), tool["function"]["parameters"].clone())
        } else {
            let f = &body["response_format"]["json_schema"];
            (f["name"].as_str().unwrap_or("").to_string(), f["schema"].clone())
        };
        let args = lit.lock().unwrap().value(&schema);
        if kind == "anthropic" {
            Reply::json(
                200,
                json!({"id": format!("msg_{i}"), "type": "message", "role": "assistant", "model": "literal",
                    "content": [{"type": "tool_use", "id": format!("tu_{i}"), "name": name, "input": args}],
                    "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}}),
            )
        } else if tool.is_object() {
            Reply::json(
                200,
                json!({"id": format!("c{i}"), "object": "chat.completion", "model": "literal",
                    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                        "tool_calls": [{"id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5}}),
            )
        } else {
            Reply::json(
                200,
                json!({"id": format!("c{i}"), "object": "chat.completion", "model": "literal",
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": args.to_string()}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5}}),
            )
        }
    })
}

#[test]
fn a_schema_literal_model_drives_runs_over_both_wire_formats() {
    for kind in ["anthropic", "openai"] {
        let mut actions = 0;
        for seed in 1..=6u64 {
            let t = T::new();
            // Half the runs let the model decide freely; half keep it going to the step budget.
            let s = literal_server(kind, seed, seed > 3);
            let mut c = t.al(&[
                "--provider",
                kind,
                "--base-url",
                &s.url,
                "--model",
                "literal",
                "run",
                "--goal",
                "Summarise notes.txt",
                "--max-steps",
                "5",
            ]);
            c.env(if kind == "anthropic" { "ANTHROPIC_API_KEY" } else { "OPENAI_API_KEY" }, "sk-test-literal");
            t.write("ws/notes.txt", "one\ntwo\nthree\n");
            if seed > 3 {
                // Random arguments fail often; the failure limits are not what is under test.
                t.write("ws/agentloop.yaml", "max_consecutive_failures: 100\nmax_repeats: 100\n");
            }
            let out = c.output().unwrap();
            let trace = t.trace();
            let text = t.read("ws/trace.jsonl");
            assert!(!text.contains("no valid"), "{kind} seed {seed}: an answer was refused:\n{text}");
            let code = out.status.code().unwrap();
            assert!([0, 3, 4].contains(&code), "{kind} seed {seed}: exit {code}: {}", stderr(&out));
            let plans: Vec<u64> =
                trace.iter().filter(|e| e["phase"] == "plan").filter_map(|e| e["step"].as_u64()).collect();
            let acts: Vec<u64> =
                trace.iter().filter(|e| e["phase"] == "act").filter_map(|e| e["step"].as_u64()).collect();
            assert_eq!(plans, acts, "{kind} seed {seed}: every planned action is executed");
            actions += acts.len();
            eprintln!(
                "{kind} seed {seed}: exit {code}, {} actions, {}",
                acts.len(),
                t.json("ws/result.json")["reason"]
            );
            assert!(
                trace.iter().all(|e| e["attempt"].as_u64().unwrap_or(1) == 1),
                "{kind} seed {seed}: no corrective retry was needed"
            );
            let result = t.json("ws/result.json");
            assert!(
                ["done", "escalated"].contains(&result["status"].as_str().unwrap_or("")),
                "{kind} seed {seed}: {result}"
            );
        }
        assert!(actions >= 15, "{kind}: the literal model reached actions ({actions} in all)");
    }
}

/// Writes the three answer schemas as sent (for checking them against a grammar builder by hand:
/// `AGENTLOOP_DUMP_SCHEMAS=DIR cargo test --test it dump_answer_schemas`).
#[test]
fn dump_answer_schemas() {
    let Some(dir) = std::env::var_os("AGENTLOOP_DUMP_SCHEMAS") else { return };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let specs = registry_tools();
    let refs: Vec<&agentloop_tools::tools::ToolSpec> = specs.iter().collect();
    for (name, s) in [
        ("frame", contract::frame_tool().parameters),
        ("plan", contract::plan_tool(&refs, None).parameters),
        ("reflect", contract::reflect_tool(4).parameters),
        ("fused", contract::fused_tool(&contract::reflect_tool(4), &contract::plan_tool(&refs, None)).parameters),
        // `llm.tool_schemas: catalog`, the default against a local server.
        ("plan-catalog", agentloop_engine::tool_args::plan_tool(&refs, None).parameters),
        (
            "fused-catalog",
            contract::fused_tool(&contract::reflect_tool(4), &agentloop_engine::tool_args::plan_tool(&refs, None))
                .parameters,
        ),
    ] {
        std::fs::write(dir.join(format!("{name}.json")), s.to_string()).unwrap();
    }
}

/// `llm.tool_schemas: catalog`: `next_action` names an allowed tool and takes any object as its
/// arguments (Act checks them), while `finish` keeps its own parameters and a run's output schema.
#[test]
fn the_catalog_form_of_plan_names_the_tool_and_keeps_finish_whole() {
    let specs = registry_tools();
    let refs: Vec<&agentloop_tools::tools::ToolSpec> = specs.iter().collect();
    let output = serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let tool = agentloop_engine::tool_args::plan_tool(&refs, Some(&output));
    let variants = tool.parameters["properties"]["next_action"]["anyOf"].as_array().unwrap().clone();
    assert_eq!(variants.len(), 2, "{variants:?}");
    let names = variants[0]["properties"]["tool"]["enum"].as_array().unwrap();
    assert!(names.iter().any(|n| n == "file_read") && !names.iter().any(|n| n == "finish"), "{names:?}");
    assert_eq!(variants[0]["properties"]["args"], serde_json::json!({"type": "object"}));
    assert_eq!(variants[1]["properties"]["tool"]["enum"], serde_json::json!(["finish"]));
    assert_eq!(variants[1]["properties"]["args"]["properties"]["output"]["required"], serde_json::json!(["n"]));
    // Arguments a tool does not take fit the schema sent: the answer is taken, and Act says why.
    let v = agentloop_tools::tools::validator(&tool.parameters).unwrap();
    let answer = serde_json::json!({"next_action": {"tool": "file_read", "args": {"file": "a.txt"}}});
    assert!(agentloop_tools::tools::validate_with(&v, &answer).is_ok());
    let finish = serde_json::json!({"next_action": {"tool": "finish", "args": {"summary": "s", "output": {}}}});
    assert!(agentloop_tools::tools::validate_with(&v, &finish).is_err(), "finish is held to the output schema");
}
