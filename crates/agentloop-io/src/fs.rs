//! File I/O helpers that attach the path to every error, and the atomic-write primitive.
//!
//! Invariant: no workspace file is ever written in place. [`write_atomic`] writes a temporary
//! file in the same folder and renames it over the target, so a process killed at any instant
//! leaves either the old or the new file, never a torn one; [`write_durable`] also fsyncs.
//! [`append_line`] writes one whole line with a single `write` call on an `O_APPEND` descriptor,
//! so concurrent appends never interleave inside a line.
//!
//! Invariant: no write follows a symbolic link. A workspace may come from elsewhere (copied,
//! unpacked, cloned), and a link in it must not make agentloop write over a file outside it.
//! Appends and in-place writes open with `O_NOFOLLOW`; replacing writes create their temp file
//! exclusively (never through a link) and rename it over the name, which replaces a link rather
//! than writing where it points. Folders below the workspace (`artifacts/`, `runs/<id>/`) are
//! entered as a [`Folder`]: one `O_NOFOLLOW` open per level from the workspace, so a symlinked
//! folder is refused (exit 8) and the write happens relative to the opened handle.
// The wrappers themselves call std::fs; everything else calls them.
#![allow(clippy::disallowed_methods)]

mod folder;
pub mod sys;

pub use folder::{read_file_no_link, read_no_link, write_in, Copied, Folder, Unreadable, COPY_MAX_ENTRIES};

use agentloop_types::error::{Error, Result};
use camino::{Utf8Component, Utf8Path, Utf8PathBuf};
use std::io::Write;

/// Resolves `.` and `..` lexically (only to pick the root; the open is confined by the root's
/// capability, so a symlink cannot turn this into an escape).
pub fn normalize(p: &Utf8Path) -> Utf8PathBuf {
    let mut out = Utf8PathBuf::new();
    for c in p.components() {
        match c {
            Utf8Component::ParentDir => {
                if out.parent().is_some() {
                    out.pop();
                }
            }
            Utf8Component::CurDir => {}
            other => out.push(other.as_str()),
        }
    }
    out
}

pub fn absolute(p: &Utf8Path) -> Utf8PathBuf {
    if p.is_absolute() {
        normalize(p)
    } else {
        let cwd = std::env::current_dir()
            .ok()
            .and_then(|d| Utf8PathBuf::from_path_buf(d).ok())
            .unwrap_or_else(|| Utf8PathBuf::from("/"));
        normalize(&cwd.join(p))
    }
}

pub fn read_to_string(path: &Utf8Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))
}

/// Reads a file that may not exist yet.
pub fn read_optional(path: &Utf8Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", path, e)),
    }
}

/// Reads one of a workspace's own files (the paper trail, a template override) that may not
/// exist yet. A link is followed only when it stays inside `root`, whether it is the file itself
/// or a folder on the way to it (a `templates/` that is a link): a workspace from elsewhere whose
/// `context.md` points at `~/.aws/credentials` must not send that file to the model or put it in
/// a report. Refused: exit 8, naming the path.
pub fn read_inside(root: &Utf8Path, path: &Utf8Path) -> Result<Option<String>> {
    if through_link(root, path) {
        let inside = match (std::fs::canonicalize(path), std::fs::canonicalize(root)) {
            (Ok(real), Ok(top)) => real.starts_with(&top),
            (Err(e), _) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            _ => false,
        };
        if !inside {
            let leaf_is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            if leaf_is_link {
                return Err(Error::data(format!(
                    "{path} is a symbolic link to a file outside the workspace; agentloop reads its own files only from inside it"
                ))
                .with_hint(format!("replace the link with a copy of the file: `cp --remove-destination \"$(readlink -f {path})\" {path}`")));
            }
            return Err(Error::data(format!(
                "{path} is reached through a symbolic link to a folder outside {root}; agentloop reads its own files only from inside it"
            ))
            .with_hint(format!("replace the linked folder on the way to {path} with a copy of it, or remove it")));
        }
    }
    read_optional(path)
}

/// The plain path below `root` that `path` (relative to `root`, or absolute) names when it lands
/// inside the workspace, judged lexically with both made absolute and `.`/`..` resolved: so
/// `identity.md`, `./identity.md`, `notes/../identity.md` and the workspace's own absolute path
/// all count. A file there is the workspace's, whoever's configuration names it: a relative path
/// in the user's own config is taken from a workspace that may come from elsewhere. None:
/// elsewhere, or the workspace itself.
pub fn in_workspace(root: &Utf8Path, path: &Utf8Path) -> Option<camino::Utf8PathBuf> {
    let top = absolute(root);
    let at = absolute(&resolve_in(root, path));
    at.strip_prefix(&top).ok().filter(|rel| !rel.as_str().is_empty()).map(Utf8Path::to_path_buf)
}

/// Reads a file a configuration names (`system_prompt_file`, ...) that may not exist. One that
/// lands in the workspace ([`in_workspace`]) is read as the workspace's own ([`read_inside`]: a
/// link on the way must stay inside), whoever named it; one elsewhere is read as named (only
/// the user's own configuration can name one).
pub fn read_named(root: &Utf8Path, path: &Utf8Path) -> Result<Option<String>> {
    match in_workspace(root, path) {
        Some(rel) => read_inside(root, &root.join(rel)),
        None => read_optional(&resolve_in(root, path)),
    }
}

/// Whether `path` is reached through a link below `root` (the file or a folder on the way), or
/// is not a plain path below it: only then is resolving it worth the cost. The paper trail is
/// read every phase, and a plain name costs one `lstat` here instead of resolving the whole path
/// and the root.
pub fn through_link(root: &Utf8Path, path: &Utf8Path) -> bool {
    let Ok(rel) = path.strip_prefix(root) else { return true };
    let mut at = root.to_path_buf();
    for c in rel.components() {
        let camino::Utf8Component::Normal(name) = c else { return true };
        at.push(name);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    false
}

/// Whether `path`, reached through a link below `root`, resolves outside it (a path that does
/// not exist leads nowhere).
pub fn leads_outside(root: &Utf8Path, path: &Utf8Path) -> bool {
    through_link(root, path)
        && matches!((std::fs::canonicalize(path), std::fs::canonicalize(root)), (Ok(real), Ok(top)) if !real.starts_with(&top))
}

/// Reads a file's bytes when it exists.
pub fn read_bytes_optional(path: &Utf8Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", path, e)),
    }
}

pub fn create_dir_all(path: &Utf8Path) -> Result<()> {
    std::fs::create_dir_all(path).map_err(|e| Error::io("create folder", path, e))
}

/// Replaces `path` with `contents` atomically (temp file in the same folder + rename).
pub fn write_atomic(path: &Utf8Path, contents: &[u8]) -> Result<()> {
    write_atomic_with(path, contents, false)
}

/// Like [`write_atomic`], and also fsyncs the file and its folder so the new contents survive
/// a power loss. Atomicity against a killed process never depends on fsync; the commit
/// journal is written durably, and a journal replay repairs anything after it.
pub fn write_durable(path: &Utf8Path, contents: &[u8]) -> Result<()> {
    write_atomic_with(path, contents, true)
}

/// Like [`write_atomic`], for a secret: the file is created readable and writable by its owner
/// only (0600) before anything is written to it.
pub fn write_private(path: &Utf8Path, contents: &[u8]) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = folder_of(path);
    let name = path.file_name().unwrap_or("file");
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io("write", &tmp, e));
    }
    put_in_place(&tmp, path)
}

/// The folder a path is in (`.` for a bare name).
fn folder_of(path: &Utf8Path) -> &Utf8Path {
    path.parent().filter(|p| !p.as_str().is_empty()).unwrap_or(Utf8Path::new("."))
}

/// Writes `contents` to a temp file beside `path` (fsynced when `durable`) and passes the
/// crash point `write:<name>`; the caller puts it in place. Returns the temp file's path.
fn write_temp(path: &Utf8Path, contents: &[u8], durable: bool) -> Result<camino::Utf8PathBuf> {
    let dir = folder_of(path);
    let name = path.file_name().unwrap_or("file");
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut f = create_exclusive(&tmp)?;
        f.write_all(contents)?;
        if durable {
            f.sync_all()?;
        }
        Ok(())
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io("write", &tmp, e));
    }
    crate::crash::point(&format!("write:{name}"));
    Ok(tmp)
}

/// Creates a new file, never through a link: `O_EXCL` fails on any existing name, a symlink
/// included; a leftover (a killed process's temp file, or a link put there) is removed first.
fn create_exclusive(path: &Utf8Path) -> std::io::Result<std::fs::File> {
    let open = || std::fs::OpenOptions::new().write(true).create_new(true).open(path);
    match open() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(path)?;
            open()
        }
        r => r,
    }
}

/// Opens `path` for appending (created when `create`), never through a symlink.
fn open_append_nofollow(path: &Utf8Path, create: bool) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(create)
        .append(true)
        .custom_flags(sys::O_NOFOLLOW)
        .open(path)
        .map_err(|e| not_a_symlink("open", path, e))
}

/// Renames a temp file over `path` (removing it when the rename fails).
fn put_in_place(tmp: &Utf8Path, path: &Utf8Path) -> Result<()> {
    std::fs::rename(tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(tmp);
        Error::io("replace", path, e)
    })
}

fn write_atomic_with(path: &Utf8Path, contents: &[u8], durable: bool) -> Result<()> {
    let tmp = write_temp(path, contents, durable)?;
    put_in_place(&tmp, path)?;
    if durable {
        if let Ok(d) = std::fs::File::open(folder_of(path)) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// Appends one line (a trailing newline is added) with a single write. Not fsynced: trace lines
/// of a phase are covered by its durable commit journal, and the rest are diagnostics.
pub fn append_line(path: &Utf8Path, line: &str) -> Result<()> {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    let mut f = open_append_nofollow(path, true)?;
    f.write_all(&buf).map_err(|e| Error::io("append to", path, e))
}

/// The last `n` bytes of a file (all of it when it is shorter), or None when there is no file:
/// what a look at the end of a file needs, read without the rest however long the file is.
pub fn read_tail(path: &Utf8Path, n: u64) -> Result<Option<Vec<u8>>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", path, e)),
    };
    let len = f.metadata().map_err(|e| Error::io("stat", path, e))?.len();
    let mut tail = Vec::new();
    f.seek(SeekFrom::Start(len.saturating_sub(n)))
        .and_then(|_| f.take(n).read_to_end(&mut tail))
        .map_err(|e| Error::io("read", path, e))?;
    Ok(Some(tail))
}

/// Whether a file is empty, missing, or ends with a newline (reads only its last byte).
pub fn ends_with_newline(path: &Utf8Path) -> Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(Error::io("open", path, e)),
    };
    let len = f.metadata().map_err(|e| Error::io("stat", path, e))?.len();
    if len == 0 {
        return Ok(true);
    }
    let mut last = [0u8; 1];
    f.seek(SeekFrom::Start(len - 1)).and_then(|_| f.read_exact(&mut last)).map_err(|e| Error::io("read", path, e))?;
    Ok(last[0] == b'\n')
}

/// Appends text as is (used to terminate a torn last line).
pub fn append_raw(path: &Utf8Path, text: &str) -> Result<()> {
    let mut f = open_append_nofollow(path, false)?;
    f.write_all(text.as_bytes()).map_err(|e| Error::io("append to", path, e))
}

/// An open error, saying so when the path is a symlink (refused by `O_NOFOLLOW`).
pub fn not_a_symlink(action: &str, path: &Utf8Path, e: std::io::Error) -> Error {
    if e.raw_os_error() == Some(sys::ELOOP) {
        return linked_file(path);
    }
    Error::io(action, path, e)
}

/// The refusal of a file agentloop writes that is a symbolic link (exit 8).
pub fn linked_file(path: &Utf8Path) -> Error {
    Error::data(format!("{path} is a symbolic link; agentloop never writes through links")).with_hint(format!(
        "replace it with a real file: `rm {path}` removes the link only (what it points to is unchanged); then run the command again"
    ))
    .with_cause(agentloop_types::error::Cause::Link)
}

/// The refusal of a folder agentloop writes into that is a symbolic link (exit 8).
pub fn linked_folder(path: &Utf8Path) -> Error {
    Error::data(format!("{path}/ is a symbolic link; agentloop never writes through links")).with_hint(format!(
        "replace it with a real folder: `rm {path}` removes the link only, then `mkdir {path}` (move in what you want kept)"
    ))
    .with_cause(agentloop_types::error::Cause::Link)
}

/// The refusal of a workspace file or folder agentloop reads only when no link is on the way (a
/// store of its own: long-term memory, a skill) that is a symbolic link (exit 8).
pub fn linked_for_reading(path: &Utf8Path, folder: bool) -> Error {
    let (what, fix) = if folder {
        ("/", format!("replace it with a real folder: `rm {path}` removes the link only, then `mkdir {path}` (copy in what you want kept)"))
    } else {
        (
            "",
            format!(
                "replace it with a real file: `cp --remove-destination \"$(readlink -f {path})\" {path}`, or remove it"
            ),
        )
    };
    Error::data(format!(
        "{path}{what} is a symbolic link; agentloop reads the workspace's own stores only from real files and folders inside it"
    ))
    .with_hint(fix)
    .with_cause(agentloop_types::error::Cause::Link)
}

/// Opens (or creates) a journal for writing in place; a new one's folder is fsynced, so the
/// file itself survives a power cut.
pub fn open_journal(path: &Utf8Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let existed = path.exists();
    // Never through a symlink: a workspace from elsewhere must not make us write over a file
    // outside it.
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags(sys::O_NOFOLLOW)
        .open(path)
        .map_err(|e| not_a_symlink("open", path, e))?;
    if !existed {
        let dir = folder_of(path);
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(f)
}

/// Writes journal bytes in place at `offset` (no truncation) and makes them durable with one
/// `fdatasync`. Overwriting blocks the file already has costs no metadata change, unlike
/// truncating and growing it again. Not atomic on its own: a record torn by a crash is one
/// whose phase was never applied (applying starts only after this returns), and its checksum
/// tells readers so.
pub fn write_journal(f: &std::fs::File, path: &Utf8Path, offset: u64, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::FileExt;
    f.write_all_at(bytes, offset).and_then(|_| f.sync_data()).map_err(|e| Error::io("write", path, e))
}

/// Overwrites bytes at `offset` of an open file, not fsynced (a journal record marked applied:
/// if the mark is lost in a power cut, the record is replayed, which is idempotent).
pub fn write_at(f: &std::fs::File, path: &Utf8Path, offset: u64, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::FileExt;
    f.write_all_at(bytes, offset).map_err(|e| Error::io("write", path, e))
}

/// fsyncs a file or folder (one the commit journal's checkpoint makes durable); a missing one
/// is fine (a person may have removed it).
pub fn sync_path(path: &Utf8Path) -> Result<()> {
    match std::fs::File::open(path) {
        Ok(f) => f.sync_all().map_err(|e| Error::io("sync", path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("open", path, e)),
    }
}

/// Replaces `path` atomically, like [`write_atomic`], for files the commit journal covers.
///
/// With `spares` (a folder of agentloop's own), the new contents are written into a *spare*:
/// one of [`SPARES`] earlier versions of the file kept there, the one retired longest ago; then
/// the spare and the file swap names (`renameat2(RENAME_EXCHANGE)`, atomic), so the version
/// just replaced becomes a spare in turn. No inode is created or freed. Creating and freeing
/// one per write was most of a commit's cost: ext4 without a journal skips every inode freed
/// in the last minutes when it allocates one, and a plain rename over a file makes ext4 write
/// the new data out at once (`auto_da_alloc`). Readers that open the file by name always get
/// a whole version; a reader that keeps a descriptor open sees its version unchanged until
/// [`SPARES`] more versions have been written. A spare that is a symlink, not a plain file,
/// or linked elsewhere (a hard-link backup) is never written into.
///
/// Without spares (or where the filesystem cannot swap), a new temporary file is swapped in
/// and the old one removed, or renamed over the target when it does not exist yet. Durability
/// comes from the journal, fsynced, and its checkpoint.
pub fn replace(path: &Utf8Path, contents: &[u8], spares: Option<(&Utf8Path, &SpareMemory)>) -> Result<()> {
    if let Some((dir, memory)) = spares {
        if via_spare(path, contents, dir, memory)? {
            return Ok(());
        }
    }
    let tmp = write_temp(path, contents, false)?;
    if swap(&tmp, path) {
        // The old contents, now under the temp name (removed by the next lock if we die here).
        let _ = std::fs::remove_file(&tmp);
        return Ok(());
    }
    put_in_place(&tmp, path)
}

/// How many earlier versions of a file [`replace`] keeps as spares.
pub const SPARES: usize = 4;

/// What a workspace value knows of its files' spare slots ([`replace`]): per file, the slot
/// written last and how many writes in a row it made through the spares. After [`SPARES`] of
/// them the slots were all written by it in rotation order, so the next in rotation is the one
/// retired longest ago: no stat needed. A value that knows nothing picks by the slots' times.
#[derive(Debug, Default)]
pub struct SpareMemory(std::sync::Mutex<Vec<(camino::Utf8PathBuf, usize, usize)>>);

impl SpareMemory {
    /// Forgets it all (another process may write the files next: the workspace's lock is being
    /// released).
    pub fn forget(&self) {
        if let Ok(mut s) = self.0.lock() {
            s.clear();
        }
    }
}

/// The slot to write next for `path`: round-robin once this process knows the order, else the
/// slot retired longest ago (its ctime is when it was swapped out) or a free one. None: the
/// spare folder cannot be used.
fn pick_spare(path: &Utf8Path, name: &str, dir: &Utf8Path, memory: &SpareMemory) -> Option<usize> {
    use std::os::unix::fs::MetadataExt;
    let (last, streak) = memory
        .0
        .lock()
        .ok()
        .and_then(|s| s.iter().find(|(p, _, _)| p == path).map(|e| (e.1, e.2)))
        .unwrap_or((SPARES - 1, 0));
    // The folder is checked every time: a symlink put in its place is never followed.
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(dir).ok()?,
        _ => return None,
    }
    if streak >= SPARES {
        return Some((last + 1) % SPARES);
    }
    let mut pick: Option<(usize, Option<(i64, i64)>)> = None;
    for i in 1..=SPARES {
        let k = (last + i) % SPARES;
        match std::fs::symlink_metadata(dir.join(format!("{name}.{k}"))) {
            Ok(m) => {
                let t = (m.ctime(), m.ctime_nsec());
                if pick.is_none_or(|(_, p)| p.is_some_and(|p| t < p)) {
                    pick = Some((k, Some(t)));
                }
            }
            Err(_) => return Some(k),
        }
    }
    pick.map(|(k, _)| k)
}

/// Records a write through slot `k` (None: the slot could not be used; start over).
fn wrote_spare(path: &Utf8Path, k: Option<usize>, memory: &SpareMemory) {
    let Ok(mut s) = memory.0.lock() else { return };
    let pos = s.iter().position(|(p, _, _)| p == path);
    match (pos, k) {
        (Some(i), Some(k)) => {
            let e = &mut s[i];
            e.2 = if e.2 > 0 && k == (e.1 + 1) % SPARES { e.2 + 1 } else { 1 };
            e.1 = k;
        }
        (None, Some(k)) => s.push((path.to_path_buf(), k, 1)),
        (Some(i), None) => {
            s.remove(i);
        }
        (None, None) => {}
    }
}

/// [`replace`] through a spare; false when no spare can be used (nothing was changed).
fn via_spare(path: &Utf8Path, contents: &[u8], dir: &Utf8Path, memory: &SpareMemory) -> Result<bool> {
    use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
    let Some(name) = path.file_name() else { return Ok(false) };
    let Some(k) = pick_spare(path, name, dir, memory) else { return Ok(false) };
    let slot = dir.join(format!("{name}.{k}"));
    let f = match std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(sys::O_NOFOLLOW)
        .open(&slot)
    {
        Ok(f) => f,
        Err(_) => {
            wrote_spare(path, None, memory);
            return Ok(false);
        }
    };
    match f.metadata() {
        Ok(m) if m.is_file() && m.nlink() == 1 => {}
        _ => {
            drop(f);
            let _ = std::fs::remove_file(&slot);
            wrote_spare(path, None, memory);
            return Ok(false);
        }
    }
    f.write_all_at(contents, 0)
        .and_then(|_| f.set_len(contents.len() as u64))
        .map_err(|e| Error::io("write", &slot, e))?;
    drop(f);
    crate::crash::point(&format!("write:{name}"));
    if swap(&slot, path) {
        wrote_spare(path, Some(k), memory);
        return Ok(true);
    }
    wrote_spare(path, None, memory);
    // The file does not exist yet (or the filesystem cannot swap): the slot becomes the file.
    std::fs::rename(&slot, path).map_err(|e| Error::io("replace", path, e))?;
    Ok(true)
}

/// Swaps two existing paths atomically; false when it cannot (then nothing changed).
#[cfg(target_os = "linux")]
fn swap(a: &Utf8Path, b: &Utf8Path) -> bool {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    renameat_with(CWD, a.as_std_path(), CWD, b.as_std_path(), RenameFlags::EXCHANGE).is_ok()
}

#[cfg(not(target_os = "linux"))]
fn swap(_: &Utf8Path, _: &Utf8Path) -> bool {
    false
}

/// Appends `text` to a file whose size was `at` before it: text already there (a replay) is
/// not added again, a torn tail past `at` is cut off first, a missing file is created.
pub fn append_at(path: &Utf8Path, at: u64, text: &str) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let len = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_symlink() => return Err(linked_file(path)),
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(Error::io("stat", path, e)),
    };
    let end = at + text.len() as u64;
    if len >= end && len > at {
        return Ok(());
    }
    if len > at {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(sys::O_NOFOLLOW)
            .open(path)
            .map_err(|e| not_a_symlink("open", path, e))?;
        f.set_len(at).map_err(|e| Error::io("cut the torn end of", path, e))?;
    }
    append_text(path, text)
}

/// Empties a file (a journal in an unknown format, once set aside).
pub fn clear_journal(path: &Utf8Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new().write(true).custom_flags(sys::O_NOFOLLOW).open(path) {
        Ok(f) => f.set_len(0).map_err(|e| Error::io("empty", path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(not_a_symlink("open", path, e)),
    }
}

/// Appends text with a single write, creating the file when it does not exist.
pub fn append_text(path: &Utf8Path, text: &str) -> Result<()> {
    let mut f = open_append_nofollow(path, true)?;
    f.write_all(text.as_bytes()).map_err(|e| Error::io("append to", path, e))
}

/// Reads a file named on the command line, `-` meaning stdin.
pub fn read_arg(path: &str) -> Result<String> {
    if path == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(|e| Error::io("read", "stdin", e))?;
        Ok(s)
    } else {
        read_to_string(Utf8Path::new(path))
    }
}

/// Resolves a path relative to `root` (a workspace) unless it is absolute.
pub fn resolve_in(root: &Utf8Path, p: &Utf8Path) -> camino::Utf8PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;

    fn ino(p: &Utf8Path) -> u64 {
        std::fs::metadata(p).unwrap().ino()
    }

    /// A path that lands in the workspace, however spelled, is read as the workspace's own: a
    /// link on the way that leads out is refused; a file elsewhere is read as named.
    #[test]
    fn a_named_file_in_the_workspace_is_read_as_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let base = Utf8Path::from_path(dir.path()).unwrap();
        let root = base.join("ws");
        std::fs::create_dir_all(root.join("notes")).unwrap();
        std::fs::write(base.join("secret.txt"), "hunter2").unwrap();
        std::os::unix::fs::symlink(base.join("secret.txt"), root.join("identity.md")).unwrap();
        for p in ["identity.md", "./identity.md", "notes/../identity.md"] {
            assert_eq!(in_workspace(&root, Utf8Path::new(p)).as_deref(), Some(Utf8Path::new("identity.md")), "{p}");
            assert!(read_named(&root, Utf8Path::new(p)).is_err(), "{p}");
        }
        assert!(read_named(&root, &root.join("identity.md")).is_err());
        assert_eq!(in_workspace(&root, Utf8Path::new("../secret.txt")), None);
        assert_eq!(read_named(&root, &base.join("secret.txt")).unwrap().as_deref(), Some("hunter2"));
        assert_eq!(in_workspace(&root, Utf8Path::new(".")), None);
    }

    /// Replacing through spares: the contents change atomically, no new inode appears after the
    /// spares exist, a reader's open descriptor keeps its version for SPARES more writes, and a
    /// hard-linked or symlinked spare (or spare folder) is never written into.
    #[test]
    fn replace_through_spares_reuses_inodes_and_spares_readers() {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(dir.path()).unwrap();
        let (file, spares) = (root.join("state.json"), root.join(".spare"));
        replace(&file, b"v0", Some((&spares, &SpareMemory::default()))).unwrap();
        let mut reader = std::fs::File::open(&file).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for i in 1..=3 * SPARES {
            replace(&file, format!("v{i}").as_bytes(), Some((&spares, &SpareMemory::default()))).unwrap();
            assert_eq!(read_to_string(&file).unwrap(), format!("v{i}"));
            seen.insert(ino(&file));
            if i == SPARES {
                let mut old = String::new();
                reader.read_to_string(&mut old).unwrap();
                assert_eq!(old, "v0", "an open descriptor keeps its version for {SPARES} more writes");
            }
        }
        assert!(seen.len() <= SPARES + 1, "inodes are reused, not created: {seen:?}");

        // A spare linked elsewhere (a hard-link backup) is left alone.
        let backup = root.join("backup");
        std::fs::create_dir(&backup).unwrap();
        for k in 0..SPARES {
            let _ = std::fs::hard_link(spares.join(format!("state.json.{k}")), backup.join(k.to_string()));
        }
        let before: Vec<String> = (0..SPARES).map(|k| read_to_string(&backup.join(k.to_string())).unwrap()).collect();
        for i in 0..2 * SPARES {
            replace(&file, format!("w{i}").as_bytes(), Some((&spares, &SpareMemory::default()))).unwrap();
        }
        let after: Vec<String> = (0..SPARES).map(|k| read_to_string(&backup.join(k.to_string())).unwrap()).collect();
        assert_eq!(before, after, "a hard-linked spare is never written into");
        assert_eq!(read_to_string(&file).unwrap(), format!("w{}", 2 * SPARES - 1));

        // A symlinked spare folder or slot is not followed.
        let outside = root.join("outside");
        std::fs::create_dir(&outside).unwrap();
        let linked = root.join(".linked");
        std::os::unix::fs::symlink(&outside, &linked).unwrap();
        replace(&root.join("plan.md"), b"plan", Some((&linked, &SpareMemory::default()))).unwrap();
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "nothing written through a symlinked folder");
        let slots = root.join(".slots");
        std::fs::create_dir(&slots).unwrap();
        for k in 0..SPARES {
            std::os::unix::fs::symlink(outside.join(format!("x{k}")), slots.join(format!("memory.md.{k}"))).unwrap();
        }
        replace(&root.join("memory.md"), b"memory", Some((&slots, &SpareMemory::default()))).unwrap();
        assert_eq!(read_to_string(&root.join("memory.md")).unwrap(), "memory");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "nothing written through a symlinked slot");
    }
}
