//! Layered configuration: built-in defaults < user config < workspace config < agent profile <
//! request config (event mode) < `AGENTLOOP_*` environment < command-line flags.
//!
//! Every layer is a JSON value tree. Each layer is validated on its own against [`Config`] (unknown
//! keys and wrong types are errors that name the file and the key), then the trees are merged
//! (later wins, objects merge key by key) and the result is deserialized into the effective
//! [`Config`]. The source of every leaf is remembered for `agentloop config show`.
//!
//! Here: the root [`Config`] and its defaults. The sections' types live in `kinds` (value
//! kinds), `llm`, `tools`, `wellbeing` and `sections`; a layer and its [`Source`] in `layer`;
//! reading files in `files`; the environment in `env`; merging and resolution in `merge`.

use camino::Utf8PathBuf;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod budgets;
mod env;
mod files;
mod kinds;
mod layer;
mod llm;
mod merge;
mod sections;
mod seed_global;
mod tools;
mod wellbeing;
pub use env::*;
pub use files::*;
pub use kinds::*;
pub use layer::*;
pub use llm::*;
pub use merge::*;
pub use sections::*;
pub use seed_global::*;
pub use tools::*;
pub use wellbeing::*;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Most plan→act→reflect steps before the run escalates.
    pub max_steps: u32,
    /// Most reframes before the run escalates.
    pub max_reframes: u32,
    /// Where the Definition of Done comes from: `model` (Frame's answer) or `goal` (the goal
    /// itself is its one item; Frame calls no model).
    pub frame: FrameFrom,
    /// The prompts each phase sends: `full`, or `lean` for a small model on a local server.
    pub prompts: Prompts,
    /// Wall-clock limit for one `run` invocation.
    pub timeout: Dur,
    /// Token budget (input + output, all phases) for the whole run; null = unlimited.
    pub max_tokens: Option<u64>,
    /// Cost budget in USD for the whole run; null = unlimited.
    pub max_cost_usd: Option<f64>,
    /// Consecutive tool failures before the run escalates.
    pub max_consecutive_failures: u32,
    /// The same action with the same result this many times in a row escalates.
    pub max_repeats: u32,
    /// Premature `done` decisions turned into `continue` before the run escalates.
    pub max_done_refusals: u32,
    /// Phrases that, in Reflect's reason, mean a human is needed: the run escalates.
    pub escalation_triggers: Vec<String>,
    /// Tools Act may run; null = every enabled tool.
    pub allowed_tools: Option<Vec<String>>,
    /// The JSON Schema the run's final output must match (`run --output-schema FILE`): a schema
    /// object, or the path of a JSON file holding one (relative to the workspace). null = the
    /// final outcome is free text.
    pub output_schema: Option<serde_json::Value>,
    /// Extra instructions added to every phase prompt (agent profiles set this).
    pub system_prompt: Option<String>,
    /// A file whose text is the agent's identity: it comes before
    /// `system_prompt` in every phase's system prompt. Relative to the workspace.
    pub system_prompt_file: Option<Utf8PathBuf>,
    /// A note for people about this config or agent profile (shown by `agentloop agents list`).
    pub description: Option<String>,
    /// Name of an agent profile in `agents/NAME.yaml` to apply.
    pub agent: Option<String>,
    /// Folder of template overrides (default `<workspace>/templates`).
    pub templates_dir: Option<Utf8PathBuf>,
    pub llm: LlmConfig,
    /// Extra or overriding prices, USD per million tokens, keyed by model id.
    pub prices: BTreeMap<String, Price>,
    pub tools: ToolsConfig,
    pub skills: SkillsConfig,
    /// Long-term memory in the loop (recall in Frame and Plan, `remember` from Reflect,
    /// outcomes indexed when a run ends).
    pub memory: MemoryConfig,
    /// When the loop is stuck: a forced reframe once, then escalation.
    pub frustration: FrustrationConfig,
    /// Rolling usage limits across invocations, per agent profile; fatigue; `agentloop rest`.
    pub rest: RestConfig,
    /// Stress: what frustration the forced reframe did not resolve leaves behind, across runs.
    pub stress: StressConfig,
    /// The agent's values: a task whose goal or context names one of a value's `refuse_if`
    /// phrases is declined before it starts (negotiation).
    pub values: Vec<AgentValue>,
    /// How a new task is checked against `values`: `words` (the phrases) or `model` (the
    /// phrases, then one model call that judges the task; its verdict is in the negotiation).
    pub values_check: ValuesCheck,
    /// `dream --explore`: open questions and interests explored on a curiosity budget.
    pub dream: DreamConfig,
    /// Switching to rest and dream on the agent's own (`modes.auto`).
    pub modes: ModesConfig,
    /// The diagnostics log file.
    pub logging: LoggingConfig,
    pub handle: HandleConfig,
    /// `agentloop worker` and `enqueue` on Redis Streams (flags override each key).
    pub queue: QueueConfig,
    /// `agentloop serve`: the names it answers to (beyond its own).
    pub serve: ServeConfig,
    /// MCP servers whose tools join the registry (see the mcp module).
    pub mcp: McpConfig,
    /// Ductile plugins whose commands join the registry (see the ductile module).
    pub ductile: DuctileConfig,
    /// OpenTelemetry traces (docs/OBSERVABILITY.md); off unless an endpoint is set here or in
    /// the standard `OTEL_EXPORTER_OTLP_*` variables.
    pub otel: OtelConfig,
    /// Trust every workspace's own configuration (CI, a machine holding only your own
    /// workspaces). Honoured only from your own config; see `agentloop trust`.
    pub trust_all: bool,
    /// Keys of the framework seed's global config that mean nothing here, each with why: filled
    /// in when such a file is read (`seed_global`), so `config show` names them.
    pub not_used: BTreeMap<String, String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_steps: 20,
            max_reframes: 2,
            frame: FrameFrom::Model,
            prompts: Prompts::Full,
            timeout: Dur::secs(1800),
            max_tokens: None,
            max_cost_usd: None,
            max_consecutive_failures: 3,
            max_repeats: 3,
            max_done_refusals: 2,
            output_schema: None,
            escalation_triggers: ["need human input", "escalate to human", "ask the user"].map(String::from).to_vec(),
            allowed_tools: None,
            system_prompt: None,
            system_prompt_file: None,
            description: None,
            agent: None,
            templates_dir: None,
            llm: LlmConfig::default(),
            prices: BTreeMap::new(),
            tools: ToolsConfig::default(),
            skills: SkillsConfig::default(),
            memory: MemoryConfig::default(),
            frustration: FrustrationConfig::default(),
            rest: RestConfig::default(),
            stress: StressConfig::default(),
            values: Vec::new(),
            values_check: ValuesCheck::default(),
            dream: DreamConfig::default(),
            modes: ModesConfig::default(),
            logging: LoggingConfig::default(),
            handle: HandleConfig::default(),
            queue: QueueConfig::default(),
            serve: ServeConfig::default(),
            mcp: McpConfig::default(),
            ductile: DuctileConfig::default(),
            otel: OtelConfig::default(),
            trust_all: false,
            not_used: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn a_repeated_key_is_found_on_its_line_but_not_in_block_text_or_other_mappings() {
        let yaml = "a: 1\nb:\n  c: 1\n  d: |\n    c: x\n    c: y\n  c: 2\nlist:\n  - c: 1\n  - c: 2\nb: 3\n";
        assert_eq!(duplicate_key_line(yaml, "c"), Some(7));
        assert_eq!(duplicate_key_line(yaml, "b"), Some(11));
        assert_eq!(duplicate_key_line("x: {c: 1, c: 2}\n", "c"), None);
        let e = parse_yaml::<Value>("tools: {}\nmax_steps: 3\ntools: {}\n").unwrap_err();
        assert!(e.to_string().starts_with("line 3: the key `tools` appears twice"), "{e}");
        assert!(parse_yaml::<Value>("- c: 1\n- c: 2\n").is_ok());
    }
    use serde_json::json;

    fn layer(source: Source, v: Value) -> Layer {
        Layer { source, value: v }
    }

    fn file(path: &str) -> Source {
        Source::Workspace(path.into())
    }

    /// A part this build left out (a cargo feature off) is refused where it is configured,
    /// naming the key, its file and the feature; built in, the same configuration resolves.
    #[test]
    fn a_part_left_out_of_the_build_is_refused_naming_its_feature() {
        for (feature, built, value, key) in [
            ("mcp", cfg!(feature = "mcp"), json!({"mcp": {"servers": {"s": {"command": "x"}}}}), "`mcp.servers.s"),
            ("otel", cfg!(feature = "otel"), json!({"otel": {"endpoint": "http://127.0.0.1:4318"}}), "`otel.endpoint`"),
        ] {
            let r = resolve(&[layer(file("ws/agentloop.yaml"), value)]);
            if built {
                assert!(r.is_ok(), "{feature}: {:?}", r.err());
                continue;
            }
            let e = r.err().unwrap_or_else(|| panic!("{feature}: not refused"));
            assert_eq!(e.kind, agentloop_types::error::Kind::Config, "{feature}");
            assert!(e.message.starts_with(key) && e.message.contains("ws/agentloop.yaml"), "{}", e.message);
            assert!(e.message.contains(&format!("the `{feature}` feature")), "{}", e.message);
            assert!(e.hint().is_some_and(|h| h.contains(&format!("--features {feature}"))), "{feature}");
        }
    }

    #[test]
    fn later_layers_win_key_by_key_and_keep_their_source() {
        let r = resolve(&[
            layer(
                Source::UserConfig("user".into()),
                json!({"max_steps": 11, "llm": {"model": "a", "temperature": 0.5}}),
            ),
            layer(file("workspace"), json!({"max_steps": 12, "llm": {"model": "b"}})),
            layer(Source::CommandLine, json!({"llm": {"attempts": 2}})),
        ])
        .unwrap();
        assert_eq!(r.config.max_steps, 12);
        assert_eq!(r.config.llm.model.as_deref(), Some("b"));
        // A nested key a later layer does not set stays from the earlier one.
        assert_eq!(r.config.llm.temperature, Some(0.5));
        assert_eq!(r.config.llm.attempts, 2);
        assert_eq!(r.sources["max_steps"], file("workspace"));
        assert_eq!(r.sources["llm.model"], file("workspace"));
        assert_eq!(r.sources["llm.temperature"].to_string(), "user");
        assert_eq!(r.sources["llm.attempts"], Source::CommandLine);
        assert_eq!(r.sources["max_reframes"], Source::Default);
    }

    #[test]
    fn serve_hosts_read_as_a_browser_sends_them() {
        let p = |s: &str| HostPort::parse(s, false).map(|h| (h.name, h.port));
        assert_eq!(p("LocalHost.:8700"), Some(("localhost".into(), Some(8700))));
        assert_eq!(p("[::1]:80"), Some(("[::1]".into(), Some(80))));
        assert_eq!(p("127.0.0.1"), Some(("127.0.0.1".into(), None)));
        for bad in ["", ":80", "::1", "[::1", "[zz]", "a:b:c", "a:0", "a:99999", "a b", "a/b", "*.a", "a..b", "[::1]x"]
        {
            assert_eq!(p(bad), None, "{bad:?}");
        }
        let entry = |s: &str| HostPort::parse(s, true).unwrap();
        let host = |s: &str| HostPort::parse(s, false).unwrap();
        assert!(entry("*.example.com").covers(&host("a.b.example.com:1")));
        assert!(!entry("*.example.com").covers(&host("example.com")));
        assert!(!entry("*.example.com").covers(&host("badexample.com")));
        assert!(entry("agents.example:8700").covers(&host("AGENTS.example:8700")));
        assert!(!entry("agents.example:8700").covers(&host("agents.example")));
        assert!(entry("agents.example").covers(&host("agents.example:9")));
        let e = resolve(&[layer(
            file("ws/agentloop.yaml"),
            json!({"serve": {"allowed_hosts": ["ok.example", "bad host"]}}),
        )])
        .err()
        .unwrap();
        assert!(e.message.contains("in ws/agentloop.yaml at key `serve.allowed_hosts`: `bad host`"), "{}", e.message);
    }

    #[test]
    fn a_source_reads_as_config_show_prints_it() {
        let cases = [
            (Source::Default, "default"),
            (Source::Workspace("ws/agentloop.yaml".into()), "ws/agentloop.yaml"),
            (Source::AgentProfile("ws/agents/a.yaml".into()), "ws/agents/a.yaml (agent profile)"),
            (Source::Request, "the request's config"),
            (Source::ApiRequest, "the request"),
            (Source::Environment, "environment"),
            (Source::CommandLine, "command line"),
            (Source::AgentSandbox, "agent sandbox default"),
        ];
        for (source, text) in cases {
            assert_eq!(source.to_string(), text);
            assert_eq!(json!(source), json!(text));
        }
    }

    #[test]
    fn a_choice_outside_its_set_names_the_layer_and_the_valid_values() {
        let e = resolve(&[layer(file("ws/agentloop.yaml"), json!({"llm": {"structured": "xml"}}))]).err().unwrap();
        assert_eq!(
            e.message,
            "invalid configuration in ws/agentloop.yaml at key `llm.structured`: unknown variant `xml`, expected one of `tools`, `json`, `auto`"
        );
        let d = serde_json::to_value(Config::default()).unwrap();
        assert_eq!(
            (&d["llm"]["provider"], &d["llm"]["structured"], &d["logging"]["level"], &d["logging"]["format"]),
            (&json!("auto"), &json!("auto"), &json!("info"), &json!("text"))
        );
        assert_eq!(d["memory"]["compact_with"], "model");
    }

    #[test]
    fn a_bad_layer_is_named_and_the_seed_alias_maps() {
        let e = resolve(&[layer(file("ws/agentloop.yaml"), json!({"llm": {"modle": "x"}}))]).err().unwrap();
        assert_eq!(e.kind, agentloop_types::error::Kind::Config);
        assert!(e.message.contains("ws/agentloop.yaml at key `llm.modle`"), "{}", e.message);
        let r = resolve(&[layer(file("seed"), json!({"max_loops": 9}))]).unwrap();
        assert_eq!(r.config.max_steps, 9);
        let e = resolve(&[layer(file("both"), json!({"max_loops": 9, "max_steps": 3}))]).err().unwrap();
        assert!(e.message.contains("both `max_loops` and `max_steps`"), "{}", e.message);
        let e = resolve(&[layer(file("x"), json!({"llm": {"attempts": 0}}))]).err().unwrap();
        assert!(e.message.contains("llm.attempts"), "{}", e.message);
    }
}
