//! How the software GPUs (AMD and NVIDIA) touch memory: the [`GpuMemory`] trait (implemented
//! over the emulated KFD's and RM's GPU-VM mapping tables) and [`SparseMemory`], a `Vec`-backed
//! sparse VA map for tests and for emulators that keep device memory apart from host memory.
//!
//! Not guaranteed: accesses that span two adjacent mappings are refused by `SparseMemory` (one
//! access, one mapping); the emulated KFD may allow them.

use crate::{bail, ensure, Result};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// GPU virtual memory as the software GPU sees it. Every access names its VA; an access outside
/// the GPU-mapped ranges is an error (the queue doing it faults).
///
/// Implementations should make aligned 4- and 8-byte accesses single stores/loads, as the GPU's
/// signal writes and polls are (the provided `*_u32`/`*_u64` methods may be overridden with
/// atomic accesses for that).
pub trait GpuMemory: Send + Sync {
    /// Reads `out.len()` bytes at `va`.
    fn read(&self, va: u64, out: &mut [u8]) -> Result<()>;
    /// Writes `data` at `va`.
    fn write(&self, va: u64, data: &[u8]) -> Result<()>;

    /// Reads a little-endian u32.
    fn read_u32(&self, va: u64) -> Result<u32> {
        let mut b = [0u8; 4];
        self.read(va, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    /// Writes a little-endian u32.
    fn write_u32(&self, va: u64, v: u32) -> Result<()> {
        self.write(va, &v.to_le_bytes())
    }
    /// Reads a little-endian u64.
    fn read_u64(&self, va: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(va, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    /// Writes a little-endian u64.
    fn write_u64(&self, va: u64, v: u64) -> Result<()> {
        self.write(va, &v.to_le_bytes())
    }
    /// Reads `out.len()` dwords at `va`.
    fn read_dwords(&self, va: u64, out: &mut [u32]) -> Result<()> {
        let mut b = vec![0u8; out.len() * 4];
        self.read(va, &mut b)?;
        for (d, c) in out.iter_mut().zip(b.chunks_exact(4)) {
            *d = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        Ok(())
    }
    /// Writes dwords at `va`.
    fn write_dwords(&self, va: u64, data: &[u32]) -> Result<()> {
        let b: Vec<u8> = data.iter().flat_map(|d| d.to_le_bytes()).collect();
        self.write(va, &b)
    }
    /// Copies `len` bytes from `src` to `dst` (memmove semantics), in bounded chunks.
    fn copy(&self, dst: u64, src: u64, len: u64) -> Result<()> {
        const CHUNK: u64 = 1 << 20;
        let mut buf = vec![0u8; len.min(CHUNK) as usize];
        let overlap_fwd = dst > src && dst < src.saturating_add(len);
        let mut done = 0;
        while done < len {
            let n = (len - done).min(CHUNK);
            // Copy back to front when the destination overlaps the source from above.
            let off = if overlap_fwd { len - done - n } else { done };
            let chunk = &mut buf[..n as usize];
            self.read(src + off, chunk)?;
            self.write(dst + off, chunk)?;
            done += n;
        }
        Ok(())
    }
}

/// A sparse VA map of zero-initialised `Vec<u8>` regions.
#[derive(Debug, Default)]
pub struct SparseMemory {
    regions: Mutex<BTreeMap<u64, Vec<u8>>>,
}

impl SparseMemory {
    /// An empty map.
    pub fn new() -> SparseMemory {
        SparseMemory::default()
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, BTreeMap<u64, Vec<u8>>>> {
        self.regions
            .lock()
            .map_err(|_| crate::Error::Internal("SparseMemory: lock poisoned".into()))
    }

    /// Maps `size` zeroed bytes at `va`; overlapping an existing mapping is an error.
    pub fn map(&self, va: u64, size: u64) -> Result<()> {
        ensure!(
            size > 0,
            InvalidArgument,
            "SparseMemory::map: zero-sized mapping at {va:#x}"
        );
        let end = va.saturating_add(size);
        let mut r = self.lock()?;
        let before = r
            .range(..end)
            .next_back()
            .map(|(s, v)| (*s, *s + v.len() as u64));
        if let Some((s, e)) = before {
            ensure!(
                e <= va,
                InvalidArgument,
                "SparseMemory::map: {va:#x}+{size:#x} overlaps {s:#x}..{e:#x}"
            );
        }
        let Ok(n) = usize::try_from(size) else {
            bail!(
                InvalidArgument,
                "SparseMemory::map: size {size:#x} too large"
            )
        };
        r.insert(va, vec![0; n]);
        Ok(())
    }

    /// Unmaps the mapping starting at `va`.
    pub fn unmap(&self, va: u64) -> Result<()> {
        match self.lock()?.remove(&va) {
            Some(_) => Ok(()),
            None => bail!(
                InvalidArgument,
                "SparseMemory::unmap: no mapping starts at {va:#x}"
            ),
        }
    }

    fn with_region<T>(&self, va: u64, len: usize, f: impl FnOnce(&mut [u8]) -> T) -> Result<T> {
        let mut r = self.lock()?;
        let hit = r.range_mut(..=va).next_back();
        if let Some((start, v)) = hit {
            let off = va - *start;
            if let Some(end) = off.checked_add(len as u64).filter(|e| *e <= v.len() as u64) {
                return Ok(f(&mut v[off as usize..end as usize]));
            }
        }
        bail!(
            Fault,
            "GPU access of {len} bytes at {va:#x} is outside the GPU-mapped ranges"
        )
    }
}

impl GpuMemory for SparseMemory {
    fn read(&self, va: u64, out: &mut [u8]) -> Result<()> {
        self.with_region(va, out.len(), |m| out.copy_from_slice(m))
    }
    fn write(&self, va: u64, data: &[u8]) -> Result<()> {
        self.with_region(va, data.len(), |m| m.copy_from_slice(data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_memory_maps_reads_writes_and_refuses_outside() {
        let m = SparseMemory::new();
        m.map(0x1000, 0x100).unwrap();
        m.map(0x2000, 0x100).unwrap();
        assert!(m.map(0x10F0, 0x20).is_err(), "overlap");
        assert!(m.map(0x0F80, 0x100).is_err(), "overlap from below");
        m.write_u64(0x10F8, 0x1122_3344_5566_7788).unwrap();
        assert_eq!(m.read_u32(0x10FC).unwrap(), 0x1122_3344);
        let e = m.read_u32(0x10FE).unwrap_err();
        assert!(
            e.message().contains("0x10fe") && e.message().contains("outside"),
            "{e}"
        );
        assert!(m.write_u32(0x3000, 1).is_err());
        m.write_dwords(0x2000, &[1, 2, 3, 4]).unwrap();
        m.copy(0x2004, 0x2000, 12).unwrap(); // overlapping, forward
        let mut out = [0u32; 4];
        m.read_dwords(0x2000, &mut out).unwrap();
        assert_eq!(out, [1, 1, 2, 3]);
        m.copy(0x1000, 0x2000, 16).unwrap();
        m.read_dwords(0x1000, &mut out).unwrap();
        assert_eq!(out, [1, 1, 2, 3]);
        assert!(m.copy(0x1000, 0x2000, 0x200).is_err());
        m.unmap(0x1000).unwrap();
        assert!(m.read_u32(0x1000).is_err());
        assert!(m.unmap(0x1000).is_err());
    }
}
