//! The served pages: the index of runs (the panel), a run's report, and a run's files.

use super::api::Out;
use super::http::{ApiError, ApiResult, Reply};
use super::queue::Place;
use super::{runs, Shared};
use crate::report::{self, Links};

/// GET / — the index of runs (the admin panel).
pub(super) fn index(shared: &Shared) -> Reply {
    let root = crate::workspace::Workspace::new(shared.root.clone());
    let runs = crate::history::list(&root, &shared.runs_dir, &|m| shared.printer.warn(m));
    let rows: Vec<report::Row> = runs
        .iter()
        .filter(|r| !r.current)
        .map(|r| {
            let id = &r.state.run_id;
            let mut row =
                crate::commands::report::row(r, &format!("/runs/{}/report", report::html::encode_segment(id)));
            row.note = match shared.queue.place(id) {
                Some(Place::Waiting(n)) => Some(format!("waiting, {n} in line")),
                Some(Place::Running) => Some("running now".into()),
                None => None,
            };
            row
        })
        .collect();
    let live = rows.iter().any(|r| r.status == "running");
    let title = shared.root.file_name().unwrap_or(shared.root.as_str()).to_string();
    Reply::html(report::render_index(&title, &rows, live.then_some(5)))
}

/// GET /runs/{id}/report
pub(super) fn report(shared: &Shared, id: &str) -> ApiResult {
    let ws = runs::existing(shared, id)?;
    let run = report::Run::load(&ws)?;
    let links = Links { files: format!("/runs/{id}/files/"), index: Some("/".into()), refresh: Some(5) };
    Ok(Reply::html(report::render(&run, &links)))
}

/// GET /runs/{id}/files/... — a run's artifacts and paper-trail files, as text (never as a page
/// of the server's origin: a run's file could hold script).
pub(super) fn file(shared: &Shared, id: &str, rest: &[&str]) -> ApiResult<Out> {
    let ws = runs::existing(shared, id)?;
    let not_found = || ApiError::new(404, format!("run {id} has no such file"));
    let plain = |s: &&str| !s.is_empty() && !s.starts_with('.') && !s.contains(['/', '\\', '\0']);
    let paper = ["context.md", "memory.md", "plan.md", "decisions.md", "trace.jsonl", "state.json", "result.json"];
    let ok = match rest {
        [one] => paper.contains(one),
        ["artifacts", more @ ..] => !more.is_empty() && more.iter().all(plain),
        _ => false,
    };
    if !ok {
        return Err(not_found());
    }
    let path = ws.root.join(rest.join("/"));
    let (Ok(real), Ok(base)) = (path.canonicalize_utf8(), ws.root.canonicalize_utf8()) else {
        return Err(not_found());
    };
    if !real.starts_with(&base) || !real.is_file() {
        return Err(not_found());
    }
    let f = std::fs::File::open(&real).map_err(|_| not_found())?;
    let ctype = match real.extension().map(str::to_ascii_lowercase).as_deref() {
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        _ => "text/plain; charset=utf-8",
    };
    Ok(Out::File(f, ctype))
}
