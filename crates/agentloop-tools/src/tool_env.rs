//! What a tool call may touch: the workspace root, the resolved configuration, the skills in
//! view and the name stem of the artifacts it writes. Built-in, MCP and Ductile tools all take it;
//! it lives apart from `tool_spec` (what a tool is, as the model layer sees it) because it carries
//! the engine's skills.

use crate::skills::SkillSet;
use agentloop_config::config::Config;
use camino::Utf8Path;

/// Everything a tool may touch.
pub struct ToolEnv<'a> {
    pub root: &'a Utf8Path,
    pub config: &'a Config,
    pub skills: &'a SkillSet,
    /// Name stem for artifacts written by the registry (e.g. `step-3-web_fetch`).
    pub artifact_stem: String,
}
