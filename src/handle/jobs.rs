//! The answers of the router's jobs, kept per job id under the root
//! (`.agentloop-handle/jobs/`): a job the router delivers again — it retries a job whose answer
//! it never received (it was stopped mid-turn, the answer was lost) under the same `job_id` —
//! is answered with the answer its first delivery gave, events and all, so the router's own
//! retry recovers the run at once instead of finding every result stale. Only a final answer is
//! kept: one the router is told to retry is not (the retry must run the turn again).
//!
//! Bounded: the newest [`KEEP`] answers are kept. Written atomically, never through a link.

use agentloop_types::error::Result;
use camino::{Utf8Path, Utf8PathBuf};
use serde_json::{json, Value};

/// Folder below the root.
const DIR: &str = ".agentloop-handle/jobs";
/// Answers kept at most; the oldest go first.
const KEEP: usize = 500;
/// Largest kept answer read back.
const CAP: u64 = 16 * 1024 * 1024;

fn name(job: &str) -> String {
    format!("{:016x}.json", agentloop_types::run_id::fnv1a(job.as_bytes()))
}

/// The answer the job's first delivery gave, if it was kept.
pub(super) fn kept(root: &Utf8Path, job: &str) -> Option<Value> {
    let folder = agentloop_io::fs::Folder::open_to_read(root, Utf8Path::new(DIR)).ok().flatten()?;
    let bytes = folder.read(&name(job), CAP).ok().flatten()?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    // The name is a hash: the job's own id decides.
    (v["job_id"] == job).then(|| v["response"].clone()).filter(Value::is_object)
}

/// Keeps `response` as the answer of `job` when it is final (not an error the router retries).
pub(super) fn keep(root: &Utf8Path, job: &str, response: &Value) -> Result<()> {
    if response["retry"] == true || !root.is_dir() {
        return Ok(());
    }
    let folder = agentloop_io::fs::Folder::create(root, Utf8Path::new(DIR))?;
    let text =
        json!({"job_id": job, "kept_at": agentloop_types::clock::now_rfc3339(), "response": response}).to_string();
    folder.write_atomic(&name(job), text.as_bytes())?;
    prune(&root.join(DIR));
    Ok(())
}

/// Removes the oldest answers past [`KEEP`].
fn prune(dir: &Utf8PathBuf) {
    let Ok(rd) = dir.read_dir_utf8() else { return };
    let mut files: Vec<(std::time::SystemTime, Utf8PathBuf)> = rd
        .flatten()
        .filter(|e| e.file_name().ends_with(".json"))
        .filter_map(|e| {
            let m = e.path().symlink_metadata().ok()?;
            m.is_file().then(|| (m.modified().unwrap_or(std::time::UNIX_EPOCH), e.path().to_path_buf()))
        })
        .collect();
    if files.len() <= KEEP {
        return;
    }
    files.sort();
    for (_, p) in files.iter().take(files.len() - KEEP) {
        let _ = std::fs::remove_file(p);
    }
}
