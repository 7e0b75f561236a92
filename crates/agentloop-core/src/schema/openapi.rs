//! The OpenAPI 3.1 document of `serve` (GET /openapi.json, and docs/schema/openapi.json): the
//! routes of `serve`'s API, with the bodies that have Rust types given by their generated
//! schemas. A test holds the committed file to this.

use super::{CompletionEvent, RunResult, RunRow, VERSION};
use schemars::JsonSchema;
use serde_json::{json, Map, Value};

/// The schemas of the typed bodies, as OpenAPI components (their definitions lifted beside them).
fn components() -> Value {
    let mut out = Map::new();
    let mut add = |name: &str, mut v: Value| {
        // The generator puts the definitions at the path its refs name, `components.schemas`.
        if let Some(defs) = v.as_object_mut().and_then(|o| o.remove("components")) {
            for (k, d) in defs["schemas"].as_object().cloned().unwrap_or_default() {
                out.insert(k, d);
            }
        }
        if let Some(o) = v.as_object_mut() {
            o.remove("$schema");
        }
        out.insert(name.to_string(), v);
    };
    fn gen<T: JsonSchema>() -> Value {
        // OpenAPI 3.1's dialect is JSON Schema 2020-12; definitions live among the components.
        let s = schemars::generate::SchemaSettings::draft2020_12()
            .with(|d| d.definitions_path = "#/components/schemas/".into());
        s.into_generator().into_root_schema_for::<T>().to_value()
    }
    add("RunResult", gen::<RunResult>());
    add("CompletionEvent", gen::<CompletionEvent>());
    add("RunRow", gen::<RunRow>());
    add("State", gen::<crate::workspace::State>());
    add("TraceEntry", gen::<crate::trace::Entry>());
    out.insert(
        "Error".into(),
        json!({"type": "object", "required": ["error", "status"], "properties": {
            "error": {"type": "string"}, "status": {"type": "integer"}, "hint": {"type": "string"}}}),
    );
    out.insert(
        "StartRun".into(),
        json!({"type": "object", "required": ["goal"], "additionalProperties": false, "properties": {
            "goal": {"type": "string", "minLength": 1},
            "context": {"description": "Background: text, or any JSON (shown pretty-printed)"},
            "agent": {"type": "string", "description": "A profile in the root's agents/"},
            "budgets": {"type": "object", "additionalProperties": false, "description": "Only narrower than the server's limits",
                "properties": {"max_steps": {"type": "integer"}, "max_reframes": {"type": "integer"}, "timeout": {"type": ["string", "integer"]},
                    "max_tokens": {"type": "integer"}, "max_cost_usd": {"type": "number"}}},
            "force": {"type": "boolean", "description": "Start even when the estimate says it cannot fit its budget"},
            "output_schema": {"type": "object", "description": "The JSON Schema the final output must match"}}}),
    );
    Value::Object(out)
}

fn reply(description: &str, schema: Value) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": schema}}})
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// The whole document.
/// What every POST body is read as (the server's one rule; see `serve::http::body`).
const JSON_ANY_TYPE: &str = "A JSON object, read as JSON whatever the Content-Type says (`curl -d '{...}'` sends application/x-www-form-urlencoded)";
const JSON_OR_FORM: &str = "A JSON object, read as JSON whatever the Content-Type says (`curl -d '{...}'` sends application/x-www-form-urlencoded); a form-encoded body that is not a JSON object is the panel's form, which needs its `csrf` value with the sign-in cookie";

pub fn openapi() -> Value {
    let err = || reply("An error: what went wrong and, when there is one, the fix", reference("Error"));
    let id = json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}]);
    let run_body = json!({"type": "object", "description": "As `status --json` shows it, with `served`, `queue`, `worker_error` and `links`"});
    let queued = reply(
        "Queued",
        json!({"type": "object", "required": ["run_id"], "properties": {"run_id": {"type": "string"}, "status": {"type": "string"},
            "queue": {"type": ["object", "null"]}, "links": {"type": "object"}}}),
    );
    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "agentloop serve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Start, follow and answer agentloop runs over HTTP (docs/HTTP-API.md).",
            "x-schema-version": VERSION,
        },
        "components": {
            "schemas": components(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": {
            "/health": {"get": {"summary": "Liveness; no token needed", "security": [],
                "responses": {"200": reply("Healthy", json!({"type": "object", "properties": {"status": {"const": "healthy"}, "version": {"type": "string"}}}))}}},
            "/openapi.json": {"get": {"summary": "This document; no token needed", "security": [],
                "responses": {"200": reply("The OpenAPI document", json!({"type": "object"}))}}},
            "/runs": {
                "get": {"summary": "Every run, as `runs --json` shows them, with `served`, `queue` and `links`",
                    "parameters": [{"name": "agent", "in": "query", "required": false, "schema": {"type": "string"},
                        "description": "Only the runs of this agent profile"}],
                    "responses": {"200": reply("The runs", json!({"type": "object", "properties": {"runs": {"type": "array", "items": reference("RunRow")}}})), "401": err()}},
                "post": {"summary": "Start a run",
                    "requestBody": {"required": true, "description": JSON_ANY_TYPE, "content": {"application/json": {"schema": reference("StartRun")}}},
                    "responses": {"202": queued.clone(), "400": err(), "401": err(), "422": err(), "429": err(), "503": err()}},
            },
            "/runs/{id}": {"get": {"summary": "The run's status", "parameters": id,
                "responses": {"200": reply("The status", run_body), "404": err()}}},
            "/runs/{id}/trace": {"get": {"summary": "trace.jsonl (`?follow=1`: server-sent events)", "parameters": id,
                "responses": {"200": {"description": "One trace entry a line", "content": {
                    "application/x-ndjson": {"schema": reference("TraceEntry")},
                    "text/event-stream": {"schema": {"type": "string"}}}}, "404": err()}}},
            "/runs/{id}/answer": {"post": {"summary": "Answer an escalated run's open question", "parameters": id,
                "requestBody": {"required": true, "description": JSON_OR_FORM, "content": {
                    "application/json": {"schema": {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}}},
                    "application/x-www-form-urlencoded": {"schema": {"type": "object", "required": ["answer"],
                        "properties": {"answer": {"type": "string"}, "csrf": {"type": "string", "description": "The form value of the run's page; required with the sign-in cookie"}}}}}},
                "responses": {"202": queued.clone(), "303": {"description": "A form: back to the run's page"}, "403": err(), "404": err(), "409": err()}}},
            "/runs/{id}/continue": {"post": {"summary": "Go on after a budget or provider stop, or an interruption", "parameters": id,
                "requestBody": {"required": false, "description": JSON_OR_FORM, "content": {
                    "application/json": {"schema": {"type": "object", "additionalProperties": false, "properties": {"budgets": {"type": "object", "additionalProperties": false,
                        "description": "Up to the server's limits", "properties": {"max_steps": {"type": "integer"}, "max_reframes": {"type": "integer"},
                        "timeout": {"type": ["string", "integer"]}, "max_tokens": {"type": "integer"}, "max_cost_usd": {"type": "number"}}}}}},
                    "application/x-www-form-urlencoded": {"schema": {"type": "object", "properties": {
                        "csrf": {"type": "string"}, "max_steps": {"type": "string"}, "max_reframes": {"type": "string"},
                        "timeout": {"type": "string"}, "max_tokens": {"type": "string"}, "max_cost_usd": {"type": "string"}}}}}},
                "responses": {"202": queued, "303": {"description": "A form: back to the run's page"}, "400": err(), "403": err(), "404": err(), "409": err()}}},
            "/runs/{id}/report": {"get": {"summary": "The run's HTML report", "parameters": id,
                "responses": {"200": {"description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}}}}},
            "/runs/{id}/files/{path}": {"get": {"summary": "A file of the run (artifacts/..., result.json, state.json, ...) as text",
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
                    {"name": "path", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "The file; result.json follows RunResult, state.json State", "content": {"text/plain": {"schema": {"type": "string"}}}}, "404": err()}}},
            "/skills": {"get": {"summary": "The skills every run sees", "responses": {"200": reply("Skills", json!({"type": "object"}))}}},
            "/skills/fetch": {"post": {"summary": "Fetch a skill into the root's skills/",
                "requestBody": {"required": true, "description": JSON_ANY_TYPE, "content": {"application/json": {"schema": {"type": "object", "required": ["id", "url"], "properties": {"id": {"type": "string"}, "url": {"type": "string"}}}}}},
                "responses": {"201": reply("Fetched", json!({"type": "object"})), "400": err()}}},
            "/agents": {"get": {"summary": "The agent profiles", "responses": {"200": reply("Profiles", json!({"type": "object"}))}}},
            "/agents/{name}/status": {"get": {"summary": "One agent: its profile, its runs by status, the one going on, the last one, its usage window",
                "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {"200": reply("The agent's status", json!({"type": "object", "required": ["agent", "runs"], "properties": {
                    "agent": {"type": "string"}, "profile": {"type": ["object", "null"]},
                    "runs": {"type": "object", "properties": {"total": {"type": "integer"}, "by_status": {"type": "object", "additionalProperties": {"type": "integer"}}}},
                    "running": {"type": "array", "items": {"type": "string"}}, "last_run": {"anyOf": [reference("RunRow"), {"type": "null"}]},
                    "rest": {"type": ["object", "null"]}, "links": {"type": "object"}}})), "404": err()}}},
        },
    })
}
