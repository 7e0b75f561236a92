//! A `tools/call` result as a [`ToolResult`]: text content becomes the output; images, audio
//! and embedded resources are saved under artifacts/ and described in the output; resource
//! links are described; `structuredContent` is the output when there is no text;
//! `isError: true` is a tool error carrying the server's own message.
//!
//! The result is read as the JSON the MCP specification defines (not through the SDK's
//! types), so a content type added by a later protocol version is described, not lost.

use crate::tool::{ToolEnv, ToolResult};
use base64::Engine as _;
use serde_json::{json, Value};

pub fn to_result(env: &ToolEnv, server: &str, tool: &str, result: &Value) -> ToolResult {
    let mut parts: Vec<String> = Vec::new();
    let mut artifacts: Vec<String> = Vec::new();
    let mut saved = 0usize;
    let items = result.get("content").and_then(Value::as_array).cloned().unwrap_or_default();
    for item in &items {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "text" => parts.push(item.get("text").and_then(Value::as_str).unwrap_or("").to_string()),
            "image" | "audio" => {
                let mime = item.get("mimeType").and_then(Value::as_str).unwrap_or("application/octet-stream");
                let data = item.get("data").and_then(Value::as_str).unwrap_or("");
                parts.push(match decode(data) {
                    Some(bytes) => {
                        saved += 1;
                        match save(env, saved, mime, &bytes) {
                            Ok(rel) => {
                                let line = format!("[{kind} {mime}, {} bytes, saved to {rel}]", bytes.len());
                                artifacts.push(rel);
                                line
                            }
                            Err(e) => format!("[{kind} {mime}, {} bytes; could not save it: {e}]", bytes.len()),
                        }
                    }
                    None => format!("[{kind} {mime}: the server sent data that is not base64]"),
                });
            }
            "resource" => {
                let r = item.get("resource").cloned().unwrap_or(Value::Null);
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or("?");
                let mime = r.get("mimeType").and_then(Value::as_str);
                let (bytes, text) = match (r.get("text").and_then(Value::as_str), r.get("blob").and_then(Value::as_str))
                {
                    (Some(t), _) => (Some(t.as_bytes().to_vec()), Some(t)),
                    (None, Some(b)) => (decode(b), None),
                    (None, None) => (None, None),
                };
                let mime_s = mime.unwrap_or(if text.is_some() { "text/plain" } else { "application/octet-stream" });
                let line = match bytes {
                    Some(bytes) => {
                        saved += 1;
                        match save(env, saved, mime_s, &bytes) {
                            Ok(rel) => {
                                let l = format!("[resource {uri} ({mime_s}, {} bytes), saved to {rel}]", bytes.len());
                                artifacts.push(rel);
                                l
                            }
                            Err(e) => format!("[resource {uri} ({mime_s}); could not save it: {e}]"),
                        }
                    }
                    None => format!("[resource {uri} ({mime_s}) with no contents]"),
                };
                parts.push(line);
                if let Some(t) = text {
                    parts.push(t.to_string());
                }
            }
            "resource_link" => {
                let uri = item.get("uri").and_then(Value::as_str).unwrap_or("?");
                let name = item.get("name").and_then(Value::as_str).unwrap_or("");
                let mime = item.get("mimeType").and_then(Value::as_str).map(|m| format!(", {m}")).unwrap_or_default();
                let desc =
                    item.get("description").and_then(Value::as_str).map(|d| format!(": {d}")).unwrap_or_default();
                parts.push(format!("[resource link {uri} ({name}{mime}){desc}]"));
            }
            other => parts.push(format!("[content of type `{other}`, not shown]")),
        }
    }
    let structured = result.get("structuredContent").filter(|v| !v.is_null()).cloned();
    let mut output = parts.join("\n");
    if output.trim().is_empty() {
        if let Some(s) = &structured {
            output = serde_json::to_string_pretty(s).unwrap_or_default();
        }
    }
    let mut metadata = json!({"mcp": {"server": server, "tool": tool}});
    if let Some(s) = structured {
        metadata["structured_content"] = s;
    }
    let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let mut r = if is_error {
        let msg = if output.trim().is_empty() { "(no message)".to_string() } else { output };
        let mut r = ToolResult::err(format!("MCP server {server}: tool {tool} reported an error: {msg}"), false);
        r.metadata = metadata;
        r
    } else {
        ToolResult::ok(output, metadata)
    };
    r.artifacts = artifacts;
    r
}

fn decode(data: &str) -> Option<Vec<u8>> {
    let clean: String = data.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(clean.as_bytes()).ok()
}

fn save(env: &ToolEnv, n: usize, mime: &str, bytes: &[u8]) -> Result<String, String> {
    let rel = format!("artifacts/{}-{n}.{}", env.artifact_stem, extension(mime));
    crate::fs::write_in(env.root, camino::Utf8Path::new(&rel), bytes).map_err(|e| e.message)?;
    Ok(rel)
}

fn extension(mime: &str) -> &'static str {
    match mime.split(';').next().unwrap_or("").trim() {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/ogg" => "ogg",
        "application/json" => "json",
        "text/html" => "html",
        "text/markdown" => "md",
        "text/csv" => "csv",
        "application/pdf" => "pdf",
        m if m.starts_with("text/") => "txt",
        _ => "bin",
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use camino::Utf8PathBuf;

    fn with_env(f: impl FnOnce(&ToolEnv)) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).unwrap();
        let cfg = crate::config::Config::default();
        let skills = crate::skills::SkillSet::default();
        let env = ToolEnv { root: &root, config: &cfg, skills: &skills, artifact_stem: "step-1-s__t".into() };
        f(&env);
        dir
    }

    #[test]
    fn text_image_resource_and_error() {
        let dir = with_env(|env| {
            let r = to_result(
                env,
                "s",
                "t",
                &json!({"content": [
                    {"type": "text", "text": "hello"},
                    {"type": "image", "mimeType": "image/png", "data": "aGk="},
                    {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "inside"}},
                    {"type": "resource_link", "uri": "file:///b", "name": "b"},
                    {"type": "hologram"}
                ]}),
            );
            assert!(r.is_ok());
            assert!(
                r.output.starts_with("hello\n[image image/png, 2 bytes, saved to artifacts/step-1-s__t-1.png]"),
                "{}",
                r.output
            );
            assert!(r.output.contains("saved to artifacts/step-1-s__t-2.txt]\ninside"), "{}", r.output);
            assert!(r.output.contains("[resource link file:///b (b)]") && r.output.contains("`hologram`"));
            assert_eq!(r.artifacts, ["artifacts/step-1-s__t-1.png", "artifacts/step-1-s__t-2.txt"]);
            let e = to_result(
                env,
                "s",
                "t",
                &json!({"content": [{"type": "text", "text": "no such city"}], "isError": true}),
            );
            assert!(!e.is_ok());
            assert_eq!(e.error.as_deref(), Some("MCP server s: tool t reported an error: no such city"));
            let s = to_result(env, "s", "t", &json!({"content": [], "structuredContent": {"a": 1}}));
            assert_eq!(s.output, "{\n  \"a\": 1\n}");
            assert_eq!(s.metadata["structured_content"]["a"], 1);
        });
        assert_eq!(std::fs::read(dir.path().join("artifacts/step-1-s__t-1.png")).unwrap(), b"hi");
    }
}
