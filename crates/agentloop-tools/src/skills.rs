//! Skills: markdown instructions the agent can read and follow, in two formats side by side.
//!
//! - Agent Skills: `<name>/SKILL.md` with YAML frontmatter (`name`, `description`, optional
//!   `license`, `compatibility`, `metadata`, `allowed-tools`) and supporting files beside it.
//! - The seed format: `registry.json` + `<id>/skill.json` (+ `skill.md` and extra files).
//!
//! Folders load in increasing precedence: bundled (embedded in the binary), the user folder
//! (`$XDG_CONFIG_HOME/agentloop/skills`), `<workspace>/skills`, `skills.dirs` in config, then
//! `--skills-dir`; a later skill of the same name replaces an earlier one. An invalid skill is
//! reported (file, field, why) and skipped; it never stops the others from loading. Scans are
//! bounded (`skills.max_entries`, depth 4) and skip `.git` and `node_modules`.
//!
//! SKILL.md is read as the Agent Skills reference validator (`skills-ref`) reads it: every
//! scalar as the text written (`version: 1.0` is "1.0", `description: 42` is "42"), a lowercase
//! `skill.md` when there is no `SKILL.md` (and no `skill.json`: then it is a seed skill's body),
//! no byte-order mark before the opening `---`. Two deviations the validator refuses still load,
//! with a warning marked as against the spec (`spec`): an unknown frontmatter key and a
//! description over 1024 characters (real skills have both). `skills check` fails on those too,
//! so it agrees with the validator on valid and invalid.
//!
//! One rule for both formats: a skill folder that is a symlink, or is reached through one, is
//! skipped with a warning (its folder would become readable by file_read). Skill files are read
//! inside their folder's capability, non-blocking (a FIFO is refused, never waited on) and at
//! most `tools.max_file_bytes` each. Skills in the workspace (`skills/`, or a `skills.dirs`
//! entry that lands in it) are the workspace's own files: a link anywhere from the workspace
//! down — `skills/` itself, a folder on the way, a skill's folder, a file in it — is skipped
//! with a warning, and every read opens one component at a time without following one
//! (`fs::read_no_link`).

use agentloop_config::config::Config;
use agentloop_types::error::{Kind, ResultExt};
use camino::{Utf8Path, Utf8PathBuf};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;

pub const BUILTIN: &[(&str, &str)] = &[
    ("critique", include_str!("../../../skills/critique/SKILL.md")),
    ("daily-digest", include_str!("../../../skills/daily-digest/SKILL.md")),
    ("web-research", include_str!("../../../skills/web-research/SKILL.md")),
];

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// agent-skills | seed
    pub format: String,
    /// `builtin` or the folder it was loaded from (relative to the workspace once loaded for one).
    pub location: String,
    #[serde(skip)]
    #[schemars(skip)]
    pub dir: Option<Utf8PathBuf>,
    /// The workspace the skill's folder is in: its files are read with no link on the way.
    #[serde(skip)]
    #[schemars(skip)]
    pub workspace: Option<Utf8PathBuf>,
    #[serde(skip)]
    #[schemars(skip)]
    pub body: String,
    pub triggers: Vec<String>,
    pub requires_tools: Vec<String>,
    pub requires_env: Vec<String>,
    pub allowed_tools: Vec<String>,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    pub version: Option<String>,
    pub metadata: BTreeMap<String, String>,
    /// Supporting files, relative to the skill folder.
    pub files: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Problem {
    pub file: String,
    pub field: Option<String>,
    pub message: String,
    /// error | warning
    pub severity: String,
    /// A warning about something the Agent Skills spec (its reference validator) refuses though
    /// the skill loads: `skills check` fails on it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub spec: bool,
}

impl Problem {
    fn error(file: &Utf8Path, field: Option<&str>, message: impl Into<String>) -> Self {
        Problem {
            file: file.to_string(),
            field: field.map(String::from),
            message: message.into(),
            severity: "error".into(),
            spec: false,
        }
    }
    fn against_spec(file: &Utf8Path, field: Option<&str>, message: impl Into<String>) -> Self {
        Problem { spec: true, ..Self::warning(file, field, message) }
    }
    fn warning(file: &Utf8Path, field: Option<&str>, message: impl Into<String>) -> Self {
        Problem { severity: "warning".into(), ..Self::error(file, field, message) }
    }
    pub fn is_error(&self) -> bool {
        self.severity == "error"
    }
    /// A folder checked that holds no skill in either format.
    pub fn nothing_found(dir: &Utf8Path) -> Self {
        Self::error(
            dir,
            None,
            "holds no skill: a skill is a folder with SKILL.md (Agent Skills) or skill.json (seed format)",
        )
    }
    /// Whether `skills check` fails on it: an error, or a warning the spec refuses.
    pub fn fails_check(&self) -> bool {
        self.is_error() || self.spec
    }
    /// The line without its severity, for printers that say `warning:` themselves.
    pub fn detail(&self) -> String {
        match &self.field {
            Some(k) => format!("{}: field `{k}`: {}", self.file, self.message),
            None => format!("{}: {}", self.file, self.message),
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.severity, self.detail())
    }
}

#[derive(Debug, Default, Clone)]
pub struct SkillSet {
    pub skills: Vec<Skill>,
    pub problems: Vec<Problem>,
}

const SPEC_KEYS: &[&str] = &["name", "description", "license", "compatibility", "metadata", "allowed-tools"];

/// Checks a name against the Agent Skills rule as its reference validator applies it: 1–64
/// lowercase letters (any script, so `café` is a name), digits and single inner hyphens.
pub fn valid_name(name: &str) -> agentloop_types::error::Result<()> {
    let refuse = |why: String| Err(agentloop_types::error::Error::usage(why));
    if name.is_empty() || name.chars().count() > 64 {
        return refuse(format!("`{name}` must be 1 to 64 characters"));
    }
    if name.to_lowercase() != name || !name.chars().all(|c| c.is_alphanumeric() || c == '-') {
        return refuse(format!("`{name}` may hold only lowercase letters, digits and hyphens"));
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return refuse(format!("`{name}` must not start or end with a hyphen or hold two in a row"));
    }
    Ok(())
}

fn split_frontmatter(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n"))?;
    let end = rest.find("\n---")?;
    let fm = &rest[..end];
    let after = &rest[end + 4..];
    let body = after.split_once('\n').map(|(_, b)| b).unwrap_or("");
    Some((fm, body))
}

/// The frontmatter again, with every scalar as the text written, as the reference validator (a
/// strict YAML reader with no types) reads it: `1.0` stays "1.0", `true` "true", `~` "~", an
/// empty value "". `shape` is the same document read with types, which says where the lists
/// and mappings are.
fn as_text(fm: &str, shape: &Value) -> Result<Value, agentloop_config::config::YamlError> {
    use serde::de::DeserializeSeed;
    Texts(shape)
        .deserialize(serde_yaml_ng::Deserializer::from_str(fm))
        .map_err(agentloop_config::config::YamlError::Parse)
}

/// Reads one node of [`as_text`]: a scalar through `deserialize_str` (the text as written), a
/// list or mapping item by item.
struct Texts<'a>(&'a Value);

impl<'de> serde::de::DeserializeSeed<'de> for Texts<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        match self.0 {
            Value::Object(_) => d.deserialize_map(self),
            Value::Array(_) => d.deserialize_seq(self),
            _ => <String as serde::Deserialize>::deserialize(d).map(Value::String),
        }
    }
}

impl<'de> serde::de::Visitor<'de> for Texts<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("the frontmatter as read before")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(k) = m.next_key::<String>()? {
            let v = m.next_value_seed(Texts(self.0.get(&k).unwrap_or(&Value::Null)))?;
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut q: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = q.next_element_seed(Texts(self.0.get(out.len()).unwrap_or(&Value::Null)))? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
}

/// YAML the validator's strict reader refuses: flow collections (`{a: b}`, `[a]`), anchors,
/// aliases and tags, found where a value starts. Each kind once, with how to write it instead.
fn strict_yaml_breaks(fm: &str) -> Vec<(&'static str, &'static str)> {
    let mut found: Vec<(&'static str, &'static str)> = Vec::new();
    let mut block_under: Option<usize> = None;
    for line in fm.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some(i) = block_under {
            if trimmed.is_empty() || indent > i {
                continue;
            }
            block_under = None;
        }
        if trimmed.starts_with('#') {
            continue;
        }
        let mut item = trimmed;
        while let Some(rest) = item.strip_prefix("- ") {
            item = rest.trim_start();
        }
        let value = match item.split_once(": ") {
            Some((key, v)) if !key.starts_with(['"', '\'']) => v.trim_start(),
            _ => item,
        };
        let kind = match value.chars().next() {
            Some('{' | '[') => Some(("YAML flow style", "write lists and mappings in block style, one item a line")),
            Some('&' | '*') => Some(("a YAML anchor or alias", "write the value out")),
            Some('!') => Some(("a YAML tag", "drop the tag")),
            Some('|' | '>') => {
                block_under = Some(indent);
                None
            }
            _ => None,
        };
        if let Some(k) = kind {
            if !found.contains(&k) {
                found.push(k);
            }
        }
    }
    found
}

fn str_list(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a.iter().filter_map(|x| x.as_str().map(String::from)).collect(),
        Some(Value::String(s)) => s.split([' ', ',']).filter(|x| !x.is_empty()).map(String::from).collect(),
        _ => vec![],
    }
}

/// Parses one SKILL.md. `folder` is the name its folder must match (None for bundled skills).
pub fn parse_skill_md(
    text: &str,
    file: &Utf8Path,
    folder: Option<&str>,
) -> Result<(Skill, Vec<Problem>), Vec<Problem>> {
    let Frontmatter { yaml, body, map } = read_frontmatter(text, file)?;
    let mut problems = Vec::new();
    for (what, how) in strict_yaml_breaks(yaml) {
        problems.push(Problem::against_spec(
            file,
            None,
            format!("uses {what}, which the Agent Skills spec's strict YAML refuses (loaded as it is); {how}"),
        ));
    }
    let name = skill_name(&map, file, folder, &mut problems);
    let description = skill_description(&map, file, &mut problems);
    if let Some(c) = map.get("compatibility") {
        match c.as_str() {
            Some(s) if s.chars().count() > 500 => {
                problems.push(Problem::error(file, Some("compatibility"), "is longer than 500 characters"))
            }
            Some(_) => {}
            None => problems.push(Problem::error(file, Some("compatibility"), "must be a string")),
        }
    }
    let metadata = text_metadata(&map, file, &mut problems);
    for k in map.keys() {
        if !SPEC_KEYS.contains(&k.as_str()) {
            problems.push(Problem::against_spec(
                file,
                Some(k),
                "is not an Agent Skills field (ignored; the spec refuses it): put it under `metadata`",
            ));
        }
    }
    if problems.iter().any(Problem::is_error) {
        return Err(problems);
    }
    Ok((agent_skill(name, description, body, &map, metadata), problems))
}

/// A SKILL.md split at its frontmatter.
struct Frontmatter<'a> {
    /// The frontmatter as written.
    yaml: &'a str,
    body: &'a str,
    /// The frontmatter read as a mapping of text values.
    map: serde_json::Map<String, Value>,
}

/// A SKILL.md's frontmatter and body; or why the file has none the validator would read.
fn read_frontmatter<'a>(text: &'a str, file: &Utf8Path) -> Result<Frontmatter<'a>, Vec<Problem>> {
    if text.starts_with('\u{feff}') {
        // The reference validator reads the mark as text before `---`, so no frontmatter.
        return Err(vec![Problem::error(
            file,
            None,
            "starts with a byte-order mark (U+FEFF) before `---`; save it as UTF-8 without one",
        )]);
    }
    let Some((fm, body)) = split_frontmatter(text) else {
        return Err(vec![Problem::error(
            file,
            None,
            "no YAML frontmatter: the file must start with `---`, the fields, and `---`",
        )]);
    };
    match agentloop_config::config::parse_yaml::<Value>(fm).and_then(|v| as_text(fm, &v)) {
        Ok(Value::Object(map)) => Ok(Frontmatter { yaml: fm, body, map }),
        Ok(_) => Err(vec![Problem::error(file, None, "the frontmatter must be a YAML mapping")]),
        Err(e) => Err(vec![Problem::error(file, None, format!("the frontmatter is not valid YAML: {e}"))]),
    }
}

/// The `name` field, trimmed; a problem when it is missing, not a valid name, or not the name
/// of its folder.
fn skill_name(
    map: &serde_json::Map<String, Value>,
    file: &Utf8Path,
    folder: Option<&str>,
    problems: &mut Vec<Problem>,
) -> String {
    let name = map.get("name").and_then(Value::as_str).unwrap_or("").trim().to_string();
    if !map.contains_key("name") {
        problems.push(Problem::error(file, Some("name"), "missing"));
    } else if !map["name"].is_string() {
        problems.push(Problem::error(file, Some("name"), "must be a string"));
    } else if let Err(e) = valid_name(&name) {
        problems.push(Problem::error(file, Some("name"), e.message));
    } else if let Some(f) = folder {
        if f != name {
            problems.push(Problem::error(file, Some("name"), format!("`{name}` must equal the folder name `{f}`")));
        }
    }
    name
}

/// The `description` field, trimmed; a problem when it is missing or empty, a warning against
/// the spec when it is over 1024 characters.
fn skill_description(map: &serde_json::Map<String, Value>, file: &Utf8Path, problems: &mut Vec<Problem>) -> String {
    let description = map.get("description").and_then(Value::as_str).unwrap_or("").trim().to_string();
    match map.get("description") {
        None => problems.push(Problem::error(file, Some("description"), "missing")),
        Some(v) if !v.is_string() => problems.push(Problem::error(file, Some("description"), "must be a string")),
        _ if description.is_empty() => problems.push(Problem::error(file, Some("description"), "must not be empty")),
        // Over the Agent Skills limit loads with a warning: real skills exceed it (one of
        // Anthropic's own has 1,068 characters), and a long description still reads well in the
        // catalog. `skills check` fails on it, as the validator does (which counts it untrimmed).
        Some(Value::String(d)) if d.chars().count() > 1024 => problems.push(Problem::against_spec(
            file,
            Some("description"),
            format!("is {} characters, over the Agent Skills limit of 1024 (loaded as it is)", d.chars().count()),
        )),
        _ => {}
    }
    description
}

/// The `metadata` mapping's text values. Values are read as written (`version: 1.0` is "1.0");
/// the validator judges neither a metadata that is not a mapping nor a value that is not text,
/// so they are ignored, said.
fn text_metadata(
    map: &serde_json::Map<String, Value>,
    file: &Utf8Path,
    problems: &mut Vec<Problem>,
) -> BTreeMap<String, String> {
    let mut metadata = BTreeMap::new();
    let Some(m) = map.get("metadata") else {
        return metadata;
    };
    let Some(o) = m.as_object() else {
        problems.push(Problem::warning(file, Some("metadata"), "is not a mapping of keys to text (ignored)"));
        return metadata;
    };
    for (k, v) in o {
        match v.as_str() {
            Some(s) => {
                metadata.insert(k.clone(), s.to_string());
            }
            None => problems.push(Problem::warning(
                file,
                Some("metadata"),
                format!("value of `{k}` is a list or mapping, not text (ignored)"),
            )),
        }
    }
    metadata
}

/// The skill a valid SKILL.md describes; agentloop's own keys (triggers, requires-tools,
/// requires-env, version) are read from `metadata`, where the spec lets them live.
fn agent_skill(
    name: String,
    description: String,
    body: &str,
    map: &serde_json::Map<String, Value>,
    metadata: BTreeMap<String, String>,
) -> Skill {
    let list = |key: &str, seps: &[char]| -> Vec<String> {
        metadata
            .get(key)
            .map(|t| t.split(seps).map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect())
            .unwrap_or_default()
    };
    let triggers = list("triggers", &[',']);
    let requires_tools = list("requires-tools", &[',', ' ']);
    let requires_env = list("requires-env", &[',', ' ']);
    Skill {
        name,
        description,
        format: "agent-skills".into(),
        location: String::new(),
        dir: None,
        workspace: None,
        body: body.trim().to_string(),
        triggers,
        requires_tools,
        requires_env,
        allowed_tools: str_list(map.get("allowed-tools")),
        license: map.get("license").and_then(Value::as_str).map(String::from),
        compatibility: map.get("compatibility").and_then(Value::as_str).map(String::from),
        version: metadata.get("version").cloned(),
        metadata,
        files: vec![],
    }
}

/// Reads `name` inside `dir` through a capability: never outside the folder (a symlink out
/// fails), never blocking on a FIFO, never more than `cap` bytes. In the workspace `ws`, no link
/// is followed at all ([`read_skill_file`]).
fn read_in(ws: Option<&Utf8Path>, dir: &Utf8Path, name: &str, cap: u64) -> agentloop_types::error::Result<String> {
    let buf = read_skill_file(ws, dir, name, name, cap)?;
    String::from_utf8(buf).context_as(Kind::Tool, format!("{name} is not UTF-8 text"))
}

/// Reads file `rel` of skill folder `dir`, at most `cap` bytes, never blocking on a FIFO. A
/// folder in the workspace `ws` is read one component at a time from the workspace down, none a
/// link (`fs::read_no_link`); one elsewhere (the user's own) inside its capability.
fn read_skill_file(
    ws: Option<&Utf8Path>,
    dir: &Utf8Path,
    rel: &str,
    shown: &str,
    cap: u64,
) -> agentloop_types::error::Result<Vec<u8>> {
    if let Some((ws, inner)) = ws.and_then(|ws| Some((ws, dir.strip_prefix(ws).ok()?))) {
        let rel = Utf8Path::new(rel);
        if rel.components().any(|c| !matches!(c, camino::Utf8Component::Normal(_))) {
            return Err(agentloop_types::error::Error::tool(format!(
                "access denied: {shown} is not a plain path inside the skill folder"
            )));
        }
        // Named as the model gave it, never by the machine path.
        return match agentloop_io::fs::read_file_no_link(ws, &inner.join(rel), cap) {
            Ok(Some(b)) => Ok(b),
            Ok(None) => Err(agentloop_types::error::Error::tool(format!("{shown}: no such file or folder"))),
            Err(agentloop_io::fs::Unreadable::Link | agentloop_io::fs::Unreadable::Folder(_)) => Err(agentloop_types::error::Error::tool(format!(
                "access denied: {shown} is a symbolic link or reached through one; skill files are read only from real files inside the workspace"
            ))),
            Err(agentloop_io::fs::Unreadable::NotRegular) => Err(agentloop_types::error::Error::tool(format!("{shown} is not a regular file"))),
            Err(agentloop_io::fs::Unreadable::TooLarge(n)) => Err(agentloop_types::error::Error::tool(agentloop_io::capfs::too_large(shown, n, cap))),
            Err(agentloop_io::fs::Unreadable::Io(e)) => Err(agentloop_types::error::Error::tool(format!("cannot read {shown}: {}", e.detail()))),
        };
    }
    let d = cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority()).map_err(|e| {
        agentloop_types::error::Error::tool(format!("cannot open the folder of {shown}: {e}")).with_source(e)
    })?;
    agentloop_io::capfs::read_capped(&d, rel, shown, cap).map_err(agentloop_types::error::Error::from)
}

/// Whether `name` in skill folder `dir` of the workspace `ws` is a symbolic link (such a skill
/// is skipped with a warning, not read).
fn linked_in_workspace(ws: Option<&Utf8Path>, dir: &Utf8Path, name: &str) -> bool {
    ws.is_some() && dir.join(name).symlink_metadata().is_ok_and(|m| m.is_symlink())
}

/// Whether `dir` (below `root`) is a real folder, reached without a symlink. Skill folders that
/// are links are skipped in both formats: a link would open the folder it points to to
/// file_read.
fn real_subdir(root: &Utf8Path, dir: &Utf8Path) -> bool {
    let (Ok(r), Ok(d)) = (root.canonicalize_utf8(), dir.canonicalize_utf8()) else {
        return false;
    };
    let Ok(inner) = dir.strip_prefix(root) else { return false };
    d == r.join(inner) && dir.symlink_metadata().is_ok_and(|m| m.is_dir())
}

/// The supporting files of a skill: every file below `dir` but `own` (its SKILL.md, or a seed
/// skill's skill.json).
fn list_files(dir: &Utf8Path, own: &str, budget: &mut usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(rd) = d.read_dir_utf8() else { continue };
        for e in rd.flatten() {
            if *budget == 0 {
                return out;
            }
            *budget -= 1;
            let name = e.file_name();
            if name == ".git" || name == "node_modules" {
                continue;
            }
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() && depth < 3 {
                stack.push((e.path().to_path_buf(), depth + 1));
            } else if ft.is_file() && !(depth == 0 && name == own) {
                if let Ok(rel) = e.path().strip_prefix(dir) {
                    out.push(rel.to_string());
                }
            }
        }
    }
    out.sort();
    out
}

/// Bounds of a scan: entries visited and bytes per file read.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_entries: usize,
    pub max_file_bytes: u64,
}

impl Limits {
    pub fn of(cfg: &Config) -> Self {
        Limits { max_entries: cfg.skills.max_entries, max_file_bytes: cfg.tools.max_file_bytes }
    }
}

/// The file an Agent Skill folder is read from, as the reference validator finds it:
/// `SKILL.md`, else a lowercase `skill.md` — unless a `skill.json` makes that a seed skill's
/// body. None when the folder holds neither.
fn skill_md(dir: &Utf8Path) -> Option<&'static str> {
    let listed = |n: &str| dir.read_dir_utf8().ok()?.flatten().find(|e| e.file_name() == n).map(|e| e.path().is_file());
    // Listed by name, so a case-insensitive file system does not take skill.md for SKILL.md.
    if listed("SKILL.md") == Some(true) {
        Some("SKILL.md")
    } else if listed("skill.md") == Some(true) && !dir.join("skill.json").is_file() {
        Some("skill.md")
    } else {
        None
    }
}

fn load_agent_skill(
    ws: Option<&Utf8Path>,
    dir: &Utf8Path,
    own: &str,
    set: &mut Vec<Skill>,
    problems: &mut Vec<Problem>,
    budget: &mut usize,
    cap: u64,
) {
    let file = dir.join(own);
    if linked_in_workspace(ws, dir, own) {
        return problems.push(linked(&file));
    }
    let text = match read_in(ws, dir, own, cap) {
        Ok(t) => t,
        Err(e) => return problems.push(Problem::error(&file, None, format!("cannot read: {e}"))),
    };
    match parse_skill_md(&text, &file, dir.file_name()) {
        Ok((mut s, warnings)) => {
            problems.extend(warnings);
            s.location = dir.to_string();
            s.files = list_files(dir, own, budget);
            s.dir = Some(dir.to_path_buf());
            s.workspace = ws.map(Utf8Path::to_path_buf);
            set.push(s);
        }
        Err(p) => problems.extend(p),
    }
}

fn load_seed_skill(
    ws: Option<&Utf8Path>,
    dir: &Utf8Path,
    expect_id: Option<&str>,
    set: &mut Vec<Skill>,
    problems: &mut Vec<Problem>,
    budget: &mut usize,
    cap: u64,
) {
    let file = dir.join("skill.json");
    if linked_in_workspace(ws, dir, "skill.json") || linked_in_workspace(ws, dir, "skill.md") {
        return problems.push(linked(&file));
    }
    let v: Value = match read_in(ws, dir, "skill.json", cap).and_then(|t| {
        serde_json::from_str(&t).map_err(|e| agentloop_types::error::Error::tool(e.to_string()).with_source(e))
    }) {
        Ok(v) => v,
        Err(e) => return problems.push(Problem::error(&file, None, format!("cannot read: {e}"))),
    };
    let id = v.get("id").and_then(Value::as_str).unwrap_or("").to_string();
    if id.is_empty() {
        return problems.push(Problem::error(&file, Some("id"), "missing"));
    }
    if let Some(want) = expect_id {
        if want != id {
            return problems.push(Problem::error(
                &file,
                Some("id"),
                format!("`{id}` does not match the registry entry `{want}`"),
            ));
        }
    }
    let description = v.get("description").and_then(Value::as_str).unwrap_or("").trim().to_string();
    if description.is_empty() {
        return problems.push(Problem::error(&file, Some("description"), "missing"));
    }
    if v.get("enabled").and_then(Value::as_bool) == Some(false) {
        return;
    }
    let body = match read_in(ws, dir, "skill.md", cap) {
        Ok(b) => b,
        Err(_) if !dir.join("skill.md").exists() => String::new(),
        Err(e) => return problems.push(Problem::error(&dir.join("skill.md"), None, format!("cannot read: {e}"))),
    };
    let requires = v.get("requires").cloned().unwrap_or(Value::Null);
    set.push(Skill {
        name: id,
        description,
        format: "seed".into(),
        location: dir.to_string(),
        dir: Some(dir.to_path_buf()),
        workspace: ws.map(Utf8Path::to_path_buf),
        body: body.trim().to_string(),
        triggers: str_list(v.get("triggers")),
        requires_tools: str_list(requires.get("tools")),
        requires_env: str_list(requires.get("env_vars")),
        allowed_tools: vec![],
        license: None,
        compatibility: None,
        version: v.get("version").and_then(Value::as_str).map(String::from),
        metadata: BTreeMap::new(),
        files: list_files(dir, "skill.json", budget),
    });
}

/// Loads every skill under one folder (both formats), bounded and skipping .git/node_modules.
/// A skill folder that is a symlink, or reached through one, is skipped with a warning.
pub fn scan(root: &Utf8Path, limits: Limits) -> (Vec<Skill>, Vec<Problem>) {
    scan_in(None, root, limits)
}

/// [`scan`] of a folder in the workspace `ws` (when given): no file is read through a link.
fn scan_in(ws: Option<&Utf8Path>, root: &Utf8Path, limits: Limits) -> (Vec<Skill>, Vec<Problem>) {
    let mut scan = Scan {
        ws,
        cap: limits.max_file_bytes,
        budget: limits.max_entries,
        skills: Vec::new(),
        problems: Vec::new(),
        seen_seed: std::collections::BTreeSet::new(),
    };
    scan.registry(root);
    if let Some(own) = skill_md(root) {
        load_agent_skill(ws, root, own, &mut scan.skills, &mut scan.problems, &mut scan.budget, scan.cap);
        return (scan.skills, scan.problems);
    }
    scan.walk(root, limits.max_entries);
    (scan.skills, scan.problems)
}

/// One scan of a skills folder: what it has found so far, and how many more entries it may
/// look at (`skills.max_entries`).
struct Scan<'a> {
    ws: Option<&'a Utf8Path>,
    cap: u64,
    budget: usize,
    skills: Vec<Skill>,
    problems: Vec<Problem>,
    /// The folders `registry.json` names: loaded (or turned off) by it, never again by the walk.
    seen_seed: std::collections::BTreeSet<Utf8PathBuf>,
}

impl Scan<'_> {
    /// Loads the seed skills `registry.json` lists, when the folder has one.
    fn registry(&mut self, root: &Utf8Path) {
        let registry = root.join("registry.json");
        if !registry.is_file() {
            return;
        }
        let v = match read_in(self.ws, root, "registry.json", self.cap).and_then(|t| {
            serde_json::from_str::<Value>(&t)
                .map_err(|e| agentloop_types::error::Error::tool(e.to_string()).with_source(e))
        }) {
            Ok(v) => v,
            Err(e) => return self.problems.push(Problem::error(&registry, None, format!("cannot read: {e}"))),
        };
        for entry in v.get("skills").and_then(Value::as_array).cloned().unwrap_or_default() {
            let id = entry.get("id").and_then(Value::as_str).unwrap_or("");
            let path = entry.get("path").and_then(Value::as_str).unwrap_or(id).trim_end_matches('/');
            if id.is_empty() || path.contains("..") || path.starts_with('/') {
                self.problems.push(Problem::error(
                    &registry,
                    Some("skills"),
                    format!("entry {entry} needs a plain `id` and `path`"),
                ));
                continue;
            }
            let dir = root.join(path);
            self.seen_seed.insert(dir.clone());
            if entry.get("enabled").and_then(Value::as_bool) == Some(false) {
                continue;
            }
            if dir.symlink_metadata().is_ok() && !real_subdir(root, &dir) {
                self.problems.push(linked(&dir));
                continue;
            }
            load_seed_skill(self.ws, &dir, Some(id), &mut self.skills, &mut self.problems, &mut self.budget, self.cap);
        }
    }

    /// Walks the folders under `root`, in name order and at most 4 deep, loading every skill
    /// folder found (a skill folder is not looked into).
    fn walk(&mut self, root: &Utf8Path, max_entries: usize) {
        let mut stack = vec![(root.to_path_buf(), 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            let Ok(rd) = dir.read_dir_utf8() else {
                continue;
            };
            let (mut subdirs, exhausted) = self.subfolders(root, rd, max_entries);
            if exhausted {
                stack.clear();
            }
            subdirs.sort();
            for d in subdirs.into_iter().rev() {
                if let Some(own) = skill_md(&d) {
                    load_agent_skill(
                        self.ws,
                        &d,
                        own,
                        &mut self.skills,
                        &mut self.problems,
                        &mut self.budget,
                        self.cap,
                    );
                } else if d.join("skill.json").is_file() {
                    if !self.seen_seed.contains(&d) {
                        load_seed_skill(
                            self.ws,
                            &d,
                            None,
                            &mut self.skills,
                            &mut self.problems,
                            &mut self.budget,
                            self.cap,
                        );
                    }
                } else if depth < 4 {
                    stack.push((d, depth + 1));
                }
            }
        }
    }

    /// The real folders among a folder's entries (`.git` and `node_modules` aside), each entry
    /// counted against the budget; and whether the budget ran out, said once it does. A linked
    /// skill folder (in the workspace, any linked folder) is said and skipped.
    fn subfolders(&mut self, root: &Utf8Path, rd: camino::ReadDirUtf8, max_entries: usize) -> (Vec<Utf8PathBuf>, bool) {
        let mut subdirs: Vec<Utf8PathBuf> = Vec::new();
        for e in rd.flatten() {
            if self.budget == 0 {
                self.problems.push(Problem::warning(
                    root,
                    None,
                    format!("stopped scanning after {max_entries} entries (skills.max_entries)"),
                ));
                return (subdirs, true);
            }
            self.budget -= 1;
            let name = e.file_name();
            if name == ".git" || name == "node_modules" {
                continue;
            }
            match e.file_type() {
                Ok(t) if t.is_dir() => subdirs.push(e.path().to_path_buf()),
                Ok(t) if t.is_symlink() => {
                    let p = e.path();
                    // In the workspace, any linked folder is said (skills may sit below it).
                    let skill = skill_md(p).is_some() || p.join("skill.json").is_file();
                    if !self.seen_seed.contains(p) && (skill || self.ws.is_some() && p.is_dir()) {
                        self.problems.push(linked(p));
                    }
                }
                _ => {}
            }
        }
        (subdirs, false)
    }
}

fn linked(dir: &Utf8Path) -> Problem {
    Problem::warning(
        dir,
        None,
        "is a symbolic link (or reached through one); skill folders must be real folders, so it is skipped",
    )
}

pub fn user_dir() -> Option<Utf8PathBuf> {
    agentloop_config::config::user_config_dir().map(|d| d.join("skills"))
}

impl SkillSet {
    /// Loads all skill folders for a workspace in precedence order.
    pub fn load(cfg: &Config, root: &Utf8Path) -> Self {
        let mut set = SkillSet::default();
        let mut by_name: BTreeMap<String, Skill> = BTreeMap::new();
        if !cfg.skills.no_builtin {
            for (folder, text) in BUILTIN {
                if let Ok((mut s, _)) =
                    parse_skill_md(text, Utf8Path::new(&format!("builtin:{folder}/SKILL.md")), Some(folder))
                {
                    s.location = "builtin".into();
                    by_name.insert(s.name.clone(), s);
                }
            }
        }
        // The user's own folder is read as it is; the others, when they land in the workspace
        // (whoever named them), as the workspace's own files.
        // Each as named: relative to the workspace, or absolute.
        let mut dirs: Vec<(Utf8PathBuf, bool)> = Vec::new();
        dirs.extend(user_dir().map(|d| (d, false)));
        dirs.push(("skills".into(), true));
        dirs.extend(cfg.skills.dirs.iter().map(|d| (d.clone(), true)));
        for (d, judged) in dirs {
            let inner = if judged { agentloop_io::fs::in_workspace(root, &d) } else { None };
            let (d, ws) = match inner {
                Some(rel) => (root.join(rel), Some(root)),
                None => (agentloop_io::fs::resolve_in(root, &d), None),
            };
            if !d.is_dir() {
                continue;
            }
            if ws.is_some() && agentloop_io::fs::through_link(root, &d) {
                set.problems.push(linked(&d));
                continue;
            }
            let (skills, problems) = scan_in(ws, &d, Limits::of(cfg));
            set.problems.extend(problems);
            for s in skills {
                by_name.insert(s.name.clone(), s);
            }
        }
        // Locations are shown to the model (the catalog): name them from the workspace, as
        // file_read does, never by the machine path.
        let ws = agentloop_io::capfs::absolute(root);
        for s in by_name.values_mut() {
            if let Some(dir) = &s.dir {
                let rel = agentloop_io::capfs::relative(&ws, &agentloop_io::capfs::absolute(dir));
                s.location = if rel.as_str().is_empty() { ".".into() } else { rel.into_string() };
            }
        }
        set.skills = by_name.into_values().collect();
        // An agent profile (or --skills) may narrow the skills it is offered.
        if let Some(only) = &cfg.skills.only {
            set.skills.retain(|s| only.iter().any(|o| o == &s.name));
        }
        set.skills.retain(|s| !cfg.skills.disabled.contains(&s.name));
        set
    }

    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// Folders of on-disk skills (readable by file_read).
    pub fn dirs(&self) -> Vec<Utf8PathBuf> {
        self.skills.iter().filter_map(|s| s.dir.clone()).collect()
    }

    /// Skills whose triggers occur in the goal (case-insensitive, as whole words: a trigger
    /// is found where letters and digits do not run on either side of it). A trigger too short to
    /// mean anything ([`meaningful_trigger`]) matches nothing.
    pub fn matching(&self, goal: &str) -> Vec<String> {
        let g = goal.to_lowercase();
        self.skills
            .iter()
            .filter(|s| s.triggers.iter().any(|t| meaningful_trigger(t) && contains_words(&g, &t.to_lowercase())))
            .map(|s| s.name.clone())
            .collect()
    }

    /// A skill's instructions, or one of its files (confined to the skill folder, a regular file
    /// of at most `max_bytes`).
    pub fn read(
        &self,
        name: &str,
        file: Option<&str>,
        max_bytes: u64,
    ) -> agentloop_types::error::Result<(String, Value)> {
        let s = self.get(name).ok_or_else(|| {
            agentloop_types::error::Error::tool(format!(
                "no skill named `{name}`; available: {}",
                self.skills.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
            ))
        })?;
        let missing_env: Vec<&String> = s.requires_env.iter().filter(|v| std::env::var_os(v).is_none()).collect();
        if !missing_env.is_empty() {
            return Err(agentloop_types::error::Error::tool(format!(
                "skill `{name}` needs the environment variable(s) {} to be set before it can be used",
                missing_env.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            )));
        }
        match file {
            None | Some("SKILL.md") | Some("skill.md") => {
                Ok((s.body.clone(), json!({"skill": name, "activated": true, "files": s.files})))
            }
            Some(f) => {
                let dir = s.dir.as_ref().ok_or_else(|| {
                    agentloop_types::error::Error::tool(format!("skill `{name}` is built in and has no file `{f}`"))
                })?;
                let shown = format!("`{f}` in skill `{name}`");
                let buf = read_skill_file(s.workspace.as_deref(), dir, f, &shown, max_bytes)?;
                let text = String::from_utf8(buf).context_as(Kind::Tool, format!("{shown} is not UTF-8 text"))?;
                Ok((text, json!({"skill": name, "file": f})))
            }
        }
    }
}

/// Characters a trigger needs (letters and digits) to be offered on a goal: a one- or
/// two-letter trigger would match nearly every goal.
pub const MIN_TRIGGER: usize = 3;

/// Whether a trigger can mean something: at least [`MIN_TRIGGER`] letters or digits.
pub fn meaningful_trigger(t: &str) -> bool {
    t.chars().filter(|c| c.is_alphanumeric()).count() >= MIN_TRIGGER
}

/// Whether `phrase` occurs in `text` as whole words (no letter or digit right before or after).
fn contains_words(text: &str, phrase: &str) -> bool {
    let phrase = phrase.trim();
    if phrase.is_empty() {
        return false;
    }
    text.match_indices(phrase).any(|(i, m)| {
        let before = text[..i].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
        let after = text[i + m.len()..].chars().next().is_none_or(|c| !c.is_alphanumeric());
        before && after
    })
}
