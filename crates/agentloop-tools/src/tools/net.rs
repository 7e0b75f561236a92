//! http_call and web_fetch: the tools over the policed client in [`super::fetch`] (its policy
//! is described there) and the per-user cache in [`super::http_cache`].

use super::fetch::fetch;
use super::tool::{args_schema, Call, Tool, Whole};
use super::{SideEffect, ToolEnv, ToolResult};
use agentloop_config::config::Config;
use camino::Utf8Path;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// http_call: one HTTP request to an API.
pub struct HttpCall;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpCallArgs {
    // The HTTP method (the enum says it: no description).
    method: Method,
    // A full http(s) URL (the name says it: no description).
    #[schemars(length(min = 1))]
    url: String,
    // Request headers (the name says it: no description).
    // A JSON object keeps the order the model wrote the headers in.
    #[schemars(with = "Option<std::collections::BTreeMap<String, String>>")]
    headers: Option<Map<String, Value>>,
    /// POST, PUT, PATCH
    body: Option<String>,
    // Described by `HttpCall::schema`: the text names the configured tools.timeout.
    #[schemars(range(min = 1, max = 600))]
    timeout_seconds: Option<Whole>,
}

// Variants carry no doc comments: those would make the schema a oneOf instead of an enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
    Head,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
            Method::Head => "HEAD",
        }
    }
}

impl Tool for HttpCall {
    const NAME: &'static str = "http_call";
    const SIDE_EFFECT: SideEffect = SideEffect::Network;
    type Args = HttpCallArgs;
    fn description(_: &Config, _: &Utf8Path) -> String {
        "Make an HTTP request to an API endpoint; returns status, headers and a capped body.".into()
    }
    fn schema(cfg: &Config) -> Value {
        let mut v = args_schema::<HttpCallArgs>();
        // The whole call, redirects included, capped at tools.timeout.
        let cap = humantime::format_duration(cfg.tools.timeout_of("http_call"));
        let key = if cfg.tools.http_call.timeout_seconds.is_some() {
            "tools.http_call.timeout_seconds"
        } else {
            "tools.timeout"
        };
        v["properties"]["timeout_seconds"]["description"] =
            Value::String(format!("Whole call, redirects included; at most {key} ({cap}), the default"));
        v
    }
    fn run(call: &Call, args: HttpCallArgs) -> ToolResult {
        http_call(call.env, &args)
    }
}

fn http_call(env: &ToolEnv, args: &HttpCallArgs) -> ToolResult {
    let p = &env.config.tools.http;
    let (method, url) = (args.method.as_str(), args.url.as_str());
    let headers: Vec<(String, String)> =
        args.headers.iter().flatten().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect();
    // A call may shorten its timeout, never lengthen it past tools.timeout.
    let cap = env.config.tools.timeout_of("http_call");
    let asked = args.timeout_seconds.map(|s| Duration::from_secs(s.get()));
    let timeout = asked.map_or(cap, |a| a.min(cap));
    // A GET goes through the per-user HTTP cache (a request with credentials bypasses it).
    let got = match args.method {
        Method::Get => super::http_cache::get(p, url, &headers, timeout),
        _ => fetch(p, method, url, &headers, args.body.as_deref(), timeout).map(|f| (f, None)),
    };
    match got {
        Err(f) => match asked {
            Some(a) if a > cap && f.timed_out => ToolResult::err(
                format!(
                    "{}; stopped at {} ({}), which caps timeout_seconds ({})",
                    f.message,
                    if env.config.tools.http_call.timeout_seconds.is_some() {
                        "tools.http_call.timeout_seconds"
                    } else {
                        "tools.timeout"
                    },
                    humantime::format_duration(cap),
                    a.as_secs()
                ),
                f.retry,
            ),
            _ => ToolResult::err(f.message, f.retry),
        },
        Ok((f, hit)) => {
            let body = String::from_utf8_lossy(&f.body).into_owned();
            let mut out =
                json!({"status": f.status, "url": f.url, "headers": f.headers, "body": body, "truncated": f.truncated});
            let mut meta = json!({"status_code": f.status, "url": f.url});
            // An answer from the cache says so, and how old it is.
            if let Some(h) = &hit {
                out["cache"] = json!(h.note());
                meta["http_cache"] = h.to_value();
            }
            let text = serde_json::to_string_pretty(&out).unwrap_or_default();
            if f.status >= 400 {
                let mut r =
                    ToolResult::err(format!("HTTP {} from {}", f.status, f.url), f.status == 429 || f.status >= 500);
                r.output = text;
                r.metadata = meta;
                r
            } else {
                ToolResult::ok(text, meta)
            }
        }
    }
}

/// web_fetch: a page's main content as markdown, text or HTML.
pub struct WebFetch;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebFetchArgs {
    // The page's http(s) URL (the name says it: no description).
    #[schemars(length(min = 1))]
    url: String,
    // The form of the text kept (the enum says it: no description).
    #[schemars(extend("default" = "markdown"))]
    extract_mode: Option<ExtractMode>,
    /// Most characters kept
    #[schemars(range(min = 1), extend("default" = 15000))]
    max_length: Option<Whole>,
}

// Variants carry no doc comments: those would make the schema a oneOf instead of an enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExtractMode {
    Markdown,
    Text,
    Html,
}

impl Tool for WebFetch {
    const NAME: &'static str = "web_fetch";
    const SIDE_EFFECT: SideEffect = SideEffect::Network;
    type Args = WebFetchArgs;
    fn description(_: &Config, _: &Utf8Path) -> String {
        "Fetch a web page and extract its main content as markdown (default), plain text or raw HTML.".into()
    }
    fn schema(cfg: &Config) -> Value {
        let mut v = args_schema::<WebFetchArgs>();
        if let Some(n) = cfg.tools.web_fetch.max_length {
            let p = &mut v["properties"]["max_length"];
            p["description"] = Value::String(format!(
                "Most characters of the page to keep (default and at most {n}, tools.web_fetch.max_length)"
            ));
            p["default"] = json!(n);
        }
        v
    }
    fn run(call: &Call, args: WebFetchArgs) -> ToolResult {
        web_fetch(call.env, &args)
    }
}

fn web_fetch(env: &ToolEnv, args: &WebFetchArgs) -> ToolResult {
    let p = &env.config.tools.http;
    let url = args.url.as_str();
    let mode = args.extract_mode.unwrap_or(ExtractMode::Markdown);
    // tools.web_fetch.max_length is the default and the most a call may ask for.
    let cap = env.config.tools.web_fetch.max_length;
    let asked = usize::try_from(args.max_length.map_or(cap.unwrap_or(15_000) as u64, Whole::get)).unwrap_or(usize::MAX);
    let max = cap.map_or(asked, |c| asked.min(c));
    let headers =
        vec![("accept".to_string(), "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5".to_string())];
    let (f, hit) = match super::http_cache::get(p, url, &headers, env.config.tools.timeout_of("web_fetch")) {
        Err(f) => return ToolResult::err(f.message, f.retry),
        Ok(got) => got,
    };
    if f.status >= 400 {
        return ToolResult::err(format!("HTTP {} from {}", f.status, f.url), f.status == 429 || f.status >= 500);
    }
    let ctype = f.headers.get("content-type").and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
    let raw = String::from_utf8_lossy(&f.body).into_owned();
    let is_html = ctype.contains("html") || (ctype.is_empty() && raw.trim_start().starts_with('<'));
    let title = if is_html { super::html::title(&raw) } else { None };
    let content = match (mode, is_html) {
        (ExtractMode::Html, _) | (_, false) => raw,
        (ExtractMode::Text, true) => super::html::to_text(&raw),
        (ExtractMode::Markdown, true) => super::html::to_markdown(&raw),
    };
    let total = content.chars().count();
    let mut content: String = content.chars().take(max).collect();
    // Say what was left out: the model cannot tell a short page from a cut one.
    if total > max && max < asked {
        content.push_str(&format!(
            "\n\n[page cut at {max} of {total} characters: tools.web_fetch.max_length ({max}) caps max_length]"
        ));
    } else if total > max {
        content.push_str(&format!(
            "\n\n[page cut at {max} of {total} characters (max_length); fetch again with a larger max_length for the rest]"
        ));
    } else if f.truncated {
        content.push_str(&format!(
            "\n\n[the response was cut at tools.http.max_bytes ({} bytes); the page goes on]",
            p.max_bytes
        ));
    }
    let mut meta = json!({"url": f.url, "status_code": f.status, "content_type": ctype, "title": title, "length": total, "truncated": total > max || f.truncated});
    // An answer from the cache says so, and how old it is.
    if let Some(h) = &hit {
        content.push_str(&format!("\n\n{}", h.note()));
        meta["http_cache"] = h.to_value();
    }
    ToolResult::ok(content, meta)
}
