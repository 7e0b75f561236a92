//! The answer schemas of lean prompts (`prompts: lean`), for a small model on a local server:
//! only the fields a run needs, and the rules a grammar can hold the model to written into the
//! schema rather than checked after. Each is a narrowing of the full schema in
//! [`crate::contract`], so the answer parses as the same type.

use crate::contract::{answer_tool, plan_tool};
use agentloop_model::model::ToolDef;
use agentloop_types::tool_spec::{ToolResult, ToolSpec};
use serde_json::{json, Value};

/// Plan's lean answer: `next_action` alone (no outline, expected outcome, risk or rationale,
/// which a small model fills with noise that later prompts carry), no descriptions inside the
/// tools' arguments (a small model copies them into paths and file contents), and of each
/// tool's optional arguments only `path`: the others keep their defaults (a small model fills
/// `encoding` with `utf-16le`, `mode` with `append` and `limit` with 1 for no reason; a call
/// that needs them is for the full prompts).
pub fn plan(tools: &[&ToolSpec], output: Option<&Value>) -> ToolDef {
    let full = plan_tool(tools, output);
    let mut next = full.parameters["properties"]["next_action"].clone();
    strip_descriptions(&mut next);
    required_and_path(&mut next);
    let schema = json!({
        "type": "object",
        "properties": {"next_action": next},
        "required": ["next_action"],
        "additionalProperties": false,
    });
    answer_tool("plan_answer", "Record the one next action.", schema)
}

/// The paths a lean Plan may name, held in the schema: `file_read` reads one of `files` (the
/// workspace's own files, none of agentloop's), `list_dir` lists `.` or one of `folders`, and
/// `file_write` writes one of the files the goal names (`named`), when it names any. A small
/// model otherwise makes names up (`data.txt`, `/home/user/notes`) and fails on each. What
/// `file_write` writes is never empty.
pub fn hold_paths(plan: &mut ToolDef, files: &[String], folders: &[String], named: &[String]) {
    let Some(Value::Array(variants)) = plan.parameters.pointer_mut("/properties/next_action/anyOf") else { return };
    let tool_of =
        |v: &Value| v.pointer("/properties/tool/enum/0").and_then(Value::as_str).unwrap_or_default().to_string();
    // With no file to read, `file_read` is not offered (a small model reads the file it is asked
    // to write, then makes paths up), unless nothing else would be left.
    if files.is_empty() && variants.iter().any(|v| tool_of(v) != "file_read") {
        variants.retain(|v| tool_of(v) != "file_read");
    }
    for v in variants.iter_mut() {
        let tool = tool_of(v);
        let choices: Vec<String> = match tool.as_str() {
            "file_read" => files.to_vec(),
            "file_write" => named.to_vec(),
            "list_dir" => std::iter::once(".".to_string()).chain(folders.iter().cloned()).collect(),
            _ => continue,
        };
        // What a lean run writes is never empty: a small model otherwise writes "" and is done.
        if let Some(content) = v.pointer_mut("/properties/args/properties/content").filter(|_| tool == "file_write") {
            content["minLength"] = json!(1);
        }
        if let (false, Some(path)) = (choices.is_empty(), v.pointer_mut("/properties/args/properties/path")) {
            *path = json!({"type": "string", "enum": choices});
        }
    }
    plan.strict = crate::contract::strict_variant(&plan.parameters);
}

/// The workspace's own files and folders, two levels deep, as paths relative to it (at most 64
/// files, from the first 4,096 entries of each folder): none of agentloop's (its paper trail,
/// configuration, dot files), no link followed.
pub fn workspace_paths(root: &camino::Utf8Path) -> (Vec<String>, Vec<String>) {
    let (mut files, mut folders) = (Vec::new(), Vec::new());
    let mut todo = vec![(root.to_path_buf(), String::new(), 0)];
    while let Some((dir, rel, depth)) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut names: Vec<(String, std::fs::FileType)> =
            // A folder of many entries is read only so far: the schema holds at most 64 files.
            entries.take(4096).flatten().filter_map(|e| Some((e.file_name().into_string().ok()?, e.file_type().ok()?))).collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, kind) in names {
            let path = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
            if agentloop_tools::tools::sandbox::agentloops_own(&name, depth == 0) || kind.is_symlink() {
                continue;
            }
            // A folder with nothing in it has nothing to list (the run's own `artifacts/`
            // before it writes any): not offered.
            if kind.is_dir() && depth == 0 && !empty_dir(&dir.join(&name)) {
                folders.push(path.clone());
                todo.insert(0, (dir.join(&name), path, depth + 1));
            } else if kind.is_file() && files.len() < 64 {
                files.push(path);
            }
        }
    }
    (files, folders)
}

/// The files `goal` names that are not in the workspace at `root` yet: what the goal asks to
/// be written, still to do.
pub fn pending_writes(goal: &str, root: &camino::Utf8Path) -> Vec<String> {
    writable_names(goal, root).into_iter().filter(|n| !present(root, n)).collect()
}

/// The files `goal` names that a write could reach: none under a link in the workspace (a
/// write does not go through one, so such a file could never be written).
pub fn writable_names(goal: &str, root: &camino::Utf8Path) -> Vec<String> {
    named_files(goal).into_iter().filter(|n| unlinked(root, n)).collect()
}

/// Whether no part of the relative path `rel` under `root` is a link (what is not there yet is
/// no link).
pub fn unlinked(root: &camino::Utf8Path, rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    (1..=parts.len()).all(|k| {
        let at = root.join(parts[..k].join("/"));
        !std::fs::symlink_metadata(at).is_ok_and(|m| m.file_type().is_symlink())
    })
}

/// Whether `rel` is in the workspace at `root` (a link counts as there, and is not followed).
pub fn present(root: &camino::Utf8Path, rel: &str) -> bool {
    std::fs::symlink_metadata(root.join(rel)).is_ok()
}

/// The files a goal names: words with a file extension (`summary.txt`, `data/2026.csv`),
/// relative, inside the workspace, none of agentloop's own (its paper trail, configuration and
/// its folders, a dot file or folder, in any case), at most 16 of at most 200 characters.
pub fn named_files(goal: &str) -> Vec<String> {
    use agentloop_tools::tools::sandbox::{CONFIG_DIRS, CONFIG_FILES, PAPER_TRAIL};
    let mut out: Vec<String> = Vec::new();
    for word in goal.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '`' | '"' | '\'')) {
        let w = word.trim_end_matches(['.', ':', '!', '?']);
        let Some((stem, ext)) = w.rsplit_once('.') else { continue };
        // A host name is no file: `example.com`, `www.python.org`.
        let host = ["com", "org", "net", "io", "dev", "gov", "edu", "ai", "co", "uk", "de", "fr", "app"]
            .contains(&ext.to_ascii_lowercase().as_str());
        let ext_ok = !host
            && (2..=6).contains(&ext.len())
            && ext.starts_with(|c: char| c.is_ascii_alphabetic())
            && ext.chars().all(|c| c.is_ascii_alphanumeric());
        let stem_ok = !stem.is_empty()
            && w.len() <= 200
            && !stem.starts_with(['/', '~'])
            && !stem.split('/').any(|p| p.is_empty() || p.starts_with('.'))
            && stem.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '/' | '.'));
        let lower = w.to_lowercase();
        let top = lower.split('/').next().unwrap_or_default();
        let own = PAPER_TRAIL.contains(&lower.as_str())
            || CONFIG_FILES.contains(&lower.as_str())
            || (lower.contains('/') && CONFIG_DIRS.contains(&top));
        if ext_ok && stem_ok && !own && !out.iter().any(|o| o == w) && out.len() < 16 {
            out.push(w.to_string());
        }
    }
    out
}

/// In each variant of `next_action`, the optional arguments other than `path`, removed.
fn required_and_path(next: &mut Value) {
    let Some(Value::Array(variants)) = next.get_mut("anyOf") else { return };
    for args in variants.iter_mut().filter_map(|v| v.pointer_mut("/properties/args")) {
        let required: Vec<Value> = args.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
        if let Some(Value::Object(props)) = args.get_mut("properties") {
            props.retain(|k, _| k == "path" || required.contains(&json!(k)));
        }
    }
}

/// Whether the step just run read what the goal points at, so that writing is what comes next
/// ([`write_first`]): a `file_read` of a file the goal names that is there (one of `inputs`),
/// or, when the goal names none, a `list_dir` of the workspace — either succeeding with output.
pub fn read_what_goal_needs(tool: Option<&str>, result: Option<&ToolResult>, inputs: &[String]) -> bool {
    let Some(r) = result.filter(|r| r.is_ok() && !r.output.trim().is_empty()) else { return false };
    let path = r.metadata.get("path").and_then(Value::as_str).unwrap_or_default();
    match tool {
        Some("file_read") => inputs.iter().any(|i| i == path),
        Some("list_dir") => inputs.is_empty() && agentloop_tools::tools::files::lists_workspace(r),
        _ => false,
    }
}

/// Puts `file_write` first among Plan's choices (a small model leans to the first a schema
/// lists), for when a file the goal names is still to be written and the step just run read
/// what the goal needs ([`read_what_goal_needs`]). Otherwise the order stays, reading first.
pub fn write_first(plan: &mut ToolDef) {
    let Some(Value::Array(variants)) = plan.parameters.pointer_mut("/properties/next_action/anyOf") else { return };
    variants.sort_by_key(|v| v.pointer("/properties/tool/enum/0").and_then(Value::as_str) != Some("file_write"));
}

/// What a lean prompt shows of a step's output: a folder's listing (`list_dir`) as the names
/// alone, without agentloop's own entries (its paper trail, configuration, dot files) and
/// without folders that hold nothing — what a lean Plan is never offered to read (a small model
/// copies a listing into the file it writes only when it is the names alone); any other
/// output as it is. `root` is the workspace.
pub fn shown_output(tool: Option<&str>, r: &ToolResult, root: &camino::Utf8Path) -> String {
    use agentloop_tools::tools::files::{entry_name, user_entries};
    if tool != Some("list_dir") || !r.is_ok() {
        return r.output.clone();
    }
    let folder = root.join(r.metadata.get("path").and_then(Value::as_str).unwrap_or("."));
    let names = user_entries(r).into_iter().map(entry_name);
    names
        .filter(|n| !n.ends_with('/') || !empty_dir(&folder.join(n.trim_end_matches('/'))))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether the folder at `path` holds nothing (one that cannot be read counts as empty).
fn empty_dir(path: &camino::Utf8Path) -> bool {
    std::fs::read_dir(path).map_or(true, |mut d| d.next().is_none())
}

/// Every `description` inside a schema, removed.
fn strip_descriptions(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if o.get("description").is_some_and(Value::is_string) {
                o.remove("description");
            }
            o.values_mut().for_each(strip_descriptions);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

/// Reflect's lean answer, a union of two shapes. `done` must give as many ticks as items are
/// still `open`, each naming one of them and citing steps among `steps` (this run's steps whose
/// actions succeeded): the rule that `done` needs every item ticked with evidence is in the
/// schema as far as a grammar can hold it (two ticks of one item are merged, then fall short).
/// The other shape decides `continue`, `reframe` or `escalate`, after the ticks it can back
/// (none, when it can back none).
/// With no step to cite, there is nothing to tick, and `done` only when nothing is open. While
/// a file the goal names is still to be written (`writes_pending`), `done` is not offered.
pub fn reflect(open: &[u32], steps: &[u32], writes_pending: bool) -> ToolDef {
    let tick = json!({
        "type": "object",
        "properties": {
            "item": {"type": "integer", "enum": open},
            "steps": {"type": "array", "items": {"type": "integer", "enum": steps}, "minItems": 1},
        },
        "required": ["item", "steps"],
        "additionalProperties": false,
    });
    let can_tick = !open.is_empty() && !steps.is_empty();
    let mut done = json!({
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": ["done"]},
            "outcome": {"type": "string", "maxLength": 1000},
        },
        "required": ["decision"],
        "additionalProperties": false,
    });
    let mut other = json!({
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": ["continue", "reframe", "escalate"]},
            "reason": {"type": "string", "maxLength": 500},
        },
        "required": ["decision"],
        "additionalProperties": false,
    });
    let mut variants = Vec::new();
    if can_tick {
        let all = json!({"type": "array", "items": tick, "minItems": open.len(), "maxItems": open.len()});
        done = with_first(done, "satisfied", all);
        done["required"] = json!(["satisfied", "decision"]);
        other = with_first(other, "satisfied", json!({"type": "array", "items": tick, "maxItems": open.len()}));
        // Required, though it may be empty: grammar builders write the required properties
        // first, so an optional list would come after the decision it is to lead to.
        other["required"] = json!(["satisfied", "decision"]);
    }
    if (can_tick || open.is_empty()) && !writes_pending {
        variants.push(done);
    }
    variants.push(other);
    let schema = if variants.len() == 1 { variants.remove(0) } else { json!({"anyOf": variants}) };
    answer_tool("reflect_answer", "Record the items met and the decision.", schema)
}

/// `schema` with the property `name` first (a grammar writes properties in order: the ticks
/// before the decision they lead to).
fn with_first(mut schema: Value, name: &str, prop: Value) -> Value {
    let mut props = serde_json::Map::new();
    props.insert(name.to_string(), prop);
    if let Some(Value::Object(rest)) = schema.get_mut("properties").map(Value::take) {
        props.extend(rest);
    }
    schema["properties"] = Value::Object(props);
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(tool: &ToolDef, v: Value) -> bool {
        jsonschema::is_valid(&tool.parameters, &v)
    }

    /// A file the goal names under a link in the workspace is not offered (a write does not go
    /// through a link); one that exists is not pending, a link among them too.
    #[test]
    fn a_named_file_under_a_link_is_not_offered_for_writing() {
        let dir = tempfile::tempdir().unwrap();
        let root = camino::Utf8Path::from_path(dir.path()).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("etc")).unwrap();
        std::fs::create_dir(root.join("data")).unwrap();
        std::os::unix::fs::symlink("/nowhere", root.join("data/gone.txt")).unwrap();
        agentloop_io::fs::write_atomic(&root.join("in.txt"), b"x").unwrap();
        let goal = "Read in.txt, write etc/new.txt, data/gone.txt and data/out.md";
        assert_eq!(writable_names(goal, root), ["in.txt", "data/out.md"]);
        assert_eq!(pending_writes(goal, root), ["data/out.md"]);
    }

    /// Writing comes next after a read of the goal's input, or of the folder when it names none;
    /// not after a failed read, an empty one, or a read of something else.
    #[test]
    fn what_the_goal_needs_is_its_input_or_else_the_folder() {
        let read = |path: &str, out: &str| ToolResult::ok(out, json!({"path": path}));
        let inputs = ["notes.txt".to_string()];
        assert!(read_what_goal_needs(Some("file_read"), Some(&read("notes.txt", "x")), &inputs));
        assert!(!read_what_goal_needs(Some("file_read"), Some(&read("other.txt", "x")), &inputs));
        assert!(!read_what_goal_needs(Some("file_read"), Some(&read("notes.txt", " \n")), &inputs));
        assert!(!read_what_goal_needs(Some("list_dir"), Some(&read(".", "notes.txt")), &inputs));
        assert!(read_what_goal_needs(Some("list_dir"), Some(&read(".", "a.txt")), &[]));
        assert!(!read_what_goal_needs(Some("list_dir"), Some(&read("sub", "a.txt")), &[]));
        assert!(!read_what_goal_needs(Some("file_read"), Some(&ToolResult::err("no such file", false)), &inputs));
        assert!(!read_what_goal_needs(None, None, &[]));
    }

    /// A listing of the workspace is shown as the names of what the run may read: none of
    /// agentloop's own files, no empty folder, no sizes; other output is left as it is.
    #[test]
    fn a_listing_shows_the_names_a_run_may_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = camino::Utf8Path::from_path(dir.path()).unwrap();
        agentloop_io::fs::create_dir_all(&root.join("artifacts")).unwrap();
        agentloop_io::fs::create_dir_all(&root.join("data")).unwrap();
        agentloop_io::fs::write_atomic(&root.join("data/x.csv"), b"x").unwrap();
        let out = "a.txt\t9\nartifacts/\ndata/\nmemory.md\t400\n.agentloop.lock\t0\nskills/\nb.md\t3";
        let listed = ToolResult::ok(out, json!({"path": ".", "entries": 7}));
        assert_eq!(shown_output(Some("list_dir"), &listed, root), "a.txt\ndata/\nb.md");
        let sub = ToolResult::ok("memory.md\t4\nx.csv\t1", json!({"path": "data"}));
        assert_eq!(shown_output(Some("list_dir"), &sub, root), "memory.md\nx.csv", "only the top's are agentloop's");
        let read = ToolResult::ok("a.txt\t9", json!({"path": "notes.txt"}));
        assert_eq!(shown_output(Some("file_read"), &read, root), "a.txt\t9");
        // What a repeat is judged on: the user's entries, sizes kept.
        assert_eq!(
            agentloop_tools::tools::files::user_entries(&listed).join("\n"),
            "a.txt\t9\nartifacts/\ndata/\nb.md\t3"
        );
    }

    /// `done` needs every open item ticked with a step that succeeded; the other decisions need
    /// no tick; an item or step that is not among those given is outside the schema.
    #[test]
    fn done_must_tick_every_open_item_with_a_step_that_succeeded() {
        let t = reflect(&[1, 2], &[1, 3], false);
        assert!(valid(
            &t,
            json!({"satisfied": [{"item": 1, "steps": [1]}, {"item": 2, "steps": [3]}], "decision": "done"})
        ));
        assert!(!valid(&t, json!({"satisfied": [], "decision": "done"})));
        assert!(!valid(&t, json!({"decision": "done"})));
        assert!(!valid(
            &t,
            json!({"satisfied": [{"item": 1, "steps": [2]}, {"item": 2, "steps": [3]}], "decision": "done"})
        ));
        assert!(!valid(
            &t,
            json!({"satisfied": [{"item": 5, "steps": [1]}, {"item": 2, "steps": [3]}], "decision": "done"})
        ));
        // The list comes first, so it is there, if empty (`mend` puts in one left out).
        assert!(valid(&t, json!({"satisfied": [], "decision": "continue"})));
        assert!(!valid(&t, json!({"decision": "continue"})));
        assert!(valid(&t, json!({"satisfied": [{"item": 2, "steps": [1]}], "decision": "continue"})));
        // Nothing to cite: no ticks, and no `done` while items are open.
        let t = reflect(&[1], &[], false);
        assert!(!valid(&t, json!({"decision": "done"})));
        assert!(valid(&t, json!({"decision": "escalate", "reason": "stuck"})));
        // Nothing open: `done` with no ticks.
        assert_eq!(named_files("Summarise notes.txt, then write to summary.txt."), ["notes.txt", "summary.txt"]);
        assert_eq!(named_files("e.g. /etc/passwd.txt ../x.md memory.md 17.5 `out/a.csv`"), ["out/a.csv"]);
        let own = "MEMORY.md Agentloop.yaml agents/evil.md skills/s.md templates/t.md sub/.hidden.txt .x/y.md a//b.md";
        assert_eq!(named_files(own), Vec::<String>::new());
        assert_eq!(named_files("Fetch example.com and www.python.org into title.txt"), ["title.txt"]);
        assert!(valid(&reflect(&[], &[1], false), json!({"decision": "done", "outcome": "ok"})));
        // A file the goal names not written yet: no `done`, however the ticks stand.
        let t = reflect(&[1], &[1], true);
        assert!(!valid(&t, json!({"satisfied": [{"item": 1, "steps": [1]}], "decision": "done"})));
        assert!(valid(&t, json!({"satisfied": [{"item": 1, "steps": [1]}], "decision": "continue"})));
    }
}
