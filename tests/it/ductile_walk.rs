//! docs/EVENT-MODE.md's walk ("Under Ductile, from zero to a finished run") and the shipped
//! `ductile/` folder hold together without a Ductile (`ductile_real` runs the walk against one):
//! the places its port and provider live agree and move together, the manifest's schemas are in a
//! form Ductile reads, and the manifest's note on the sweep schedule is the walk's.

use crate::common::*;
use serde_json::{json, Value};
use std::path::Path;

fn repo(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

/// The text of docs/EVENT-MODE.md from `first` to the end of its block or paragraph.
fn doc_part(first: &str, end: &str) -> String {
    let doc = repo("docs/EVENT-MODE.md");
    let start = doc.find(first).unwrap_or_else(|| panic!("EVENT-MODE.md has no `{first}`"));
    let body = &doc[start..];
    body[..body.find(end).unwrap_or(body.len())].to_string()
}

const TOKEN: &str = "dtok-walk";

/// The walk's plugin `config:` block as Ductile sends it in a request: its `${...}` expanded
/// from Ductile's environment.
fn request_config(ductile_config: &str, port: u16) -> Value {
    let expanded = ductile_config.replace("${PORT}", &port.to_string()).replace("${DUCTILE_AGENT_TOKEN}", TOKEN);
    let v: Value = serde_yaml_ng::from_str(&expanded).unwrap();
    v["plugins"]["agentloop"]["config"].clone()
}

/// `agentloop -w root handle` given a `health` request with `config`: the exit code and response.
fn health(t: &T, config: &Value) -> (Option<i32>, Value) {
    let out = t
        .cmd()
        .args(["-w", "root", "handle"])
        .env("DUCTILE_AGENT_TOKEN", TOKEN)
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("OPENAI_API_KEY", "sk-test")
        .write_stdin(json!({"protocol": 2, "command": "health", "config": config}).to_string())
        .output()
        .unwrap();
    (out.status.code(), serde_json::from_slice(&out.stdout).unwrap_or(Value::Null))
}

#[test]
fn the_walks_port_and_provider_change_in_the_places_its_paragraph_names() {
    let para = doc_part("**Changing the port or the provider.**", "\n\n");
    for place in [
        "`api.listen`",
        "`ductile.api_url`",
        "`api_url`",
        "`PORT`",
        "`llm: {provider, model}`",
        "`llm_provider`",
        "`llm_model`",
        "`ANTHROPIC_API_KEY`",
    ] {
        assert!(para.contains(place), "the paragraph does not name {place}: {para}");
    }
    // As shipped, every place names port 8080 and the same provider and model.
    let ductile = doc_part("# ~/ductile/config.yaml", "```");
    let root = repo("ductile/agentloop.yaml");
    let start = doc_part("export PORT=", "```");
    assert!(ductile.contains("  listen: 127.0.0.1:8080\n"), "{ductile}");
    assert!(ductile.contains("      api_url: \"http://localhost:${PORT}\"\n"), "{ductile}");
    assert!(root.contains("  api_url: http://localhost:8080\n"), "{root}");
    assert!(start.starts_with("export PORT=8080 ") && start.contains("--api-url http://127.0.0.1:8080 "), "{start}");
    let llm = "llm: {provider: anthropic, model: claude-sonnet-4-5-20250929}";
    assert!(root.contains(llm), "{root}");
    assert!(
        ductile.contains("llm_provider: \"anthropic\"")
            && ductile.contains("llm_model: \"claude-sonnet-4-5-20250929\"")
    );
    assert!(start.contains("ANTHROPIC_API_KEY="), "{start}");

    // Moved to port 9191 and openai's gpt-4o-mini in the places the paragraph names, a job runs.
    let t = T::new();
    let moved_root = root
        .replace("http://localhost:8080", "http://localhost:9191")
        .replace(llm, "llm: {provider: openai, model: gpt-4o-mini}");
    let moved = ductile
        .replace("127.0.0.1:8080", "127.0.0.1:9191")
        .replace("llm_provider: \"anthropic\"", "llm_provider: \"openai\"")
        .replace("claude-sonnet-4-5-20250929", "gpt-4o-mini");
    t.write("root/agentloop.yaml", &moved_root);
    let (code, v) = health(&t, &request_config(&moved, 9191));
    assert_eq!((code, v["status"].as_str()), (Some(0), Some("ok")), "{v}");
    // One place left behind: the job is refused, naming the key that disagrees.
    let (code, v) = health(&t, &request_config(&moved, 8080));
    assert_eq!(code, Some(78), "{v}");
    assert!(v["error"].as_str().unwrap().contains("`ductile.api_url`"), "{v}");
    let (code, v) = health(&t, &request_config(&ductile, 9191));
    assert_eq!(code, Some(78), "{v}");
    assert!(v["error"].as_str().unwrap().contains("`llm."), "{v}");
    t.write("root/agentloop.yaml", &root.replace("http://localhost:8080", "http://localhost:9191"));
    let (code, v) = health(&t, &request_config(&moved, 9191));
    assert_eq!(code, Some(78), "{v}");
    assert!(v["error"].as_str().unwrap().contains("`llm."), "{v}");
}

/// Ductile reads a command's `input_schema` as a JSON Schema (a `type` at its top) or as a
/// compact `field: type` map whose values are type names; a map mixing the two is printed by
/// `ductile system skills` as Go's `map[type:[...]]`.
#[test]
fn the_shipped_manifests_schemas_are_in_a_form_ductile_reads() {
    let m: Value = serde_yaml_ng::from_str(&repo("ductile/manifest.yaml")).unwrap();
    let commands = m["commands"].as_array().unwrap();
    assert_eq!(commands.iter().map(|c| c["name"].as_str().unwrap()).collect::<Vec<_>>(), ["handle", "health", "poll"]);
    for c in commands {
        for key in ["input_schema", "output_schema"] {
            let Some(s) = c.get(key).and_then(Value::as_object) else { continue };
            let full = s.contains_key("type");
            assert!(full || s.values().all(Value::is_string), "{}'s {key} mixes the two forms: {s:?}", c["name"]);
        }
    }
    let handle = &commands[0]["input_schema"];
    assert_eq!(handle["type"], "object");
    assert_eq!(handle["properties"]["result"]["type"], json!(["string", "object"]));
    // The sweep schedule the manifest's note gives is the walk's, as the walk's config has it.
    let schedule = "- {id: sweep, command: poll, every: 5m}";
    assert!(repo("ductile/manifest.yaml").contains(&format!("#         {schedule}\n")), "the manifest's note");
    let ductile = doc_part("# ~/ductile/config.yaml", "```");
    assert!(ductile.contains(&format!("    schedules:\n      {schedule}")), "{ductile}");
}
