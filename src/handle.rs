//! Event mode (placeholder until the event issue lands).
use crate::cli::Global;
use crate::error::{Error, Result};
pub fn main(_g: &Global) -> Result<u8> {
    Err(Error::failure("handle is not built yet"))
}
