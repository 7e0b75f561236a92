//! minijinja templates for prompts and workspace files.
//!
//! The templates in `templates/` are embedded in the binary, so agentloop works anywhere; a file
//! of the same name in `<workspace>/templates/` (or `templates_dir` in config) overrides one.
//! Undefined variables are errors (strict mode), so a typo in an override fails loudly.

use crate::error::{Error, Result};
use camino::Utf8Path;
use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;

pub const BUILTIN: &[(&str, &str)] = &[
    ("context.md.j2", include_str!("../templates/context.md.j2")),
    ("memory.md.j2", include_str!("../templates/memory.md.j2")),
    ("plan.md.j2", include_str!("../templates/plan.md.j2")),
    ("decisions.md.j2", include_str!("../templates/decisions.md.j2")),
    ("decision.md.j2", include_str!("../templates/decision.md.j2")),
    ("prompt-system.j2", include_str!("../templates/prompt-system.j2")),
    ("prompt-frame.j2", include_str!("../templates/prompt-frame.j2")),
    ("prompt-plan.j2", include_str!("../templates/prompt-plan.j2")),
    ("prompt-reflect.j2", include_str!("../templates/prompt-reflect.j2")),
];

pub struct Templates {
    env: Environment<'static>,
}

impl Templates {
    /// Loads the built-ins, then overrides from `dir` when it exists.
    pub fn load(dir: Option<&Utf8Path>) -> Result<Self> {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_keep_trailing_newline(true);
        for (name, src) in BUILTIN {
            let over = dir.map(|d| d.join(name)).filter(|p| p.is_file());
            let (src, origin) = match &over {
                Some(p) => (crate::fs::read_to_string(p)?, p.to_string()),
                None => (src.to_string(), format!("built-in {name}")),
            };
            env.add_template_owned(name.to_string(), src)
                .map_err(|e| Error::usage(format!("template {origin} does not parse: {e}")))?;
        }
        Ok(Templates { env })
    }

    pub fn render<S: Serialize>(&self, name: &str, ctx: S) -> Result<String> {
        let t = self.env.get_template(name).map_err(|e| Error::failure(format!("template {name}: {e}")))?;
        t.render(ctx).map_err(|e| {
            Error::usage(format!("template {name} failed to render: {e}"))
                .with_hint("check the override in the templates folder; undefined variables are errors")
        })
    }
}
