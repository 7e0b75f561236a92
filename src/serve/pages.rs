//! The served pages: the index of runs (the panel), a run's report, and a run's files.

use super::forms::{Form, Sent};
use super::http::{ApiError, ApiResult, Out, Reply};
use super::queue::Place;
use super::{runs, Shared};
use agentloop_engine::report::{self, Links};
use agentloop_io::fs::sys;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use std::collections::BTreeMap;

/// GET / — the index of runs (the admin panel).
pub(super) fn index(shared: &Shared) -> Reply {
    let root = agentloop_workspace::workspace::Workspace::new(shared.root.clone());
    let runs = agentloop_workspace::history::list(&root, &shared.runs_dir, &|m| shared.printer.warn(m));
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
    // The form has a page of its own: this one reloads itself while runs go on, which would
    // wipe a goal being typed.
    let start = "<p class=\"actions\" id=\"start\"><a href=\"/start\">Start a run</a></p>";
    Reply::html(report::render_index_with(&title, &rows, live.then_some(5), Some(start)))
}

/// GET /start — the form that starts a run (it posts to POST /runs, as API clients do).
pub(super) fn start(shared: &Shared) -> Reply {
    start_with(shared, None, &Default::default())
}

/// The start page; after a refused post, with `refused` (the box saying why) above the form and
/// what was `typed` filled in again.
pub(super) fn start_with(shared: &Shared, refused: Option<&str>, typed: &BTreeMap<String, String>) -> Reply {
    use agentloop_engine::report::html;
    let title = shared.root.file_name().unwrap_or(shared.root.as_str()).to_string();
    let mut page = html::head_with(&format!("Start a run · {title}"), None, html::CSP_FORMS);
    page.push_str(&format!("<p><a href=\"/\">All runs</a></p><h1>Start a run in {}</h1>", html::esc(&title)));
    page.push_str(refused.unwrap_or_default());
    page.push_str(&super::forms::start_form(shared.auth.csrf(), typed));
    page.push_str("</main></body></html>\n");
    Reply::html_with(page, html::CSP_FORMS)
}

/// A form's request answered: a refusal of a browser's form ([`Sent::page`]) as the form's own
/// page — the run's page for the answer and continue forms (`run`), the start page for the start
/// form — under the refusal's status, with the error and its fix in a box above the form and
/// what was typed filled in again; anything else as it is.
pub(super) fn answered(shared: &Shared, sent: &Sent, form: Form, run: Option<&str>, r: ApiResult) -> ApiResult {
    let e = match r {
        Err(e) if sent.page => e,
        r => return r,
    };
    use agentloop_engine::report::html;
    let note = super::forms::refusal(form, &e);
    let page = match run {
        Some(id) => report_with(shared, id, Some((&note, &sent.typed))).ok(),
        None => Some(start_with(shared, Some(&note), &sent.typed)),
    };
    // The run cannot be shown (there is none by that id): the box, and the way to the runs.
    let mut reply = page.unwrap_or_else(|| {
        let mut p = html::head_with(&format!("{} · agentloop", form.undone()), None, html::CSP);
        p.push_str(&format!("<p><a href=\"/\">All runs</a></p>{note}"));
        p.push_str(&html::foot());
        Reply::html(p)
    });
    reply.status = e.status;
    if let Some(s) = e.retry_after {
        reply = reply.header("Retry-After", &s.to_string());
    }
    Ok(reply)
}

/// The page a browser gets without a valid token (401): a field for the token, which the form
/// sends as `?token=` to the page asked for (the usual sign-in: a cookie, then the page). No
/// script; the policy allows only this form's own target.
pub(super) fn sign_in(path: &str, tried: bool, generated: bool) -> Reply {
    use agentloop_engine::report::html::esc;
    let source = if generated {
        "the line <code>token …</code> that <code>agentloop serve</code> printed at start (it is also kept in \
         <code>~/.local/state/agentloop/serve-token</code>, or under <code>$XDG_STATE_HOME</code>)"
    } else {
        "the value of <code>AGENTLOOP_TOKEN</code> the server was started with"
    };
    let wrong = if tried {
        "<p class=\"refused\" id=\"refused\">That token was not accepted. Check it, or ask whoever runs the server for the current one.</p>"
    } else {
        ""
    };
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Sign in · agentloop</title><style>{css}</style></head>\n<body><main><h1>Sign in to agentloop</h1>{wrong}<form method=\"get\" action=\"{action}\" id=\"sign-in\"><label for=\"token\">Token</label><input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required minlength=\"16\" autofocus><button type=\"submit\">Sign in</button></form><p>The token is {source}.</p><p id=\"about-token\">Opening any page of this server once with <code>?token=TOKEN</code> (e.g. <code>/?token=TOKEN</code>) signs this browser in: the server sets a cookie that stays in this browser (HttpOnly, SameSite=Strict), and takes the token out of the address. Programs send <code>Authorization: Bearer TOKEN</code> instead.</p></main></body></html>\n",
        css = SIGN_IN_CSS,
        action = esc(path),
    );
    let csp =
        "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
    Reply { status: 401, content_type: "text/html; charset=utf-8", body: page.into_bytes(), headers: vec![] }
        .header("Content-Security-Policy", csp)
        .header("WWW-Authenticate", "Bearer realm=\"agentloop\"")
}

const SIGN_IN_CSS: &str = "*{box-sizing:border-box}body{margin:0;font:16px/1.5 system-ui,sans-serif;color:#1d2330;background:#f4f5f7}\
main{max-width:28rem;margin:12vh auto;padding:2rem;background:#fff;border-radius:12px;box-shadow:0 1px 4px rgba(0,0,0,.12)}\
h1{font-size:1.4rem;margin:0 0 1rem}form{display:flex;flex-wrap:wrap;gap:.5rem;margin:0 0 1rem}label{flex-basis:100%;font-weight:600}\
input{flex:1 1 12rem;min-width:0;padding:.55rem .7rem;font:inherit;border:1px solid #b8bfcc;border-radius:8px}\
button{padding:.55rem 1.1rem;font:inherit;font-weight:600;color:#fff;background:#2f5bd3;border:0;border-radius:8px;cursor:pointer}\
p{margin:.6rem 0;color:#444c5c;overflow-wrap:anywhere}code{font-size:.9em;background:#eef0f4;padding:0 .25em;border-radius:4px}\
.refused{color:#a31d1d;background:#fdecec;padding:.5rem .7rem;border-radius:8px}\
@media (max-width:480px){main{margin:0;border-radius:0;box-shadow:none;min-height:100vh;padding:1.25rem}}";

/// GET /runs/{id}/report
pub(super) fn report(shared: &Shared, id: &str) -> ApiResult {
    report_with(shared, id, None)
}

/// The run's page; after a refused form, with `refused`'s box (HTML) above the run's forms and
/// what was typed filled in again. Such a page does not reload itself: it answers a POST.
pub(super) fn report_with(shared: &Shared, id: &str, refused: Option<(&str, &BTreeMap<String, String>)>) -> ApiResult {
    let ws = runs::existing(shared, id)?;
    let run = report::Run::load(&ws)?;
    let now = doing_now(shared, id, &run.state);
    let typed = refused.map(|(_, t)| t.clone()).unwrap_or_default();
    // What a continue can ask for, for a run that may be continued (not going, not done).
    let s = &run.state;
    let stopped = !matches!(
        s.status,
        agentloop_workspace::workspace::Status::Done | agentloop_workspace::workspace::Status::Running
    ) || s.interrupted;
    let offer = stopped.then(|| runs::offer(shared, id, &ws, s)).flatten();
    let going = shared.queue.place(id).is_some();
    let forms = super::forms::actions(shared.auth.csrf(), &run.state, going, offer.as_ref(), &typed);
    let actions = match (refused, forms) {
        (Some((note, _)), forms) => Some(format!("{note}{}", forms.unwrap_or_default())),
        (None, forms) => forms,
    };
    let csp = if actions.is_some() { report::html::CSP_FORMS } else { report::html::CSP };
    let refresh = refused.is_none().then_some(5);
    let links = Links { files: format!("/runs/{id}/files/"), index: Some("/".into()), refresh, now, actions };
    Ok(Reply::html_with(report::render(&run, &links), csp))
}

/// What a running run is doing now, as the server knows it: its place in the queue, and for the
/// run a worker drives, the phase under way (state.json's `next`; a tool from its pending action).
fn doing_now(shared: &Shared, id: &str, s: &agentloop_workspace::workspace::State) -> Option<String> {
    use agentloop_workspace::workspace::{Next, Status};
    if s.status != Status::Running || s.interrupted {
        return None;
    }
    Some(match shared.queue.place(id) {
        Some(Place::Waiting(n)) => format!("waiting for a worker ({n} in line)"),
        Some(Place::Running) => match s.next {
            Next::Frame => "asking the model to frame the goal".into(),
            Next::Plan => "asking the model to plan the next step".into(),
            Next::Act => match &s.pending {
                Some(p) => format!("running the tool {} (step {})", p.tool, p.step),
                None => "running the chosen action".into(),
            },
            Next::Reflect => "asking the model to reflect on the result".into(),
            Next::Finish | Next::None => "finishing the run".into(),
        },
        None => format!("waiting: no worker is driving it (POST /runs/{id}/continue goes on)"),
    })
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
