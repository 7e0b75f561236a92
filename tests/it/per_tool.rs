//! Deny lists, per-tool settings and the framework seed's agent file: `tools.disabled`,
//! `skills.disabled`, `tools.<tool>.{enabled, allowed_paths, timeout_seconds, max_length}`
//! narrowing the global policy (wider is refused naming the key), an untrusted workspace held to
//! narrowing them too, and §9.2's agent JSON loaded as a profile.

use crate::common::*;
use crate::tools::call;
use serde_json::{json, Value};

/// The seed's §9.1 `tools` block, verbatim.
const SEED_TOOLS: &str = r#"{
  "tools": {
    "file_read": {
      "enabled": true,
      "allowed_paths": ["./SKILLS", "./MEMORY", "./OUTPUT", "./SANDBOX"]
    },
    "file_write": {
      "enabled": true,
      "allowed_paths": ["./OUTPUT", "./SANDBOX", "./MEMORY"]
    },
    "http_call": {
      "enabled": true,
      "timeout_seconds": 30
    },
    "web_fetch": {
      "enabled": true,
      "max_length": 15000
    }
  }
}"#;

/// The seed's §9.2 agent configuration, verbatim.
const SEED_AGENT: &str = r#"{
  "agent_id": "main_agent",
  "name": "Main Assistant",
  "description": "General-purpose AI assistant",

  "llm": {
    "provider": "anthropic",
    "model": "claude-sonnet-4-5-20250929",
    "temperature": 0.0,
    "max_tokens": 4096
  },

  "system_prompt": "You are a helpful AI assistant with access to tools. You can read and write files, make HTTP requests, and follow skill instructions. Always explain what you're doing before using tools.",

  "limits": {
    "max_turns": 25,
    "timeout_seconds": 900
  },

  "tools": {
    "enabled": ["file_read", "file_write", "http_call", "web_fetch"],
    "disabled": []
  },

  "skills": {
    "auto_load": true,
    "enabled": ["moltbook", "github"],
    "disabled": []
  },

  "memory": {
    "session_persistence": true,
    "long_term_enabled": true,
    "auto_index": true
  },

  "sandbox": {
    "root_paths": ["./SANDBOX/main_agent"]
  }
}"#;

fn tool_names(t: &T) -> Vec<String> {
    let out = t.al(&["tools", "list", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn deny_lists_take_tools_and_skills_away() {
    let t = T::new();
    t.write("ws/notes.txt", "n\n");
    t.write("ws/skills/alpha/SKILL.md", "---\nname: alpha\ndescription: The first skill\n---\nDo alpha.\n");
    t.write("ws/skills/beta/SKILL.md", "---\nname: beta\ndescription: The second skill\n---\nDo beta.\n");
    assert!(tool_names(&t).contains(&"list_dir".to_string()));
    t.write(
        "ws/agentloop.yaml",
        "tools:\n  disabled: [list_dir]\n  grep: {enabled: false}\nskills:\n  disabled: [beta]\n",
    );
    let names = tool_names(&t);
    assert!(!names.contains(&"list_dir".to_string()) && !names.contains(&"grep".to_string()), "{names:?}");
    assert!(names.contains(&"file_read".to_string()));
    let (code, v) = call(&t, "list_dir", json!({}));
    assert_eq!(code, Some(2), "{v}");
    let out = t.al(&["tools", "call", "list_dir"]).output().unwrap();
    assert!(stderr(&out).contains("tool `list_dir` is disabled"), "{}", stderr(&out));
    let skills = stdout(&t.al(&["skills", "list"]).output().unwrap());
    assert!(skills.contains("alpha") && !skills.contains("beta"), "{skills}");
    let (code, v) = call(&t, "skill_read", json!({"name": "beta"}));
    assert_ne!(code, Some(0), "a disabled skill cannot be read: {v}");
    // `finish` is how a run ends: it cannot be disabled.
    t.write("ws/agentloop.yaml", "tools:\n  disabled: [finish]\n");
    let out = t.al(&["tools", "list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`tools.disabled`") && stderr(&out).contains("finish"), "{}", stderr(&out));
}

#[test]
fn the_seeds_per_tool_settings_narrow_each_tool() {
    let t = T::new();
    t.write("ws/agentloop.json", SEED_TOOLS);
    t.write("ws/OUTPUT/report.md", "in output\n");
    t.write("ws/notes.txt", "outside the lists\n");
    let (code, v) = call(&t, "file_read", json!({"path": "OUTPUT/report.md"}));
    assert_eq!((code, v["output"].as_str()), (Some(0), Some("in output\n")), "{v}");
    let (code, v) = call(&t, "file_read", json!({"path": "notes.txt"}));
    assert_eq!(code, Some(6), "{v}");
    assert!(v["error"].as_str().unwrap().contains("outside the folders this tool may read"), "{v}");
    let (code, _) = call(&t, "file_write", json!({"path": "OUTPUT/new.md", "content": "x"}));
    assert_eq!(code, Some(0));
    let (code, v) = call(&t, "file_write", json!({"path": "notes.md", "content": "x"}));
    assert_eq!(code, Some(6), "{v}");
    // A link inside an allowed folder does not reach the rest of the workspace.
    std::os::unix::fs::symlink("../notes.txt", t.path("ws/OUTPUT/link.txt")).unwrap();
    let (code, v) = call(&t, "file_read", json!({"path": "OUTPUT/link.txt"}));
    assert_eq!(code, Some(6), "{v}");
    // web_fetch's max_length is the call's default and cap; the schema says so.
    let tools: Value = serde_json::from_slice(&t.al(&["tools", "list", "--json"]).output().unwrap().stdout).unwrap();
    let fetch = tools.as_array().unwrap().iter().find(|t| t["name"] == "web_fetch").unwrap();
    assert_eq!(fetch["parameters"]["properties"]["max_length"]["default"], 15000);
}

#[test]
fn a_per_tool_value_wider_than_the_global_policy_is_refused_naming_it() {
    let t = T::new();
    let cases = [
        ("tools:\n  http_call: {timeout_seconds: 60}\n", "tools.http_call.timeout_seconds"),
        ("tools:\n  file_read: {allowed_paths: [/etc]}\n", "tools.file_read.allowed_paths"),
        (
            "tools:\n  write_paths: [out]\n  file_write: {allowed_paths: [elsewhere]}\n",
            "tools.file_write.allowed_paths",
        ),
        ("tools:\n  file_write: {allowed_paths: [agents]}\n", "tools.file_write.allowed_paths"),
    ];
    for (yaml, key) in cases {
        t.write("ws/agentloop.yaml", yaml);
        let out = t.al(&["tools", "list"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{yaml}");
        assert!(
            stderr(&out).contains(&format!("`{key}`")) && stderr(&out).contains("may only narrow"),
            "{}",
            stderr(&out)
        );
    }
    // A key a tool does not have is refused, with the one meant.
    t.write("ws/agentloop.yaml", "tools:\n  file_read: {allowed_path: [OUTPUT]}\n");
    let out = t.al(&["tools", "list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("did you mean `tools.file_read.allowed_paths`"), "{}", stderr(&out));
    t.write("ws/agentloop.yaml", "tools:\n  http_call: {max_length: 5}\n");
    let out = t.al(&["tools", "list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("tools.http_call") && stderr(&out).contains("max_length"), "{}", stderr(&out));
}

#[test]
fn an_untrusted_workspace_may_narrow_per_tool_settings_but_not_widen_them() {
    let t = T::new();
    t.write("xdg/agentloop/config.yaml", "tools:\n  disabled: [grep]\n  file_read: {allowed_paths: [OUTPUT]}\n");
    t.write("ws/OUTPUT/a.md", "a\n");
    // Narrowing: another denial, a shorter page, a subfolder.
    t.write(
        "ws/agentloop.yaml",
        "tools:\n  disabled: [grep, list_dir]\n  web_fetch: {max_length: 100}\n  file_read: {allowed_paths: [OUTPUT]}\n",
    );
    let out = t
        .untrusted()
        .args(["-w", "ws", "tools", "call", "file_read", "--args", r#"{"path": "OUTPUT/a.md"}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = t.untrusted().args(["-w", "ws", "tools", "call", "list_dir"]).output().unwrap();
    assert!(stderr(&out).contains("disabled"), "{}", stderr(&out));
    // Widening: dropping the user's denial, a folder beyond the user's list, a longer timeout.
    t.write(
        "ws/agentloop.yaml",
        "tools:\n  disabled: []\n  file_read: {allowed_paths: [.]}\n  http_call: {timeout_seconds: 600}\n",
    );
    let out = t
        .untrusted()
        .args(["-w", "ws", "tools", "call", "file_read", "--args", r#"{"path": "OUTPUT/a.md"}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    for key in ["`tools.disabled`", "`tools.file_read.allowed_paths`", "`tools.http_call.timeout_seconds`"] {
        assert!(err.contains(key), "{key} named: {err}");
    }
    // A path out of the workspace is refused even without a list of the user's.
    t.write("xdg/agentloop/config.yaml", "");
    t.write("ws/agentloop.yaml", "tools:\n  file_read: {allowed_paths: [../]}\n");
    let out = t
        .untrusted()
        .args(["-w", "ws", "tools", "call", "file_read", "--args", r#"{"path": "OUTPUT/a.md"}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("`tools.file_read.allowed_paths`"), "{}", stderr(&out));
}

#[test]
fn the_seeds_agent_json_loads_as_a_profile() {
    let t = T::new();
    t.write("ws/agents/main_agent.json", SEED_AGENT);
    t.write("ws/notes.txt", "n\n");
    let list = stdout(&t.al(&["agents", "list"]).output().unwrap());
    assert!(list.contains("main_agent") && list.contains("Main Assistant: General-purpose AI assistant"), "{list}");
    let out = t.al(&["agents", "show", "main_agent", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &v["config"];
    assert_eq!(c["max_steps"], 25);
    assert_eq!(c["timeout"], "900s");
    assert_eq!(
        (c["llm"]["provider"].as_str(), c["llm"]["model"].as_str()),
        (Some("anthropic"), Some("claude-sonnet-4-5-20250929"))
    );
    assert_eq!(c["llm"]["max_tokens"], 4096);
    assert_eq!(c["allowed_tools"], json!(["file_read", "file_write", "http_call", "web_fetch"]));
    assert_eq!(c["skills"]["only"], json!(["moltbook", "github"]));
    assert_eq!((c["memory"]["enabled"].as_bool(), c["memory"]["auto_index"].as_bool()), (Some(true), Some(true)));
    assert_eq!(c["tools"]["write_paths"], json!(["./SANDBOX/main_agent"]));
    assert!(v["system_prompt"].as_str().unwrap().starts_with("You are a helpful AI assistant"));
    // The agent's tools: its list, and writes only in its sandbox folder.
    let out = t.al(&["--agent", "main_agent", "tools", "list", "--json"]).output().unwrap();
    let tools: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = tools.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"file_read") && !names.contains(&"list_dir"), "{names:?}");
    let w = |path: &str| {
        let out = t
            .al(&[
                "--agent",
                "main_agent",
                "tools",
                "call",
                "file_write",
                "--args",
                &json!({"path": path, "content": "x"}).to_string(),
            ])
            .output()
            .unwrap();
        out.status.code()
    };
    assert_eq!(w("SANDBOX/main_agent/out.md"), Some(0));
    assert_eq!(w("elsewhere.md"), Some(6));
    // A field that cannot be honoured, and a profile whose id is not its file's name.
    let off = SEED_AGENT.replace("\"auto_load\": true", "\"auto_load\": false");
    t.write("ws/agents/main_agent.json", &off);
    let out = t.al(&["agents", "show", "main_agent"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("`skills.auto_load`") && stderr(&out).contains("main_agent.json"),
        "{}",
        stderr(&out)
    );
    t.write("ws/agents/helper.json", SEED_AGENT);
    let out = t.al(&["agents", "show", "helper"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`agent_id`"), "{}", stderr(&out));
}

/// The seed's §9.1 global configuration, verbatim.
const SEED_GLOBAL: &str = r#"{
  "version": "1.0.0",

  "paths": {
    "skills_dir": "./SKILLS",
    "memory_dir": "./MEMORY",
    "output_dir": "./OUTPUT",
    "config_dir": "./CONFIG"
  },

  "defaults": {
    "max_turns": 20,
    "timeout_seconds": 600,
    "llm_provider": "anthropic",
    "llm_model": "claude-sonnet-4-5-20250929"
  },

  "tools": {
    "file_read": {
      "enabled": true,
      "allowed_paths": ["./SKILLS", "./MEMORY", "./OUTPUT", "./SANDBOX"]
    },
    "file_write": {
      "enabled": true,
      "allowed_paths": ["./OUTPUT", "./SANDBOX", "./MEMORY"]
    },
    "http_call": {
      "enabled": true,
      "timeout_seconds": 30
    },
    "web_fetch": {
      "enabled": true,
      "max_length": 15000
    }
  },

  "human_escalation": {
    "enabled": true,
    "triggers": [
      "need human input",
      "escalate to human",
      "ask the user"
    ]
  },

  "logging": {
    "level": "INFO",
    "file": "./logs/agentic_loop.log",
    "format": "%(asctime)s - %(name)s - %(levelname)s - %(message)s"
  }
}"#;

#[test]
fn the_seeds_global_config_file_loads_as_written() {
    let t = T::new();
    t.write("ws/.keep", "");
    t.write("xdg/agentloop/config.json", SEED_GLOBAL);
    let file = t.path("xdg/agentloop/config.json").display().to_string();
    let out = t.al(&["config", "show", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (c, s) = (&v["config"], &v["sources"]);
    // Each section's keys are the agentloop keys they mean, from that file.
    for (key, want) in [
        ("max_steps", json!(20)),
        ("timeout", json!(600)),
        ("llm.provider", json!("anthropic")),
        ("llm.model", json!("claude-sonnet-4-5-20250929")),
        ("escalation_triggers", json!(["need human input", "escalate to human", "ask the user"])),
        ("skills.dirs", json!(["./SKILLS"])),
        ("memory.dir", json!("./MEMORY")),
        ("logging.level", json!("INFO")),
        ("logging.file", json!("./logs/agentic_loop.log")),
        ("tools.web_fetch.max_length", json!(15000)),
    ] {
        let got = key.split('.').fold(c, |v, k| &v[k]);
        assert_eq!(got, &want, "{key}: {c}");
        assert_eq!(s[key], file.as_str(), "{key} comes from the file: {s}");
    }
    // What means nothing here is named, with why.
    let not_used = c["not_used"].as_object().unwrap();
    let mut keys: Vec<&str> = not_used.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["logging.format", "paths.config_dir", "paths.output_dir", "version"], "{not_used:?}");
    assert!(not_used["paths.output_dir"].as_str().unwrap().contains("artifacts/"), "{not_used:?}");
    let text = stdout(&t.al(&["config", "show"]).output().unwrap());
    assert!(text.contains("not_used.paths.output_dir = ") && text.contains("runs/<run_id>/"), "{text}");
    // The tool folders, named but not there yet, are made when a tool uses them.
    assert!(!t.exists("ws/OUTPUT") && !t.exists("ws/MEMORY"));
    let (code, v) = call(&t, "file_write", json!({"path": "OUTPUT/report.md", "content": "done\n"}));
    assert_eq!(code, Some(0), "{v}");
    assert!(t.exists("ws/SANDBOX") && t.exists("ws/MEMORY"), "file_write's folders were made");
    let (code, v) = call(&t, "file_read", json!({"path": "OUTPUT/report.md"}));
    assert_eq!((code, v["output"].as_str()), (Some(0), Some("done\n")), "{v}");
    assert!(t.exists("ws/SKILLS"), "file_read's folders were made");
    // A folder outside the workspace that is not there is named where the tool is refused.
    t.write(
        "xdg/agentloop/config.json",
        &SEED_GLOBAL.replace(r#"["./SKILLS", "./MEMORY", "./OUTPUT", "./SANDBOX"]"#, r#"["./OUTPUT"]"#),
    );
    t.write(
        "ws/agentloop.yaml",
        "tools:\n  read_paths: [../elsewhere]\n  file_read:\n    allowed_paths: [../elsewhere]\n",
    );
    let (code, v) = call(&t, "file_read", json!({"path": "../elsewhere/x.txt"}));
    assert_eq!(code, Some(6), "{v}");
    assert!(v["error"].as_str().unwrap().contains("does not exist"), "{v}");
}

#[test]
fn the_seeds_global_config_sections_are_checked_like_any_key() {
    let t = T::new();
    t.write("ws/.keep", "");
    let show = |cfg: &str| {
        t.write("xdg/agentloop/config.json", cfg);
        let out = t.al(&["config", "show", "--json"]).output().unwrap();
        (out.status.code(), stderr(&out), serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null))
    };
    // `human_escalation.enabled: false`: no phrase escalates.
    let (code, _, v) =
        show(r#"{"version": "1.0.0", "human_escalation": {"enabled": false, "triggers": ["ask the user"]}}"#);
    assert_eq!(code, Some(0));
    assert_eq!(v["config"]["escalation_triggers"], json!([]));
    // A seed key and its agentloop key set differently: both named.
    let (code, err, _) = show(r#"{"defaults": {"max_turns": 10}, "max_steps": 5}"#);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("`defaults.max_turns`") && err.contains("`max_steps`") && err.contains("hint:"), "{err}");
    // A key the section does not have is named, with the ones it has.
    let (code, err, _) = show(r#"{"paths": {"sandbox_dir": "./SANDBOX"}}"#);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("`paths.sandbox_dir`") && err.contains("`skills_dir`") && err.contains("config.json"),
        "{err}"
    );
    // Level names in any case; an unknown one names the ones there are.
    let (code, err, _) = show(r#"{"logging": {"level": "Warning"}}"#);
    assert_eq!(code, Some(0), "{err}");
    let (code, err, _) = show(r#"{"logging": {"level": "LOUD"}}"#);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("`logging.level`") && err.contains("LOUD") && err.contains("`debug`"), "{err}");
}
