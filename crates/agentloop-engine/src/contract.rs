//! The model-facing contracts: what Frame, Plan and Reflect must answer, as Rust types.
//!
//! The JSON Schema sent to the model is generated from the same types that parse the answer
//! (`schemars`), and the parts that depend on the run — the tools allowed this step and their
//! parameters, how many Definition-of-Done items there are — are filled in from the same
//! registry and memory that the program checks against. Invariant: an answer that validates
//! against the schema sent is never refused; every rule the program checks is in the schema.
//!
//! Small models' near misses (a list written as one string, `"True"`, a capitalised enum value,
//! the tool's arguments laid out flat, extra keys) are mended in one place, [`mend`], before
//! validation; mending only ever turns an invalid answer into a valid one.

use agentloop_model::model::ToolDef;
use agentloop_types::tool_spec::ToolSpec;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// Frame's answer: the task as a bounded objective.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FrameAnswer {
    /// The goal in one sentence (default: as given)
    #[serde(default)]
    #[schemars(length(max = 300))]
    pub goal: String,
    /// Items each checkable from evidence the tools can produce (words, not a heading)
    #[schemars(length(min = 3, max = 7), inner(regex(pattern = agentloop_types::tool_spec::CHECKABLE_ITEM), length(max = 200)))]
    pub definition_of_done: Vec<String>,
    /// Budgets, forbidden tools, privacy
    #[serde(default)]
    #[schemars(inner(length(max = 200)))]
    pub constraints: Vec<String>,
    /// Assumptions and unknowns
    #[serde(default)]
    #[schemars(inner(length(max = 200)))]
    pub assumptions: Vec<String>,
    /// Whether the tools available can do the work
    #[serde(default = "yes")]
    pub can_proceed: bool,
    /// If not: the question a human must answer
    #[serde(default)]
    #[schemars(length(max = 500))]
    pub open_question: String,
    /// What is expected to work
    #[serde(default)]
    #[schemars(length(max = 300))]
    pub hypothesis: String,
}

fn yes() -> bool {
    true
}

/// Plan's answer: the one next action and the advisory plan around it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanAnswer {
    /// Short step outline (advisory)
    #[serde(default)]
    #[schemars(length(max = 12), inner(length(max = 200)))]
    pub outline: Vec<String>,
    /// Exactly one call of one tool allowed this step, or finish
    pub next_action: ActionAnswer,
    /// What success looks like for this step
    #[serde(default)]
    #[schemars(length(max = 300))]
    pub expected_outcome: String,
    /// Side effects, irreversibility
    #[serde(default)]
    #[schemars(length(max = 300))]
    pub risk: String,
    /// Why this is the best next action
    #[serde(default)]
    #[schemars(length(max = 300))]
    pub rationale: String,
}

/// One tool call. Its schema is replaced per step by a union with one variant per allowed tool
/// ([`plan_tool`]), or by the allowed tools' names with their arguments as an object
/// ([`crate::tool_args::plan_tool`]).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionAnswer {
    pub tool: String,
    pub args: Map<String, Value>,
}

/// Reflect's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Continue,
    Done,
    Reframe,
    Escalate,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Continue => "continue",
            Decision::Done => "done",
            Decision::Reframe => "reframe",
            Decision::Escalate => "escalate",
        }
    }
}

/// Reflect's answer: progress against the Definition of Done and the decision.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReflectAnswer {
    /// Items now met, each with its evidence (else refused)
    #[serde(default)]
    pub satisfied: Vec<Tick>,
    /// New facts, each citing its step or artifact
    #[serde(default)]
    #[schemars(inner(length(max = 300)))]
    pub facts: Vec<String>,
    /// continue (more work), done (every item met), reframe (misframed goal), escalate (a human must decide)
    pub decision: Decision,
    /// Why this decision
    #[serde(default)]
    #[schemars(length(max = 500))]
    pub reason: String,
    /// On done: the final outcome for the person who asked
    #[serde(default)]
    // At most 1,000: llama.cpp's grammar parser refuses a longer bounded string (each character a
    // rule; its limit is 2,000 rules) and the server then samples with no grammar at all.
    #[schemars(length(max = 1000))]
    pub outcome: String,
    /// On done: the files produced
    #[serde(default)]
    pub artifacts: Vec<String>,
    /// Remaining steps, adjusted
    #[serde(default)]
    #[schemars(length(max = 12), inner(length(max = 200)))]
    pub outline: Vec<String>,
    /// Lessons for later runs, one sentence each
    #[serde(default)]
    #[schemars(length(max = 5), inner(length(min = 1, max = 300)))]
    pub remember: Vec<String>,
}

// The program checks a tick's evidence: each step must be one of this run whose action
// succeeded, each file one in the workspace that this run wrote or read. The model is told so in
// the fields' own words, once.
/// One item ticked with its evidence
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Tick {
    /// The item's number (1 = first)
    pub item: u32,
    /// Steps of this run whose successful actions showed it
    #[serde(default)]
    #[schemars(inner(range(min = 1)))]
    pub steps: Vec<u32>,
    /// Files this run wrote or read that show it
    #[serde(default)]
    pub artifacts: Vec<String>,
}

/// Compaction's answer: earlier facts in one paragraph.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompactAnswer {
    /// One paragraph keeping every fact that still matters, with its step or artifact
    #[schemars(length(min = 1))]
    pub summary: String,
}

pub fn compact_tool() -> ToolDef {
    answer_tool("compact_answer", "Record the summary of the earlier facts.", schema_of::<CompactAnswer>())
}

/// One consolidated topic note of `dream`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DreamNote {
    /// A short title
    #[schemars(length(min = 1))]
    pub title: String,
    /// The merged note
    #[schemars(length(min = 1))]
    pub content: String,
    /// Ids of the runs it rests on
    #[serde(default)]
    pub runs: Vec<String>,
}

/// `dream`'s answer: topic notes and contradictions for a batch of runs.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DreamAnswer {
    /// Related facts merged into short notes
    #[serde(default)]
    #[schemars(length(max = 10))]
    pub notes: Vec<DreamNote>,
    /// Facts from different runs that disagree, each naming the runs
    #[serde(default)]
    #[schemars(length(max = 10))]
    pub contradictions: Vec<String>,
}

/// `dream --explore`'s answer for one open question or interest: what it found.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExploreAnswer {
    /// What exploring the question found, each a short note
    #[serde(default)]
    #[schemars(length(max = 5))]
    pub findings: Vec<ExploreFinding>,
}

/// One finding of `dream --explore`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExploreFinding {
    /// A short title
    #[schemars(length(min = 1))]
    pub title: String,
    /// The finding, with what in memory it rests on
    #[schemars(length(min = 1))]
    pub content: String,
}

pub fn explore_tool() -> ToolDef {
    answer_tool("explore_answer", "Record what exploring the question found.", schema_of::<ExploreAnswer>())
}

pub fn dream_tool() -> ToolDef {
    answer_tool("dream_answer", "Record the consolidated notes and contradictions.", schema_of::<DreamAnswer>())
}

/// The schema of a type as it is sent: inlined, without `$schema`, titles or formats that
/// only describe Rust integer widths.
pub fn schema_of<T: JsonSchema + 'static>() -> Value {
    // Generated once per type: every step asks for the same few schemas.
    static KEPT: std::sync::Mutex<Vec<(std::any::TypeId, Value)>> = std::sync::Mutex::new(Vec::new());
    let id = std::any::TypeId::of::<T>();
    if let Some((_, v)) = KEPT.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|(k, _)| *k == id) {
        return v.clone();
    }
    let v = agentloop_types::tool_spec::schema_for::<T>();
    KEPT.lock().unwrap_or_else(|p| p.into_inner()).push((id, v.clone()));
    v
}

/// A forced answer tool with its schema (and its strict-mode variant, when one exists).
pub fn answer_tool(name: &str, description: &str, parameters: Value) -> ToolDef {
    let strict = strict_variant(&parameters);
    let validator = Default::default();
    ToolDef { name: name.into(), description: description.into(), parameters, strict, validator, tool_params: None }
}

pub fn frame_tool() -> ToolDef {
    answer_tool("frame_answer", "Record the framing of the task.", schema_of::<FrameAnswer>())
}

/// Plan's answer tool: `next_action` is a union over the tools allowed this step, each variant
/// `{tool: NAME, args: <that tool's parameters>}`.
pub fn plan_tool(tools: &[&ToolSpec], output: Option<&Value>) -> ToolDef {
    let mut schema = schema_of::<PlanAnswer>();
    let variants: Vec<Value> = tools
        .iter()
        .map(|t| {
            let args = match output {
                Some(o) if t.name == "finish" => finish_with_output(&t.parameters, o),
                _ => t.parameters.clone(),
            };
            json!({
                "type": "object",
                "properties": {
                    "tool": {"type": "string", "enum": [t.name]},
                    "args": args,
                },
                "required": ["tool", "args"],
                "additionalProperties": false
            })
        })
        .collect();
    schema["properties"]["next_action"] = json!({
        "description": "One call of one tool allowed this step, or finish",
        "anyOf": variants,
    });
    answer_tool("plan_answer", "Record the plan and the one next action.", schema)
}

/// `finish`'s parameters when the run has an output schema: `output`, required, is that schema
/// (so constrained decoding and strict modes hold the model to it).
fn finish_with_output(params: &Value, output: &Value) -> Value {
    let mut p = params.clone();
    let mut o = output.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("$schema");
        m.remove("$id");
        m.entry("description").or_insert(json!("The final output, matching the output schema"));
    }
    p["properties"]["output"] = o;
    match p.get_mut("required") {
        Some(Value::Array(r)) => r.push(json!("output")),
        _ => p["required"] = json!(["output"]),
    }
    p
}

/// Reflect's answer tool: `satisfied` holds ticks of items 1..=n of the Definition of Done.
pub fn reflect_tool(items: usize) -> ToolDef {
    let mut schema = schema_of::<ReflectAnswer>();
    let sat = &mut schema["properties"]["satisfied"];
    if items == 0 {
        sat["maxItems"] = json!(0);
        sat["description"] = json!("The Definition of Done is empty: nothing to tick");
        sat.as_object_mut().map(|o| o.remove("default"));
    } else {
        sat["items"]["properties"]["item"]["minimum"] = json!(1);
        sat["items"]["properties"]["item"]["maximum"] = json!(items);
        sat["maxItems"] = json!(items);
        sat.as_object_mut().map(|o| o.remove("default"));
    }
    answer_tool("reflect_answer", "Record progress against the Definition of Done and the decision.", schema)
}

/// The fused answer's tool name (`llm.fuse_phases`): Reflect's answer and the next Plan's side by
/// side, in one call.
pub const FUSED_TOOL: &str = "reflect_plan_answer";

/// The answer of a fused call: the reflection on the step just run and, when the run goes on,
/// the plan of the next one.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FusedAnswer {
    pub reflect: ReflectAnswer,
    #[serde(default)]
    pub plan: Option<PlanAnswer>,
}

/// The fused call's answer tool: `reflect` is Reflect's answer, required; `plan` is Plan's, left
/// out when the decision is not `continue`.
pub fn fused_tool(reflect: &ToolDef, plan: &ToolDef) -> ToolDef {
    let mut plan_schema = plan.parameters.clone();
    plan_schema["description"] = json!("The next step's plan; only when the decision is continue");
    let schema = json!({
        "type": "object",
        "properties": {"reflect": reflect.parameters, "plan": plan_schema},
        "required": ["reflect"],
        "additionalProperties": false,
    });
    let mut t = answer_tool(
        FUSED_TOOL,
        "Record the reflection on this step and, when the run goes on, the plan of the next.",
        schema,
    );
    t.tool_params = plan.tool_params.clone();
    t
}

/// The answer of a call that forced `tool` (`dream`, `dream --explore`, `skills learn`): its
/// arguments, parsed as [`parse`] does; an error when the model did not call it.
pub fn forced_answer<T: DeserializeOwned>(
    r: agentloop_model::model::Response,
    tool: &ToolDef,
) -> agentloop_types::error::Result<T> {
    let call = r
        .tool_calls
        .into_iter()
        .find(|c| c.name == tool.name)
        .ok_or_else(|| agentloop_types::error::Error::failure(format!("the model did not call {}", tool.name)))?;
    let mut args = call.arguments;
    parse(tool, &mut args).map_err(|e| agentloop_types::error::Error::failure(e.to_string()).with_source(e))
}

/// Mends near misses, validates against the schema sent, then parses into the answer type.
/// The error is what the model is told in its one corrective retry.
pub fn parse<T: DeserializeOwned>(tool: &ToolDef, args: &mut Value) -> Result<T, Unfit> {
    mend(&tool.parameters, args);
    if let Some(params) = &tool.tool_params {
        mend_named_args(args, params);
    }
    let validator = tool.validator.0.get_or_init(|| agentloop_tools::tools::validator(&tool.parameters)).clone()?;
    if let Err(e) = agentloop_tools::tools::validate_with(&validator, args) {
        return Err(Unfit::Schema(explain_variant(&tool.parameters, args).unwrap_or(e)));
    }
    // The types accept everything the schema does; a failure here is a bug, reported as such.
    serde_json::from_value(args.clone()).map_err(|source| Unfit::Type { tool: tool.name.clone(), source })
}

/// Why an answer was refused by [`parse`].
#[derive(Debug)]
pub enum Unfit {
    /// It breaks the schema sent (or that schema does not compile).
    Schema(agentloop_tools::tools::SchemaError),
    /// It fits the schema but not the answer type: a bug, said as such.
    Type { tool: String, source: serde_json::Error },
}

impl From<agentloop_tools::tools::SchemaError> for Unfit {
    fn from(e: agentloop_tools::tools::SchemaError) -> Self {
        Unfit::Schema(e)
    }
}

impl std::fmt::Display for Unfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unfit::Schema(e) => write!(f, "{e}"),
            Unfit::Type { tool, source } => write!(f, "the answer does not fit {tool}: {source}"),
        }
    }
}

impl std::error::Error for Unfit {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Unfit::Schema(e) => Some(e),
            Unfit::Type { source, .. } => Some(source),
        }
    }
}

/// A Next Action that matches none of the union's variants: the errors against the variant of
/// the tool it names (e.g. `next_action.args.output.score: 11 is greater than the maximum of
/// 10`), which say what to fix where "not valid under any of the schemas" does not.
fn explain_variant(schema: &Value, args: &Value) -> Option<agentloop_tools::tools::SchemaError> {
    // A fused answer: its plan half, named as such.
    if let (Some(plan), Some(plan_schema)) = (args.get("plan"), schema.pointer("/properties/plan")) {
        return Some(explain_variant(plan_schema, plan)?.under("plan"));
    }
    let name = args.get("next_action")?.get("tool")?.as_str()?;
    let variants = schema["properties"]["next_action"]["anyOf"].as_array()?;
    let names_it = |v: &&Value| v["properties"]["tool"]["enum"].as_array().is_some_and(|e| e.iter().any(|n| n == name));
    let variant = variants.iter().find(names_it)?;
    let v = agentloop_tools::tools::validator(variant).ok()?;
    let e = agentloop_tools::tools::validate_with(&v, &args["next_action"]).err()?;
    Some(e.under("next_action"))
}

// ---- strict mode -----------------------------------------------------------------------------

/// The strict-mode form of a schema (OpenAI `strict: true`): every object closed with
/// `additionalProperties: false` and every property required, optional ones made nullable
/// (a null is read as absent). None when the schema cannot be expressed that way without
/// losing a rule — a free-form object or map, or a keyword strict mode does not take — so the
/// caller sends the plain schema instead.
pub fn strict_variant(schema: &Value) -> Option<Value> {
    let mut v = schema.clone();
    strictify(&mut v).then_some(v)
}

const STRICT_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "description",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "pattern",
    "default",
    "minLength",
    "maxLength",
];

/// A string with at least one non-space character, as a pattern.
pub const NON_BLANK: &str = "^\\s*\\S[\\s\\S]*$";

fn strictify(v: &mut Value) -> bool {
    strict_at(v, "").is_ok()
}

/// Where and why strict mode cannot take a schema (the text [`strict_refusal`] gives).
struct NotStrict(String);

/// [`strictify`] at the JSON pointer `at`; the error says where and why strict mode cannot take it.
fn strict_at(v: &mut Value, at: &str) -> std::result::Result<(), NotStrict> {
    let here = if at.is_empty() { "the schema's top level".to_string() } else { format!("`{at}`") };
    let Some(o) = v.as_object_mut() else {
        return Err(NotStrict(format!("{here} is not a schema object")));
    };
    if let Some(k) = o.keys().find(|k| !STRICT_KEYWORDS.contains(&k.as_str())) {
        return Err(NotStrict(format!("{here} uses `{k}`, a keyword strict mode does not take")));
    }
    o.remove("default");
    // Strict mode takes no length cap; its server keeps to the answer's token cap instead.
    o.remove("maxLength");
    // A non-empty string is the one length rule used; strict mode says it as a pattern.
    match o.remove("minLength") {
        None => {}
        Some(n) if n == json!(1) => {
            // Anchored: llama.cpp's grammar builder takes only `^...$` patterns.
            o.insert("pattern".into(), json!(NON_BLANK));
        }
        Some(_) => return Err(NotStrict(format!("{here} has a minLength other than 1, which strict mode cannot say"))),
    }
    if let Some(Value::Array(alts)) = o.get_mut("anyOf") {
        for (i, a) in alts.iter_mut().enumerate() {
            strict_at(a, &format!("{at}/anyOf/{i}"))?;
        }
        return Ok(());
    }
    if let Some(items) = o.get_mut("items") {
        strict_at(items, &format!("{at}/items"))?;
    }
    let is_object = o.get("type") == Some(&json!("object")) || o.contains_key("properties");
    if !is_object {
        return Ok(());
    }
    if o.get("additionalProperties").is_some_and(|a| a != &json!(false)) {
        return Err(NotStrict(format!("{here} allows additional properties; strict mode needs every object closed")));
    }
    let required: Vec<String> = match o.get("required") {
        Some(Value::Array(r)) => r.iter().filter_map(|x| x.as_str().map(String::from)).collect(),
        _ => vec![],
    };
    let Some(Value::Object(props)) = o.get_mut("properties") else {
        // A free-form object cannot be closed without forbidding what it allows.
        return Err(NotStrict(format!(
            "{here} is an object without `properties`; strict mode cannot take a free-form object"
        )));
    };
    for (name, p) in props.iter_mut() {
        strict_at(p, &format!("{at}/properties/{name}"))?;
        if !required.contains(name) {
            nullable(p);
        }
    }
    let all: Vec<Value> = props.keys().map(|k| json!(k)).collect();
    o.insert("required".into(), Value::Array(all));
    o.insert("additionalProperties".into(), json!(false));
    Ok(())
}

/// Why strict mode cannot take `schema` (where, and which rule), or None when it can.
pub fn strict_refusal(schema: &Value) -> Option<String> {
    strict_at(&mut schema.clone(), "").err().map(|NotStrict(why)| why)
}

fn nullable(p: &mut Value) {
    let Some(o) = p.as_object_mut() else { return };
    if let Some(Value::Array(alts)) = o.get_mut("anyOf") {
        alts.push(json!({"type": "null"}));
        return;
    }
    match o.get_mut("type") {
        Some(Value::String(t)) => {
            let t = t.clone();
            o.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(ts)) if !ts.contains(&json!("null")) => ts.push(json!("null")),
        _ => {}
    }
    if let Some(Value::Array(e)) = o.get_mut("enum") {
        if !e.contains(&Value::Null) {
            e.push(Value::Null);
        }
    }
}

// ---- mending ---------------------------------------------------------------------------------

/// Mends the near misses small models make, guided by the schema: a list written as one string
/// (one item per line, bullets and numbers stripped) or as a JSON string, a boolean or number
/// written as a string, an object written as a JSON string, an enum value in the wrong case,
/// a null for an optional field, keys the schema does not have, a list longer than allowed
/// (cut), and for Plan, the shapes small models give the action. Never makes a valid answer
/// invalid.
pub fn mend(schema: &Value, v: &mut Value) {
    if let Some(next) = v.get_mut("next_action") {
        mend_action(next);
    }
    // A fused answer's plan half.
    if let Some(next) = v.get_mut("plan").and_then(|p| p.get_mut("next_action")) {
        mend_action(next);
    }
    mend_items(v);
    // A decision without ticks ticks nothing (a lean schema has the list first, so required).
    if let Some(o) = v.as_object_mut().filter(|o| o.contains_key("decision") && !o.contains_key("satisfied")) {
        let variants = schema.get("anyOf").and_then(Value::as_array).map_or(vec![schema], |a| a.iter().collect());
        if variants.iter().any(|s| s.pointer("/properties/satisfied").is_some()) {
            o.insert("satisfied".into(), json!([]));
        }
    }
    mend_value(schema, v);
}

/// Mends a Plan answer's (or a fused answer's plan half's) arguments against the parameters of
/// the tool it names (`params`, by tool), as [`mend`] mends them against the union's
/// variant: `"5"` for an integer, an enum value in another case, a null for an optional
/// argument, a key a closed schema does not take. What still does not fit is Act's to refuse.
fn mend_named_args(v: &mut Value, params: &Map<String, Value>) {
    let next = match v.get_mut("plan") {
        Some(plan) => plan.get_mut("next_action"),
        None => v.get_mut("next_action"),
    };
    let Some(next) = next else { return };
    mend_action(next);
    let Some(schema) = next.get("tool").and_then(Value::as_str).and_then(|t| params.get(t)) else { return };
    if let Some(args) = next.get_mut("args").filter(|a| a.is_object()) {
        mend_value(schema, args);
    }
}

/// Definition-of-Done items mended to the schema's item rule
/// ([`agentloop_types::tool_spec::CHECKABLE_ITEM`]): a heading loses its marks (`## Goal met`),
/// lines and runs of white space become one space, a double quote a single one and a backslash a
/// slash. What is left with no word in it is refused, named in words.
fn mend_items(v: &mut Value) {
    let Some(Value::Array(items)) = v.get_mut("definition_of_done") else { return };
    for item in items.iter_mut() {
        if let Value::String(s) = item {
            let text = item_text(s);
            *s = match text.strip_prefix('#') {
                Some(_) => text.trim_start_matches('#').trim_start().to_string(),
                None => text,
            };
        }
    }
}

/// A Definition-of-Done item's text as the schema's item rule admits it: one line (runs of white
/// space and control characters one space), a double quote a single one, a backslash a slash.
fn item_text(s: &str) -> String {
    let words = s.split(|c: char| c.is_whitespace() || c.is_control()).filter(|w| !w.is_empty());
    words.collect::<Vec<_>>().join(" ").replace('"', "'").replace('\\', "/")
}

/// Reflect's `satisfied`: each tick given as an object, a number, a numeric string ("1, 3") or
/// an item's text becomes `{item, steps, artifacts}` with the item's number within 1..=n (what
/// matches no item is dropped; a later tick of the same item adds its evidence). Evidence given
/// as `step`/`artifact`/`path`, a single value, or one `evidence` string (`step 2, notes.md`, as
/// memory.md writes it) is laid out in the schema's shape. A tick without evidence stays a tick
/// without evidence: the program refuses it, and says why.
pub fn mend_satisfied(v: &mut Value, items: &[String]) {
    let Some(sat) = v.get_mut("satisfied") else { return };
    let list: Vec<Value> = match sat.take() {
        Value::Array(a) => a,
        Value::Null => vec![],
        other => vec![other],
    };
    let mut out: Vec<(u64, Map<String, Value>)> = Vec::new();
    let mut push = |i: u64, ev: Map<String, Value>| {
        if !(1..=items.len() as u64).contains(&i) {
            return;
        }
        match out.iter_mut().find(|(n, _)| *n == i) {
            Some((_, have)) => {
                for k in ["steps", "artifacts"] {
                    let more = ev.get(k).and_then(Value::as_array).cloned().unwrap_or_default();
                    if let Some(Value::Array(a)) = have.get_mut(k) {
                        for x in more {
                            if !a.contains(&x) {
                                a.push(x);
                            }
                        }
                    }
                }
            }
            None => out.push((i, ev)),
        }
    };
    for x in list {
        match x {
            Value::Object(mut o) => {
                let evidence = tick_evidence(&mut o);
                let which = o.remove("item").or_else(|| o.remove("number")).unwrap_or(Value::Null);
                item_numbers(&which, items).into_iter().for_each(|i| push(i, evidence.clone()));
            }
            other => item_numbers(&other, items).into_iter().for_each(|i| push(i, tick_evidence(&mut Map::new()))),
        }
    }
    *sat = Value::Array(
        out.into_iter()
            .map(|(i, mut ev)| {
                ev.insert("item".into(), json!(i));
                Value::Object(ev)
            })
            .collect(),
    );
}

/// The item numbers a tick names: a number, numeric strings ("1, 3"), or an item's text.
fn item_numbers(x: &Value, items: &[String]) -> Vec<u64> {
    match x {
        Value::Number(num) => num
            .as_u64()
            .or_else(|| num.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64))
            .into_iter()
            .collect(),
        Value::String(t) => {
            let t = t.trim();
            let parts: Vec<&str> = t.split(',').map(str::trim).filter(|p| !p.is_empty()).collect();
            if !parts.is_empty() && parts.iter().all(|p| p.parse::<u64>().is_ok()) {
                return parts.iter().filter_map(|p| p.parse().ok()).collect();
            }
            // Read as the items were mended, so an item quoted back as the model first wrote it is
            // still found.
            let norm = |s: &str| item_text(s).to_lowercase();
            let lower = norm(t);
            items
                .iter()
                .position(|i| norm(i) == lower)
                .or_else(|| items.iter().position(|i| !lower.is_empty() && norm(i).contains(&lower)))
                .map(|i| i as u64 + 1)
                .into_iter()
                .collect()
        }
        _ => vec![],
    }
}

/// A tick's evidence in the schema's shape (`steps`: integers, `artifacts`: strings), taken out
/// of the tick's other keys; what is neither is left for validation to name.
fn tick_evidence(o: &mut Map<String, Value>) -> Map<String, Value> {
    let mut steps: Vec<Value> = Vec::new();
    let mut arts: Vec<Value> = Vec::new();
    if let Some(Value::String(line)) = o.remove("evidence") {
        let e = agentloop_workspace::markdown::Evidence::parse(&line);
        steps.extend(e.steps.into_iter().map(|s| json!(s)));
        arts.extend(e.artifacts.into_iter().map(Value::String));
    }
    for k in ["steps", "step"] {
        for s in o.remove(k).map(one_or_many).unwrap_or_default() {
            match s {
                Value::String(t) => {
                    let n = t.trim().trim_start_matches("step").trim().parse::<u64>();
                    steps.push(n.map_or(Value::String(t), |n| json!(n)));
                }
                other => steps.push(other),
            }
        }
    }
    for k in ["artifacts", "artifact", "paths", "path", "files", "file"] {
        arts.extend(o.remove(k).map(one_or_many).unwrap_or_default());
    }
    let mut ev = Map::new();
    ev.insert("steps".into(), Value::Array(steps));
    ev.insert("artifacts".into(), Value::Array(arts));
    // Anything else the tick carries stays, so validation names it.
    for (k, v) in o.iter().filter(|(k, _)| *k != "item" && *k != "number") {
        ev.insert(k.clone(), v.clone());
    }
    ev
}

fn one_or_many(v: Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a,
        Value::Null => vec![],
        other => vec![other],
    }
}

/// The shapes small models give an action: `name` for `tool`, `arguments`/`parameters` for
/// `args` (an object or a JSON string), the arguments laid out next to `tool`, the whole action
/// as a JSON string, and `submit_response` for `finish`.
fn mend_action(next: &mut Value) {
    if let Value::String(s) = next {
        if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(s.trim()) {
            *next = v;
        }
    }
    let Some(na) = next.as_object_mut() else { return };
    if !na.contains_key("tool") {
        if let Some(n) = na.remove("name") {
            na.insert("tool".into(), n);
        }
    }
    if let Some(Value::String(t)) = na.get_mut("tool") {
        *t = agentloop_tools::tools::Registry::canonical(t.trim()).to_string();
    }
    if !na.contains_key("args") {
        if let Some(a) = na.remove("arguments").or_else(|| na.remove("parameters")) {
            na.insert("args".into(), a);
        } else {
            let rest: Map<String, Value> =
                na.iter().filter(|(k, _)| *k != "tool").map(|(k, v)| (k.clone(), v.clone())).collect();
            na.retain(|k, _| k == "tool");
            na.insert("args".into(), Value::Object(rest));
        }
    }
    match na.get_mut("args") {
        Some(a @ Value::Null) => *a = json!({}),
        Some(a @ Value::String(_)) => {
            if let Some(Ok(v @ Value::Object(_))) = a.as_str().map(|s| serde_json::from_str::<Value>(s.trim())) {
                *a = v;
            }
        }
        _ => {}
    }
}

fn types_of(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    }
}

fn mend_value(schema: &Value, v: &mut Value) {
    // Text past its cap is cut to it (ending in `…`): a long reason is not worth a retry.
    if let (Value::String(s), Some(max)) = (&mut *v, schema.get("maxLength").and_then(Value::as_u64)) {
        agentloop_types::text::cap_chars(s, max as usize);
    }
    // A union: mend by the variant the value names (the action's tool), else leave it.
    if let Some(Value::Array(alts)) = schema.get("anyOf") {
        mend_by_named_variant(alts, v);
        return;
    }
    let types = types_of(schema);
    if !mend_text(schema, &types, v) {
        return;
    }
    mend_inside(schema, &types, v);
}

/// Mends `v` by the variant of a union whose tool it names (an action), or whose `decision` enum
/// holds the one it gives, in any case (a lean reflection); one naming none is left as it is.
fn mend_by_named_variant(alts: &[Value], v: &mut Value) {
    let tool = v.get("tool").and_then(Value::as_str).map(String::from);
    let decision = v.get("decision").and_then(Value::as_str).map(str::to_ascii_lowercase);
    if let Some(alt) = alts.iter().find(|a| {
        a.pointer("/properties/tool/enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.iter().any(|n| n.as_str().is_some_and(|n| Some(n) == tool.as_deref())))
    }) {
        mend_value(alt, v);
    } else if let Some(alt) = alts.iter().find(|a| {
        a.pointer("/properties/decision/enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.iter().any(|d| d.as_str().is_some_and(|d| Some(d) == decision.as_deref())))
    }) {
        mend_value(alt, v);
    }
}

/// Reads text given where the schema wants another type: a string by its enum's spelling, an
/// array, a boolean, a number or an object from what the text says. Says whether the value is
/// mended further (what it holds); a string, or text that says none of those, is not.
fn mend_text(schema: &Value, types: &[&str], v: &mut Value) -> bool {
    if let Value::String(text) = v {
        let text = text.trim().to_string();
        if types.contains(&"string") {
            if let Some(Value::Array(e)) = schema.get("enum") {
                if let Some(hit) = e.iter().find(|x| x.as_str().is_some_and(|s| s.eq_ignore_ascii_case(&text))) {
                    *v = hit.clone();
                }
            }
            return false;
        }
        if types.contains(&"array") {
            *v = match serde_json::from_str::<Value>(&text) {
                Ok(a @ Value::Array(_)) => a,
                _ => Value::Array(lines_as_items(&text)),
            };
        } else if types.contains(&"boolean") {
            match text.to_lowercase().as_str() {
                "true" | "yes" => *v = Value::Bool(true),
                "false" | "no" => *v = Value::Bool(false),
                _ => return false,
            }
        } else if types.contains(&"integer") || types.contains(&"number") {
            if let Ok(n) = serde_json::from_str::<serde_json::Number>(&text) {
                *v = Value::Number(n);
            } else {
                return false;
            }
        } else if types.contains(&"object") {
            match serde_json::from_str::<Value>(&text) {
                Ok(o @ Value::Object(_)) => *v = o,
                _ => return false,
            }
        } else {
            return false;
        }
    }
    true
}

/// Mends what a value holds: an integer written as `3.0`, an object's fields (nulls for absent
/// optional ones dropped, unknown ones dropped where none are allowed), an array's items and
/// length.
fn mend_inside(schema: &Value, types: &[&str], v: &mut Value) {
    match v {
        // 3.0 is an integer to JSON Schema but not to a parser of integers.
        Value::Number(n) if types.contains(&"integer") && !types.contains(&"number") => {
            if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && n.as_i64().is_none() && n.as_u64().is_none()) {
                if f >= 0.0 && f < u64::MAX as f64 {
                    *v = json!(f as u64);
                } else if f < 0.0 && f > i64::MIN as f64 {
                    *v = json!(f as i64);
                }
            }
        }
        Value::Object(obj) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let closed = schema.get("additionalProperties") == Some(&json!(false));
            if let Some(props) = props {
                obj.retain(|k, val| match props.get(k) {
                    // A null is an absent optional field, unless the field takes null.
                    Some(p) => !val.is_null() || types_of(p).contains(&"null"),
                    None => !closed,
                });
                for (k, val) in obj.iter_mut() {
                    if let Some(p) = props.get(k) {
                        mend_value(p, val);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                items.iter_mut().for_each(|i| mend_value(item_schema, i));
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
                items.truncate(max as usize);
            }
        }
        _ => {}
    }
}

/// A list written as text: one item per line, bullets and `1.` numbering stripped.
fn lines_as_items(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| l.trim().trim_start_matches(['-', '*', '•']).trim())
        .map(|l| {
            l.split_once(". ")
                .filter(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
                .map(|(_, r)| r)
                .unwrap_or(l)
        })
        .filter(|l| !l.is_empty())
        .map(|l| Value::String(l.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    /// Writes the schemas sent (plain and strict) to $AGENTLOOP_DUMP_SCHEMAS for outside checks.
    #[test]
    #[allow(clippy::disallowed_methods)] // a developer's dump into a folder they name
    fn dump_schemas() {
        let Some(dir) = std::env::var_os("AGENTLOOP_DUMP_SCHEMAS") else { return };
        let cfg = agentloop_config::config::Config::default();
        let reg = agentloop_tools::tools::Registry::new(&cfg, camino::Utf8Path::new(".")).unwrap();
        let all = reg.allowed(&cfg);
        let (plan, reflect) = (super::plan_tool(&all, None), super::reflect_tool(4));
        let fused = super::fused_tool(&reflect, &plan);
        for t in [super::frame_tool(), plan, reflect, fused] {
            let p = std::path::Path::new(&dir).join(format!("{}.json", t.name));
            std::fs::write(p, t.parameters.to_string()).unwrap();
            if let Some(s) = t.strict {
                std::fs::write(std::path::Path::new(&dir).join(format!("{}.strict.json", t.name)), s.to_string())
                    .unwrap();
            }
        }
    }

    /// A fused answer is read half by half: the reflection alone is one, the plan half is
    /// mended as Plan's own answer is, and an error in it says where.
    #[test]
    fn a_fused_answer_is_checked_half_by_half() {
        use serde_json::json;
        let cfg = agentloop_config::config::Config::default();
        let reg = agentloop_tools::tools::Registry::new(&cfg, camino::Utf8Path::new(".")).unwrap();
        let tool = super::fused_tool(&super::reflect_tool(2), &super::plan_tool(&reg.allowed(&cfg), None));
        let mut v = json!({"reflect": {"decision": "done", "reason": "r"}});
        let a: super::FusedAnswer = super::parse(&tool, &mut v).unwrap();
        assert!(a.plan.is_none());
        let mut v = json!({"reflect": {"decision": "continue"}, "plan": {"next_action": {"name": "file_read", "arguments": {"path": "a.md"}}}});
        let a: super::FusedAnswer = super::parse(&tool, &mut v).unwrap();
        assert_eq!(a.plan.unwrap().next_action.tool, "file_read");
        let mut v =
            json!({"reflect": {"decision": "continue"}, "plan": {"next_action": {"tool": "file_read", "args": {}}}});
        let e = super::parse::<super::FusedAnswer>(&tool, &mut v).unwrap_err();
        assert!(e.to_string().contains("plan.next_action"), "{e}");
        let mut v = json!({"plan": {"next_action": {"tool": "file_read", "args": {"path": "a.md"}}}});
        assert!(super::parse::<super::FusedAnswer>(&tool, &mut v).is_err(), "the reflection is required");
    }
}
