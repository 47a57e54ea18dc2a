//! [`MappedFile`]: a read-only memory map of a whole file (memmap2), the one place a file's
//! bytes are seen through a mapping. Used by `nn::state` to read safetensors files without
//! copying them through a buffer first.
//!
//! Not guaranteed: the file must not be truncated or changed by anyone while it is mapped (a
//! truncated mapped page raises SIGBUS, as with any mapping); callers keep the map only while
//! they copy out of it.

use std::fs::File;
use std::path::Path;

use crate::{bail, Error, Result};

/// A file mapped read-only and private (copy-on-write, never written).
pub struct MappedFile {
    map: memmap2::Mmap,
}

impl MappedFile {
    /// Map `path`; an empty file is an error (there is nothing to map).
    pub fn open(path: &Path) -> Result<MappedFile> {
        let file =
            File::open(path).map_err(|e| Error::Io(format!("open {}: {e}", path.display())))?;
        let len = file
            .metadata()
            .map_err(|e| Error::Io(format!("stat {}: {e}", path.display())))?
            .len();
        if len == 0 {
            bail!(InvalidArgument, "{}: the file is empty", path.display());
        }
        // Concurrent truncation by another process is the hazard every file mapping has
        // (documented in the module's "Not guaranteed").
        // SAFETY: a private read-only map of a file opened here and never handed out: no Rust
        // reference can observe a write through it, and it is the only view in this process.
        let map = unsafe { memmap2::MmapOptions::new().map_copy_read_only(&file) }
            .map_err(|e| Error::Io(format!("mmap {}: {e}", path.display())))?;
        Ok(MappedFile { map })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }
}
