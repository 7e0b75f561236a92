//! The served pages: the index of runs (the panel), a run's report, and a run's files.

use super::api::Out;
use super::http::{ApiError, ApiResult, Reply};
use super::queue::Place;
use super::{runs, Shared};
use crate::fs::sys;
use crate::report::{self, Links};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};

/// GET / — the index of runs (the admin panel).
pub(super) fn index(shared: &Shared) -> Reply {
    let root = crate::workspace::Workspace::new(shared.root.clone());
    let runs = crate::history::list(&root, &shared.runs_dir, &|m| shared.printer.warn(m));
    let rows: Vec<report::Row> = runs
        .iter()
        .filter(|r| !runs::is_link(&r.ws.root))
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
    runs::existing(shared, id)?;
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
    let f = open_in_run(shared, id, rest).map_err(|e| refused(id, &rest.join("/"), &e).unwrap_or_else(not_found))?;
    let name = rest.last().copied().unwrap_or_default();
    let ctype = match name.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase()).as_deref() {
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        _ => "text/plain; charset=utf-8",
    };
    Ok(Out::File(f, ctype))
}

/// Opens `rest` (plain names) in the folder of run `id` (`runs/<id>/`, or the root for the
/// root's own run), one name at a time through folder handles, following no symbolic link on
/// the way — the run folder included — so a link put there, before or after any check, cannot
/// lead out. Only a regular file is opened (without blocking on a FIFO); anything else is `ENXIO`.
pub(super) fn open_in_run(shared: &Shared, id: &str, rest: &[&str]) -> std::io::Result<std::fs::File> {
    let folder = shared.root.join(&shared.runs_dir).join(id);
    let mut dir = if std::fs::symlink_metadata(&folder).is_err() && runs::is_current(shared, id) {
        Dir::open_ambient_dir(&shared.root, cap_std::ambient_authority())?
    } else {
        let runs = Dir::open_ambient_dir(shared.root.join(&shared.runs_dir), cap_std::ambient_authority())?;
        open_dir_nofollow(&runs, id)?
    };
    let Some((name, folders)) = rest.split_last() else { return Err(std::io::Error::from_raw_os_error(sys::ENOENT)) };
    for folder in folders {
        dir = open_dir_nofollow(&dir, folder)?;
    }
    let mut o = OpenOptions::new();
    o.read(true).custom_flags(sys::O_NOFOLLOW | sys::O_NONBLOCK);
    let f = dir.open_with(name, &o)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::from_raw_os_error(sys::ENXIO));
    }
    Ok(f.into_std())
}

/// The reply for a run's file that exists but is not served (a symbolic link, not a regular
/// file); None when it is simply missing.
pub(super) fn refused(id: &str, shown: &str, e: &std::io::Error) -> Option<ApiError> {
    matches!(e.raw_os_error(), Some(sys::ELOOP | sys::ENOTDIR | sys::ENXIO)).then(|| {
        ApiError::new(403, format!("run {id}: {shown} is not served: it is a symbolic link or not a regular file"))
            .hint("a run's files are served only as regular files inside its folder")
    })
}

/// The folder `name` right inside `dir`, refused (`ELOOP`, `ENOTDIR`) if it is a symbolic link.
fn open_dir_nofollow(dir: &Dir, name: &str) -> std::io::Result<Dir> {
    let mut o = OpenOptions::new();
    o.read(true).custom_flags(sys::O_NOFOLLOW | sys::O_DIRECTORY);
    Ok(Dir::from_std_file(dir.open_with(name, &o)?.into_std()))
}
