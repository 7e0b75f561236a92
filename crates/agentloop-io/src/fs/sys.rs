//! The raw open flags and error numbers that std speaks (`OpenOptionsExt::custom_flags` takes
//! them, `io::Error::raw_os_error` returns them), taken from rustix, agentloop's one crate for
//! POSIX calls, so nothing else names libc. They are the kernel's own values.

use rustix::fs::OFlags;
use rustix::io::Errno;

// `custom_flags` takes a C `int`; every flag here fits in its positive range.
pub const O_NOFOLLOW: i32 = OFlags::NOFOLLOW.bits() as i32;
pub const O_NONBLOCK: i32 = OFlags::NONBLOCK.bits() as i32;
pub const O_DIRECTORY: i32 = OFlags::DIRECTORY.bits() as i32;
pub const O_CLOEXEC: i32 = OFlags::CLOEXEC.bits() as i32;

pub const ENOENT: i32 = Errno::NOENT.raw_os_error();
pub const ENOTDIR: i32 = Errno::NOTDIR.raw_os_error();
pub const ELOOP: i32 = Errno::LOOP.raw_os_error();
pub const ENXIO: i32 = Errno::NXIO.raw_os_error();
pub const EXDEV: i32 = Errno::XDEV.raw_os_error();
