//! A folder below the workspace, entered without following links: the workspace is opened as
//! named (where it lies is the user's choice), then each folder below it with
//! `O_NOFOLLOW | O_DIRECTORY`, one `openat` per level. A symlinked `artifacts/`, `runs/` or
//! `runs/<id>/` is refused (exit 8, naming the folder and the fix), and every write happens
//! relative to the opened handle, so a link swapped in after the check is not followed either.
//! Reads of the workspace's own stores (long-term memory, skills) go the same way
//! ([`read_no_link`]): a link anywhere below the workspace, the file included, is refused.

use super::{linked_file, linked_folder, linked_for_reading};
use agentloop_types::error::{Error, Result};
use camino::{Utf8Component, Utf8Path, Utf8PathBuf};
use rustix::fs::{mkdirat, openat, renameat, statat, unlinkat, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::io::Write;
use std::os::fd::OwnedFd;

/// An opened folder of the workspace and its path (for messages only).
#[derive(Debug)]
pub struct Folder {
    fd: OwnedFd,
    path: Utf8PathBuf,
}

fn io(action: &str, path: &Utf8Path, e: Errno) -> Error {
    Error::io(action, path, std::io::Error::from(e))
}

fn is_symlink(dir: &OwnedFd, name: &str) -> bool {
    statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
}

impl Folder {
    /// Opens folder `rel` (plain components only) below `root`, creating missing folders when
    /// `create`. None: a folder is missing and `create` is off. A component that is a symbolic
    /// link is refused, wherever it points.
    pub fn open(root: &Utf8Path, rel: &Utf8Path, create: bool) -> Result<Option<Folder>> {
        Self::enter(root, rel, create, false)
    }

    /// Opens folder `rel` below `root`, creating what is missing (see [`Folder::open`]).
    pub fn create(root: &Utf8Path, rel: &Utf8Path) -> Result<Folder> {
        Self::enter(root, rel, true, false)?.ok_or_else(|| Error::failure(format!("cannot create folder {root}/{rel}")))
    }

    /// Opens folder `rel` below `root` to read from it, as [`Folder::open`] does (never
    /// creating one): a component that is a link is refused with an error that says so.
    pub fn open_to_read(root: &Utf8Path, rel: &Utf8Path) -> Result<Option<Folder>> {
        Self::enter(root, rel, false, true)
    }

    fn enter(root: &Utf8Path, rel: &Utf8Path, create: bool, reading: bool) -> Result<Option<Folder>> {
        use std::os::unix::fs::OpenOptionsExt;
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(super::sys::O_DIRECTORY | super::sys::O_CLOEXEC)
                .open(root)
        };
        let file = match open() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // The workspace itself is created as named, like any folder the user names.
                super::create_dir_all(root)?;
                open()
            }
            r => r,
        }
        .map_err(|e| Error::io("open folder", root, e))?;
        let mut folder = Folder { fd: OwnedFd::from(file), path: root.to_path_buf() };
        for c in rel.components() {
            let Utf8Component::Normal(name) = c else {
                return Err(Error::data(format!("{root}/{rel}: not a plain folder inside the workspace"))
                    .with_hint("name folders below the workspace without `..` or a leading /"));
            };
            match folder.sub(name, create, reading)? {
                Some(f) => folder = f,
                None => return Ok(None),
            }
        }
        Ok(Some(folder))
    }

    /// The folder `name` in this one (see [`Folder::open`]).
    fn sub(&self, name: &str, create: bool, reading: bool) -> Result<Option<Folder>> {
        let path = self.path.join(name);
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut made = false;
        loop {
            match openat(&self.fd, name, flags, Mode::empty()) {
                Ok(fd) => return Ok(Some(Folder { fd, path })),
                Err(Errno::NOENT) if create && !made => {
                    match mkdirat(&self.fd, name, Mode::from_bits_truncate(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => made = true,
                        Err(e) => return Err(io("create folder", &path, e)),
                    }
                }
                Err(Errno::NOENT) => return Ok(None),
                Err(Errno::LOOP) | Err(Errno::NOTDIR) if reading && is_symlink(&self.fd, name) => {
                    return Err(linked_for_reading(&path, true))
                }
                Err(Errno::LOOP) => return Err(linked_folder(&path)),
                Err(Errno::NOTDIR) if is_symlink(&self.fd, name) => return Err(linked_folder(&path)),
                Err(Errno::NOTDIR) => {
                    return Err(Error::data(format!("{path} is a file where agentloop keeps a folder"))
                        .with_hint(format!("move {path} aside and run the command again")))
                }
                Err(e) => return Err(io("open folder", &path, e)),
            }
        }
    }

    pub fn path(&self) -> &Utf8Path {
        &self.path
    }

    /// Reads `name` in this folder: a regular file of at most `cap` bytes, opened without
    /// following a link (refused, exit 8) or waiting on a FIFO. None: it does not exist.
    pub fn read(&self, name: &str, cap: u64) -> Result<Option<Vec<u8>>> {
        let path = self.path.join(name);
        self.read_file(name, cap).map_err(|why| match why {
            Unreadable::Link => linked_for_reading(&path, false),
            Unreadable::NotRegular => Error::data(format!("{path} is not a regular file"))
                .with_hint(format!("move {path} aside; agentloop reads only regular files there")),
            Unreadable::TooLarge(n) => {
                Error::data(format!("{path} is {n} bytes, more than the {cap} agentloop reads of it"))
                    .with_hint("raise tools.max_file_bytes, or make the file smaller")
            }
            Unreadable::Folder(e) | Unreadable::Io(e) => e,
        })
    }

    /// [`Folder::read`], with why a file was not read as a value, for callers that word it
    /// their own way (a tool result names the file as the model gave it).
    pub fn read_file(&self, name: &str, cap: u64) -> std::result::Result<Option<Vec<u8>>, Unreadable> {
        use std::io::Read;
        let path = self.path.join(name);
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = match openat(&self.fd, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::LOOP) => return Err(Unreadable::Link),
            Err(e) => return Err(Unreadable::Io(io("open", &path, e))),
        };
        let f = std::fs::File::from(fd);
        let m = f.metadata().map_err(|e| Unreadable::Io(Error::io("stat", &path, e)))?;
        if !m.is_file() {
            return Err(Unreadable::NotRegular);
        }
        if m.len() > cap {
            return Err(Unreadable::TooLarge(m.len()));
        }
        let mut buf = Vec::new();
        f.take(cap.saturating_add(1)).read_to_end(&mut buf).map_err(|e| Unreadable::Io(Error::io("read", &path, e)))?;
        if buf.len() as u64 > cap {
            return Err(Unreadable::TooLarge(buf.len() as u64));
        }
        Ok(Some(buf))
    }

    /// Renames entry `from` of this folder to `to` (the entry itself: a link moves as a link).
    pub fn rename(&self, from: &str, to: &str) -> Result<()> {
        renameat(&self.fd, from, &self.fd, to).map_err(|e| io("rename", &self.path.join(from), e))
    }

    /// The size of regular file `name` (0 when missing or not a regular file; a link is not
    /// followed).
    pub fn size_of(&self, name: &str) -> u64 {
        match statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => st.st_size as u64,
            _ => 0,
        }
    }

    /// Whether `name` in this folder is a symbolic link.
    pub fn is_link(&self, name: &str) -> bool {
        is_symlink(&self.fd, name)
    }

    /// Whether `name` is in this folder (a link counts as itself and is not followed).
    pub fn has(&self, name: &str) -> bool {
        statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// Replaces `name` atomically: a temp file created exclusively beside it (never through a
    /// link), then renamed over the name, which replaces a link rather than writing through it.
    pub fn write_atomic(&self, name: &str, contents: &[u8]) -> Result<()> {
        let tmp = format!(".{name}.{}.tmp", std::process::id());
        let tmp_path = self.path.join(&tmp);
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mode = Mode::from_bits_truncate(0o666);
        let fd = match openat(&self.fd, tmp.as_str(), flags, mode) {
            Err(Errno::EXIST) => {
                // A killed process's temp file, or something put in its place: not ours to follow.
                let _ = unlinkat(&self.fd, tmp.as_str(), AtFlags::empty());
                openat(&self.fd, tmp.as_str(), flags, mode)
            }
            r => r,
        }
        .map_err(|e| io("write", &tmp_path, e))?;
        if let Err(e) = std::fs::File::from(fd).write_all(contents) {
            let _ = unlinkat(&self.fd, tmp.as_str(), AtFlags::empty());
            return Err(Error::io("write", &tmp_path, e));
        }
        crate::crash::point(&format!("write:{name}"));
        renameat(&self.fd, tmp.as_str(), &self.fd, name).map_err(|e| {
            let _ = unlinkat(&self.fd, tmp.as_str(), AtFlags::empty());
            io("replace", &self.path.join(name), e)
        })
    }

    /// Appends `text` to `name`, whose size was `at` before (see [`super::append_at`]); None:
    /// appended as is. Never through a link.
    pub fn append_at(&self, name: &str, at: Option<u64>, text: &str) -> Result<()> {
        let path = self.path.join(name);
        let len = match statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => return Err(linked_file(&path)),
            Ok(st) => st.st_size as u64,
            Err(Errno::NOENT) => 0,
            Err(e) => return Err(io("stat", &path, e)),
        };
        let open = |flags: OFlags| {
            openat(&self.fd, name, flags | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::from_bits_truncate(0o666))
                .map(std::fs::File::from)
                .map_err(|e| if e == Errno::LOOP { linked_file(&path) } else { io("open", &path, e) })
        };
        if let Some(at) = at {
            if len >= at + text.len() as u64 && len > at {
                return Ok(());
            }
            if len > at {
                open(OFlags::WRONLY)?.set_len(at).map_err(|e| Error::io("cut the torn end of", &path, e))?;
            }
        }
        open(OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE)?
            .write_all(text.as_bytes())
            .map_err(|e| Error::io("append to", &path, e))
    }

    /// Opens `name` to append to, creating it (0666 less the umask) — never through a link.
    pub fn open_append(&self, name: &str) -> Result<std::fs::File> {
        let path = self.path.join(name);
        let flags = OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        openat(&self.fd, name, flags, Mode::from_bits_truncate(0o666)).map(std::fs::File::from).map_err(|e| {
            if e == Errno::LOOP {
                linked_file(&path)
            } else {
                io("open", &path, e)
            }
        })
    }

    /// Moves entry `name` of this folder into `to` under the same name: the entry itself (a
    /// link moves as a link, a folder with what it holds).
    pub fn move_to(&self, name: &str, to: &Folder) -> Result<()> {
        renameat(&self.fd, name, &to.fd, name).map_err(|e| io("move", &self.path.join(name), e))
    }
}

/// Most entries (files and folders) [`Folder::copy_into`] takes from one folder tree.
pub const COPY_MAX_ENTRIES: usize = 10_000;
/// How deep [`Folder::copy_into`] goes below the folder it copies.
const COPY_MAX_DEPTH: usize = 32;

/// What [`Folder::copy_into`] did.
#[derive(Debug, Default)]
pub struct Copied {
    /// Regular files copied.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// What was left out, by path: symbolic links (never followed), FIFOs, sockets and devices,
    /// and names that are not UTF-8.
    pub skipped: Vec<Utf8PathBuf>,
}

impl Folder {
    /// Copies what this folder holds into `to`, which must hold none of its names: each folder
    /// entered with `O_NOFOLLOW`, each regular file read through an `O_NOFOLLOW` descriptor and
    /// written to a file created exclusively (never through a link, never over a file) with its
    /// permission bits, then fsynced. A symbolic link — to a file or a folder — is never
    /// followed nor copied: it is left out and named in [`Copied::skipped`], as is anything
    /// that is neither a file nor a folder. More than [`COPY_MAX_ENTRIES`] entries, or folders
    /// nested deeper than 32, is refused (nothing is removed of what was copied so far: copy
    /// into a folder of its own and drop it on an error).
    pub fn copy_into(&self, to: &Folder) -> Result<Copied> {
        let mut done = Copied::default();
        let mut entries = 0;
        self.copy_level(to, 0, &mut entries, &mut done)?;
        Ok(done)
    }

    fn copy_level(&self, to: &Folder, depth: usize, entries: &mut usize, done: &mut Copied) -> Result<()> {
        if depth > COPY_MAX_DEPTH {
            return Err(Error::data(format!("{}: folders nested more than {COPY_MAX_DEPTH} deep", self.path))
                .with_hint("flatten the folder; agentloop copies at most that depth"));
        }
        let mut names = Vec::new();
        for entry in rustix::fs::Dir::read_from(&self.fd).map_err(|e| io("list", &self.path, e))? {
            let entry = entry.map_err(|e| io("list", &self.path, e))?;
            let raw = entry.file_name().to_bytes();
            if raw == b"." || raw == b".." {
                continue;
            }
            match std::str::from_utf8(raw) {
                Ok(name) => names.push(name.to_string()),
                Err(_) => done.skipped.push(self.path.join(String::from_utf8_lossy(raw).as_ref())),
            }
        }
        names.sort();
        for name in names {
            *entries += 1;
            if *entries > COPY_MAX_ENTRIES {
                return Err(Error::data(format!("{} holds more than {COPY_MAX_ENTRIES} entries", self.path))
                    .with_hint("prune it; agentloop copies at most that many"));
            }
            let path = self.path.join(&name);
            let st = statat(&self.fd, name.as_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(|e| io("stat", &path, e))?;
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => {
                    // A folder swapped for a link since the stat is refused here (O_NOFOLLOW).
                    let Some(from) = self.sub(&name, false, false)? else { continue };
                    let into = to
                        .sub(&name, true, false)?
                        .ok_or_else(|| Error::failure(format!("cannot create folder {}", to.path.join(&name))))?;
                    from.copy_level(&into, depth + 1, entries, done)?;
                }
                FileType::RegularFile => {
                    done.bytes += self.copy_file(&name, to)?;
                    done.files += 1;
                }
                _ => done.skipped.push(path),
            }
        }
        Ok(())
    }

    /// Copies regular file `name` into `to`; returns its size. A file swapped for a link or a
    /// FIFO since it was listed is refused, never followed or waited on.
    fn copy_file(&self, name: &str, to: &Folder) -> Result<u64> {
        use std::os::unix::fs::PermissionsExt;
        let path = self.path.join(name);
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = openat(&self.fd, name, flags, Mode::empty()).map_err(|e| {
            if e == Errno::LOOP {
                linked_file(&path)
            } else {
                io("open", &path, e)
            }
        })?;
        let mut from = std::fs::File::from(fd);
        let meta = from.metadata().map_err(|e| Error::io("stat", &path, e))?;
        if !meta.is_file() {
            return Err(Error::data(format!("{path} is not a regular file")));
        }
        let dest = to.path.join(name);
        let mode = Mode::from_bits_truncate(meta.permissions().mode() & 0o777);
        let out = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut into = std::fs::File::from(openat(&to.fd, name, out, mode).map_err(|e| io("create", &dest, e))?);
        let n = std::io::copy(&mut from, &mut into).map_err(|e| Error::io("copy", &path, e))?;
        into.sync_all().map_err(|e| Error::io("sync", &dest, e))?;
        Ok(n)
    }

    /// fsyncs the folder (its entries: a file created or renamed in it survives a power loss).
    pub fn sync(&self) -> Result<()> {
        rustix::fs::fsync(&self.fd).map_err(|e| io("sync", &self.path, e))
    }
}

/// Reads `rel` (plain components) below `root` with no link anywhere below `root`, the file
/// included: a regular file of at most `cap` bytes; None when it or a folder on the way does not
/// exist. A workspace's own store read this way cannot be another project's through a link.
/// Why [`Folder::read_file`] read nothing.
#[derive(Debug)]
pub enum Unreadable {
    /// The file, or a folder on the way to it, is a symbolic link.
    Link,
    /// A FIFO, a device, a folder: not a regular file.
    NotRegular,
    /// Larger than the cap: its size.
    TooLarge(u64),
    /// A folder on the way could not be entered: a link (exit 8), or not a folder.
    Folder(Error),
    Io(Error),
}

/// [`read_no_link`], with why a file was not read as a value.
pub fn read_file_no_link(
    root: &Utf8Path,
    rel: &Utf8Path,
    cap: u64,
) -> std::result::Result<Option<Vec<u8>>, Unreadable> {
    let Some(name) = rel.file_name() else { return Err(Unreadable::NotRegular) };
    match Folder::open_to_read(root, rel.parent().unwrap_or(Utf8Path::new(""))) {
        Ok(Some(folder)) => folder.read_file(name, cap),
        Ok(None) => Ok(None),
        Err(e) => Err(Unreadable::Folder(e)),
    }
}

pub fn read_no_link(root: &Utf8Path, rel: &Utf8Path, cap: u64) -> Result<Option<Vec<u8>>> {
    let name = rel.file_name().ok_or_else(|| Error::data(format!("{root}/{rel} names no file")))?;
    match Folder::open_to_read(root, rel.parent().unwrap_or(Utf8Path::new("")))? {
        Some(folder) => folder.read(name, cap),
        None => Ok(None),
    }
}

/// Writes `contents` to `rel` (a plain path) below `root` atomically, creating its folders;
/// a folder on the way that is a symbolic link is refused (see [`Folder`]).
pub fn write_in(root: &Utf8Path, rel: &Utf8Path, contents: &[u8]) -> Result<()> {
    let name = rel.file_name().ok_or_else(|| Error::data(format!("{root}/{rel} names no file")))?;
    let folder = Folder::create(root, rel.parent().unwrap_or(Utf8Path::new("")))?;
    folder.write_atomic(name, contents)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    /// A symlinked folder on the way is refused and nothing is written where it points; a
    /// symlinked file is replaced as a link, never written through; real folders are created.
    #[test]
    fn a_folder_is_entered_only_when_it_is_not_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let base = Utf8Path::from_path(dir.path()).unwrap();
        let (root, outside) = (base.join("ws"), base.join("outside"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("victim"), "keep").unwrap();

        write_in(&root, Utf8Path::new("runs/1/state.json"), b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(root.join("runs/1/state.json")).unwrap(), "{}");

        std::os::unix::fs::symlink(&outside, root.join("artifacts")).unwrap();
        let e = write_in(&root, Utf8Path::new("artifacts/out.txt"), b"x").unwrap_err();
        assert_eq!(e.kind, agentloop_types::error::Kind::Data);
        assert!(e.message.contains("artifacts/ is a symbolic link"), "{}", e.message);
        assert!(!outside.join("out.txt").exists());
        assert!(Folder::open(&root, Utf8Path::new("artifacts"), false).is_err());

        std::os::unix::fs::symlink(outside.join("victim"), root.join("runs/1/plan.md")).unwrap();
        let runs1 = Folder::open(&root, Utf8Path::new("runs/1"), false).unwrap().unwrap();
        let e = runs1.append_at("plan.md", None, "more").unwrap_err();
        assert!(e.message.contains("plan.md is a symbolic link"), "{}", e.message);
        runs1.write_atomic("plan.md", b"plan").unwrap();
        assert_eq!(std::fs::read_to_string(outside.join("victim")).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(root.join("runs/1/plan.md")).unwrap(), "plan");
        runs1.append_at("plan.md", Some(4), "\nmore").unwrap();
        runs1.append_at("plan.md", Some(4), "\nmore").unwrap();
        assert_eq!(std::fs::read_to_string(root.join("runs/1/plan.md")).unwrap(), "plan\nmore");
        assert!(Folder::open(&root, Utf8Path::new("runs/2"), false).unwrap().is_none());
    }

    /// A copy takes files and folders with their bytes and modes, and leaves links out — to a
    /// file or a folder, inside or outside — never following one.
    #[test]
    fn a_copy_takes_files_and_folders_and_never_follows_a_link() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let base = Utf8Path::from_path(dir.path()).unwrap();
        let (root, outside) = (base.join("ws"), base.join("outside"));
        std::fs::create_dir_all(root.join("from/deep/er")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "hunter2").unwrap();
        std::fs::write(root.join("from/seen.json"), r#"{"seen": ["a"]}"#).unwrap();
        std::fs::write(root.join("from/deep/er/tool.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(root.join("from/deep/er/tool.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), root.join("from/secret")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("from/deep/out")).unwrap();
        let from = Folder::open_to_read(&root, Utf8Path::new("from")).unwrap().unwrap();
        let to = Folder::create(&root, Utf8Path::new("to")).unwrap();
        let done = from.copy_into(&to).unwrap();
        assert_eq!((done.files, done.bytes), (2, 15 + 10));
        assert_eq!(done.skipped, vec![root.join("from/deep/out"), root.join("from/secret")]);
        assert_eq!(std::fs::read_to_string(root.join("to/seen.json")).unwrap(), r#"{"seen": ["a"]}"#);
        let mode = std::fs::metadata(root.join("to/deep/er/tool.sh")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o750);
        assert!(!root.join("to/secret").exists() && std::fs::symlink_metadata(root.join("to/secret")).is_err());
        assert!(std::fs::symlink_metadata(root.join("to/deep/out")).is_err());
        // Never over a file already there: a link planted in the target is not written through.
        let again = Folder::create(&root, Utf8Path::new("again")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), root.join("again/seen.json")).unwrap();
        assert!(from.copy_into(&again).is_err());
        assert_eq!(std::fs::read_to_string(outside.join("secret")).unwrap(), "hunter2");
        // A linked folder is refused when it is the one asked for.
        std::os::unix::fs::symlink(&outside, root.join("linked")).unwrap();
        assert!(Folder::open_to_read(&root, Utf8Path::new("linked")).is_err());
    }
}
