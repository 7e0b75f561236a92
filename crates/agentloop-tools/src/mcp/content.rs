//! A `tools/call` result as a [`ToolResult`]: text content becomes the output; images, audio
//! and embedded resources are saved under artifacts/ and described in the output; resource
//! links are described; `structuredContent` is the output when there is no text;
//! `isError: true` is a tool error carrying the server's own message.
//!
//! The result is read as the JSON the MCP specification defines (not through the SDK's
//! types), so a content type added by a later protocol version is described, not lost.
//!
//! One call is bounded, whatever the server sends: at most [`MAX_ITEMS`] content items are read
//! (the rest are counted), at most [`MAX_FILES`] files are saved, and text, saved files and
//! structured content together hold at most [`MAX_BYTES`]; what is left out is said in the
//! output. (The SDK already refuses a single message over 16 MiB.)

use crate::tool_env::ToolEnv;
use agentloop_types::tool_spec::ToolResult;
use base64::Engine as _;
use serde_json::{json, Value};

/// Content items one call's result may have; the rest are counted, not read.
pub const MAX_ITEMS: usize = 100;
/// Files (images, audio, embedded resources) one call may save under artifacts/.
pub const MAX_FILES: usize = 10;
/// Bytes of text, saved files and structured content one call may hold (8 MiB).
pub const MAX_BYTES: usize = 8 << 20;

/// What one call has taken so far, against the caps.
#[derive(Default)]
struct Budget {
    bytes: usize,
    files: usize,
}

impl Budget {
    fn left(&self) -> usize {
        MAX_BYTES.saturating_sub(self.bytes)
    }

    /// Text within what is left: all of it, or its head (cut at a character boundary) and a note
    /// of what was left out.
    fn text(&mut self, t: &str) -> String {
        let left = self.left();
        if t.len() <= left {
            self.bytes += t.len();
            return t.to_string();
        }
        let mut cut = left;
        while !t.is_char_boundary(cut) {
            cut -= 1;
        }
        self.bytes += cut;
        let mut head = t[..cut].to_string();
        if !head.is_empty() {
            head.push('\n');
        }
        head.push_str(&format!(
            "[{} more bytes of text left out: one call may hold {} MiB]",
            t.len() - cut,
            MAX_BYTES >> 20
        ));
        head
    }

    /// Why a file of `len` bytes cannot be saved, or None when it can (and is now counted).
    fn file(&mut self, len: usize) -> Option<String> {
        if self.files >= MAX_FILES {
            return Some(format!("not saved: one call may save {MAX_FILES} files"));
        }
        if len > self.left() {
            return Some(format!("not saved: one call may hold {} MiB", MAX_BYTES >> 20));
        }
        self.files += 1;
        self.bytes += len;
        None
    }
}

/// One `tools/call` result as the tool's [`ToolResult`], read within the call's caps.
pub fn to_result(env: &ToolEnv, server: &str, tool: &str, result: &Value) -> ToolResult {
    let mut d = Described { env, budget: Budget::default(), parts: Vec::new(), artifacts: Vec::new() };
    let items = result.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for item in items.iter().take(MAX_ITEMS) {
        d.item(item);
    }
    if items.len() > MAX_ITEMS {
        d.parts.push(format!(
            "[{} more content items left out: one call may return {MAX_ITEMS}]",
            items.len() - MAX_ITEMS
        ));
    }
    let structured = d.structured(result);
    let mut output = d.parts.join("\n");
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
    r.artifacts = d.artifacts;
    r
}

/// One call's content items as they are read: the lines of output so far, the files saved
/// under artifacts/, and what the call has taken of its caps.
struct Described<'a> {
    env: &'a ToolEnv<'a>,
    budget: Budget,
    parts: Vec<String>,
    artifacts: Vec<String>,
}

impl Described<'_> {
    /// Describes one content item by its type; one of a type this version does not know is
    /// named, not lost.
    fn item(&mut self, item: &Value) {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "text" => self.parts.push(self.budget.text(item.get("text").and_then(Value::as_str).unwrap_or(""))),
            "image" | "audio" => self.media(kind, item),
            "resource" => self.resource(item.get("resource").unwrap_or(&Value::Null)),
            "resource_link" => {
                let uri = item.get("uri").and_then(Value::as_str).unwrap_or("?");
                let name = item.get("name").and_then(Value::as_str).unwrap_or("");
                let mime = item.get("mimeType").and_then(Value::as_str).map(|m| format!(", {m}")).unwrap_or_default();
                let desc =
                    item.get("description").and_then(Value::as_str).map(|d| format!(": {d}")).unwrap_or_default();
                self.parts.push(self.budget.text(&format!("[resource link {uri} ({name}{mime}){desc}]")));
            }
            other => self.parts.push(self.budget.text(&format!("[content of type `{other}`, not shown]"))),
        }
    }

    /// An image or audio item (`kind`): its base64 data decoded and saved, when the caps allow.
    fn media(&mut self, kind: &str, item: &Value) {
        let mime = item.get("mimeType").and_then(Value::as_str).unwrap_or("application/octet-stream");
        let data = item.get("data").and_then(Value::as_str).unwrap_or("");
        // Refused before decoding: base64 is 4 characters for 3 bytes.
        if let Some(why) = self.budget.file(data.len() / 4 * 3) {
            self.parts.push(format!("[{kind} {mime}, about {} bytes, {why}]", data.len() / 4 * 3));
            return;
        }
        let line = match decode(data) {
            Some(bytes) => match save(self.env, self.budget.files, mime, &bytes) {
                Ok(rel) => {
                    let line = format!("[{kind} {mime}, {} bytes, saved to {rel}]", bytes.len());
                    self.artifacts.push(rel);
                    line
                }
                Err(e) => format!("[{kind} {mime}, {} bytes; could not save it: {e}]", bytes.len()),
            },
            None => format!("[{kind} {mime}: the server sent data that is not base64]"),
        };
        self.parts.push(line);
    }

    /// An embedded resource `r`: its text or blob saved when the caps allow, and its text shown
    /// as well.
    fn resource(&mut self, r: &Value) {
        let uri = r.get("uri").and_then(Value::as_str).unwrap_or("?");
        let mime = r.get("mimeType").and_then(Value::as_str);
        let text = r.get("text").and_then(Value::as_str);
        let blob = r.get("blob").and_then(Value::as_str);
        let mime_s = mime.unwrap_or(if text.is_some() { "text/plain" } else { "application/octet-stream" });
        let size = match (text, blob) {
            (Some(t), _) => Some(t.len()),
            (None, Some(b)) => Some(b.len() / 4 * 3),
            (None, None) => None,
        };
        let why = size.and_then(|n| self.budget.file(n));
        let bytes = match (why.is_some(), text, blob) {
            (true, _, _) => None,
            (false, Some(t), _) => Some(t.as_bytes().to_vec()),
            (false, None, Some(b)) => decode(b),
            (false, None, None) => None,
        };
        let line = match (bytes, why) {
            (_, Some(why)) => format!("[resource {uri} ({mime_s}, about {} bytes), {why}]", size.unwrap_or(0)),
            (Some(bytes), None) => match save(self.env, self.budget.files, mime_s, &bytes) {
                Ok(rel) => {
                    let l = format!("[resource {uri} ({mime_s}, {} bytes), saved to {rel}]", bytes.len());
                    self.artifacts.push(rel);
                    l
                }
                Err(e) => format!("[resource {uri} ({mime_s}); could not save it: {e}]"),
            },
            (None, None) => format!("[resource {uri} ({mime_s}) with no contents]"),
        };
        self.parts.push(line);
        if let Some(t) = text {
            self.parts.push(self.budget.text(t));
        }
    }

    /// The result's `structuredContent`, kept only within what is left of the byte cap (said
    /// when it is left out).
    fn structured(&mut self, result: &Value) -> Option<Value> {
        let s = result.get("structuredContent").filter(|v| !v.is_null()).cloned()?;
        let size = serde_json::to_string(&s).map(|t| t.len()).unwrap_or(0);
        if size > self.budget.left() {
            self.parts.push(format!(
                "[structuredContent of {size} bytes left out: one call may hold {} MiB]",
                MAX_BYTES >> 20
            ));
            return None;
        }
        Some(s)
    }
}

fn decode(data: &str) -> Option<Vec<u8>> {
    let clean: String = data.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(clean.as_bytes()).ok()
}

/// Keeps one decoded item as an artifact; its workspace-relative path.
fn save(env: &ToolEnv, n: usize, mime: &str, bytes: &[u8]) -> agentloop_types::error::Result<String> {
    let rel = format!("artifacts/{}-{n}.{}", env.artifact_stem, extension(mime));
    agentloop_io::fs::write_in(env.root, camino::Utf8Path::new(&rel), bytes)?;
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
        let cfg = agentloop_config::config::Config::default();
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

    #[test]
    fn one_call_is_capped_in_items_files_and_bytes() {
        let dir = with_env(|env| {
            let image = json!({"type": "image", "mimeType": "image/png", "data": "aGk="});
            let mut content = vec![image; 150];
            content.insert(0, json!({"type": "text", "text": "x".repeat(MAX_BYTES + 10)}));
            let r = to_result(env, "s", "t", &json!({"content": content, "structuredContent": {"a": 1}}));
            assert!(r.is_ok());
            assert!(r.output.starts_with(&"x".repeat(100)), "{}", &r.output[..100]);
            assert!(r.output.contains("\n[10 more bytes of text left out: one call may hold 8 MiB]\n"));
            // The text took the whole budget: no file fits, and no structured content.
            assert_eq!(r.output.matches("not saved: one call may hold 8 MiB]").count(), 99);
            assert!(r.output.ends_with(
                "[51 more content items left out: one call may return 100]\n[structuredContent of 7 bytes left out: one call may hold 8 MiB]"
            ));
            assert!(r.artifacts.is_empty() && r.metadata.get("structured_content").is_none());
            let content = vec![json!({"type": "image", "mimeType": "image/png", "data": "aGk="}); 12];
            let r = to_result(env, "s", "t", &json!({"content": content}));
            assert_eq!(r.artifacts.len(), MAX_FILES);
            assert_eq!(r.output.matches("not saved: one call may save 10 files]").count(), 2);
        });
        assert!(dir.path().join("artifacts/step-1-s__t-10.png").exists());
        assert!(!dir.path().join("artifacts/step-1-s__t-11.png").exists());
    }
}
