//! File primitives under a capability (cap-std) and lexical path helpers: opening a regular file
//! without blocking, reading with a size cap, checking a write target, and error messages that
//! name a path as the model gave it. A leaf: the tool sandbox, skills and MCP build on it.

use crate::fs::sys;
use agentloop_types::error::Error;
// The lexical path helpers live in fs (below this module), for both.
pub use crate::fs::{absolute, normalize};
use camino::{Utf8Path, Utf8PathBuf};
use cap_std::fs::{Dir, File, Metadata, MetadataExt, OpenOptions, OpenOptionsExt};
use std::io::Read;

/// `to` relative to `from`, both absolute and normalized (`../data`, `artifacts`, `` for equal).
pub fn relative(from: &Utf8Path, to: &Utf8Path) -> Utf8PathBuf {
    let f: Vec<_> = from.components().collect();
    let t: Vec<_> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut out = Utf8PathBuf::new();
    for _ in common..f.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c.as_str());
    }
    out
}

/// A file's identity (device, inode): the same file whichever path reached it.
pub fn identity(m: &Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

/// A message for a failed file operation that names the path as the model gave it.
pub fn io_error(shown: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!("{shown}: no such file or folder"),
        // cap-std refuses a path that would climb out of its folder with an error of its own
        // (no OS error number); an OS refusal carries its errno.
        std::io::ErrorKind::PermissionDenied if e.raw_os_error().is_none() => {
            format!("access denied: {shown} leads out of the allowed folders")
        }
        std::io::ErrorKind::PermissionDenied => format!("access denied: {shown}: permission denied"),
        _ => match e.raw_os_error() {
            Some(sys::ELOOP) | Some(sys::EXDEV) => {
                format!("access denied: {shown} leads out of the allowed folders through a symbolic link")
            }
            Some(sys::ENXIO) => format!("{shown} is not a regular file"),
            _ => format!("cannot use {shown}: {}", strip_os_detail(e)),
        },
    }
}

/// An io::Error's text without any path the OS put in it.
/// [`io_error`] as a tool failure that keeps the I/O error as its source.
pub fn io_failure(shown: &str, e: std::io::Error) -> Error {
    Error::tool(io_error(shown, &e)).with_told_source(e)
}

fn strip_os_detail(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Opens a regular file for reading inside `dir` without blocking: O_NONBLOCK, then the type is
/// checked on the opened handle. Returns the file and its metadata.
pub fn open_regular(dir: &Dir, rel: &str, shown: &str) -> Result<(File, Metadata), Error> {
    let mut o = OpenOptions::new();
    o.read(true).custom_flags(sys::O_NONBLOCK);
    let f = dir.open_with(rel, &o).map_err(|e| io_failure(shown, e))?;
    let m = f.metadata().map_err(|e| io_failure(shown, e))?;
    if m.is_dir() {
        return Err(Error::tool(format!("{shown} is a folder; use list_dir or grep")));
    }
    if !m.is_file() {
        return Err(Error::tool(format!("{shown} is not a regular file")));
    }
    Ok((f, m))
}

/// Why a capped read failed, as the model is told. Too large is its own case: a search skips
/// and counts such files instead of failing.
#[derive(Debug, Clone)]
pub enum ReadError {
    TooLarge(String),
    Other(Error),
}

impl From<Error> for ReadError {
    fn from(e: Error) -> Self {
        ReadError::Other(e)
    }
}

impl From<ReadError> for Error {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::TooLarge(m) => Error::tool(m),
            ReadError::Other(e) => e,
        }
    }
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::TooLarge(m) => f.write_str(m),
            ReadError::Other(e) => write!(f, "{e}"),
        }
    }
}

/// Reads a whole regular file of at most `cap` bytes (see [`open_regular`]).
pub fn read_capped(dir: &Dir, rel: &str, shown: &str, cap: u64) -> Result<Vec<u8>, ReadError> {
    let (f, m) = open_regular(dir, rel, shown)?;
    if m.len() > cap {
        return Err(ReadError::TooLarge(too_large(shown, m.len(), cap)));
    }
    let mut buf = Vec::new();
    f.take(cap + 1).read_to_end(&mut buf).map_err(|e| io_failure(shown, e))?;
    if buf.len() as u64 > cap {
        return Err(ReadError::TooLarge(too_large(shown, buf.len() as u64, cap)));
    }
    Ok(buf)
}

pub fn too_large(shown: &str, size: u64, cap: u64) -> String {
    format!("{shown} is {size} bytes, more than tools.max_file_bytes ({cap}); raise tools.max_file_bytes to read it")
}

/// Checks the file about to be written in `parent`: a missing file or a regular file with one
/// link is fine; a symlink is fine only for an overwrite (the rename replaces the link itself).
pub fn check_target(parent: &Dir, name: &str, shown: &str, append: bool) -> Result<Option<Metadata>, Error> {
    match parent.symlink_metadata(name) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_failure(shown, e)),
        Ok(m) if m.is_symlink() && append => Err(Error::tool(format!(
            "access denied: `{shown}` is a symbolic link; append does not write through links (overwrite replaces the link)"
        ))),
        Ok(m) if m.is_symlink() => Ok(None),
        Ok(m) if m.is_dir() => Err(Error::tool(format!("`{shown}` is a folder, not a file"))),
        Ok(m) if !m.is_file() => Err(Error::tool(format!("`{shown}` exists and is not a regular file"))),
        Ok(m) if m.nlink() > 1 => Err(Error::tool(format!(
            "access denied: `{shown}` has {} hard links; writing it would change a file elsewhere too",
            m.nlink()
        ))),
        Ok(m) => Ok(Some(m)),
    }
}

/// Opens `name` in `parent` for appending, creating it, and checks on the opened handle that it
/// is the regular, singly linked file that `name` names (not a link or FIFO swapped in).
pub fn open_append(parent: &Dir, name: &str, shown: &str) -> Result<File, Error> {
    let mut o = OpenOptions::new();
    o.append(true).create(true).custom_flags(sys::O_NONBLOCK);
    let f = parent.open_with(name, &o).map_err(|e| io_failure(shown, e))?;
    let opened = f.metadata().map_err(|e| io_failure(shown, e))?;
    let named = parent.symlink_metadata(name).map_err(|e| io_failure(shown, e))?;
    if !opened.is_file() || named.is_symlink() || identity(&opened) != identity(&named) {
        return Err(Error::tool(format!(
            "access denied: `{shown}` is not a regular file in place (a link or special file)"
        )));
    }
    if opened.nlink() > 1 {
        return Err(Error::tool(format!(
            "access denied: `{shown}` has {} hard links; writing it would change a file elsewhere too",
            opened.nlink()
        )));
    }
    Ok(f)
}
