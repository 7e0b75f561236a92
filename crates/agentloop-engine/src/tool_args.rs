//! Where each tool's parameters are given to the model (`llm.tool_schemas`). With `catalog` the
//! catalog gives them on each tool's line ([`agentloop_tools::catalog::signature`]) and Plan's
//! answer names the tool with its arguments as an object ([`plan_tool`]); Act checks them
//! against the tool's own schema. Near misses are mended against that schema first
//! ([`contract::parse`], by the tool's parameters the answer tool keeps beside its schema), as
//! the union of every tool's parameters (`answer`) mends them against the variant it names.

use crate::contract::{self, PlanAnswer};
use agentloop_config::config::{Config, Prompts, ToolSchemas};
use agentloop_model::model::ToolDef;
use agentloop_types::tool_spec::ToolSpec;
use serde_json::{json, Value};

/// Plan's answer tool when each tool's parameters are in the catalog (`llm.tool_schemas:
/// catalog`): `next_action` names one of the tools allowed this step and takes its arguments as
/// an object, which Act checks against the tool's schema (an argument that does not fit is a
/// failed step whose error names it). `finish` keeps its own variant: its `summary` is required,
/// and a run's output schema is the schema of its `output`.
pub fn plan_tool(tools: &[&ToolSpec], output: Option<&Value>) -> ToolDef {
    let mut schema = contract::schema_of::<PlanAnswer>();
    let (finish, others): (Vec<&ToolSpec>, Vec<&ToolSpec>) =
        tools.iter().partition(|t| agentloop_types::tool_spec::is_finish(&t.name));
    let mut variants = Vec::new();
    if !others.is_empty() {
        let names: Vec<&str> = others.iter().map(|t| t.name.as_str()).collect();
        variants.push(json!({
            "type": "object",
            "properties": {"tool": {"type": "string", "enum": names}, "args": {"type": "object"}},
            "required": ["tool", "args"],
            "additionalProperties": false
        }));
    }
    if let Some(full) = contract::plan_tool(&finish, output).parameters["properties"]["next_action"]["anyOf"].as_array()
    {
        variants.extend(full.iter().cloned());
    }
    schema["properties"]["next_action"] = json!({
        "description": "A tool allowed and its arguments (see the catalog), or finish",
        "anyOf": variants,
    });
    let mut t = contract::answer_tool("plan_answer", "Record the plan and the one next action.", schema);
    t.tool_params = Some(std::sync::Arc::new(others.iter().map(|t| (t.name.clone(), t.parameters.clone())).collect()));
    t
}

/// Whether each tool's parameters go in Plan's answer schema: `llm.tool_schemas`, where `auto`
/// says so only where the provider's strict schema mode would hold the model to them (strict
/// mode on, and `tools` a union strict mode can take: a tool with a free-form object among its
/// parameters, such as `http_call`'s headers, leaves the union unenforced, so the smaller
/// catalog form is sent); lean prompts always do.
pub fn in_answer(cfg: &Config, tools: &[&ToolSpec]) -> bool {
    cfg.prompts == Prompts::Lean
        || match cfg.llm.tool_schemas {
            ToolSchemas::Answer => true,
            ToolSchemas::Catalog => false,
            ToolSchemas::Auto => {
                agentloop_model::model::strict_schemas(cfg) && contract::plan_tool(tools, None).strict.is_some()
            }
        }
}

/// Plan's answer tool with each tool's parameters where [`in_answer`] puts them: in its schema ([`contract::plan_tool`]) or in the catalog ([`plan_tool`]).
pub fn plan_tool_as(in_answer: bool, tools: &[&ToolSpec], output: Option<&Value>) -> ToolDef {
    match in_answer {
        true => contract::plan_tool(tools, output),
        false => plan_tool(tools, output),
    }
}
