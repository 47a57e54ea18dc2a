//! The NV backend's GPU virtual address plan (tinygrad `_alloc_gpu_vaddr`): GPU VA = CPU VA for
//! everything the CPU maps, carved out of a low reserved window (below 1 TiB, because GP entries,
//! SEND_PCAS and Ampere semaphores hold 40-bit addresses), and a high region (from 1 TiB) for
//! GPU-only buffers. Both keep clear of the shader shared/local windows (Hopper: [4 GiB, 8 GiB);
//! Ampere/Ada: 0xFE000000..0x100000000).
//!
//! [`VaAllocator`] is a first-fit free list with merging; [`reserve_low_window`] maps a
//! `PROT_NONE` reservation at the first free candidate address (a hint, never `MAP_FIXED`, so
//! nothing already mapped is replaced) and checks where it landed.
//!
//! Not guaranteed: the high region is not reserved on the CPU side (no CPU mapping ever lands
//! there in practice: the kernel places mappings top-down from 128 TiB).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::driver::{Driver, MapFlags, Mapping, Prot};
use crate::{bail, ensure, Result};

/// Bytes of the low window one process reserves.
pub const LOW_WINDOW: u64 = 16 << 30;
/// First candidate address of the low window (tinygrad: 0x10_0000_0000).
pub const LOW_BASE: u64 = 0x10_0000_0000;
/// Everything the CPU maps must end below this (40-bit GPU addresses).
pub const LOW_LIMIT: u64 = 1 << 40;
/// GPU-only buffers live in [HIGH_BASE, HIGH_END).
pub const HIGH_BASE: u64 = 1 << 40;
/// End of the GPU-only region (below Blackwell's shader windows at 0x7293_0000_0000).
pub const HIGH_END: u64 = 0x7000_0000_0000;

/// First-fit VA allocator over one range.
#[derive(Debug)]
pub struct VaAllocator {
    name: &'static str,
    /// start -> end of each free range.
    free: BTreeMap<u64, u64>,
}

impl VaAllocator {
    /// All of `[base, end)` free.
    pub fn new(name: &'static str, base: u64, end: u64) -> VaAllocator {
        let mut free = BTreeMap::new();
        if end > base {
            free.insert(base, end);
        }
        VaAllocator { name, free }
    }

    /// `size` bytes aligned to `align` (a power of two).
    pub fn alloc(&mut self, size: u64, align: u64) -> Result<u64> {
        ensure!(
            size > 0 && align.is_power_of_two(),
            InvalidArgument,
            "{} VA: allocation of {size:#x} bytes aligned to {align:#x}",
            self.name
        );
        let found = self.free.iter().find_map(|(&s, &e)| {
            let a = s.checked_next_multiple_of(align)?;
            (a.checked_add(size)? <= e).then_some((s, e, a))
        });
        let Some((s, e, a)) = found else {
            bail!(
                Device,
                "{} VA space exhausted: no free {size:#x}-byte range aligned to {align:#x}",
                self.name
            )
        };
        self.free.remove(&s);
        if a > s {
            self.free.insert(s, a);
        }
        if a + size < e {
            self.free.insert(a + size, e);
        }
        Ok(a)
    }

    /// Return `[va, va + size)` (merged with free neighbours).
    pub fn free(&mut self, va: u64, size: u64) {
        let (mut s, mut e) = (va, va + size);
        if let Some((&ps, &pe)) = self.free.range(..=s).next_back() {
            if pe == s {
                self.free.remove(&ps);
                s = ps;
            }
        }
        if let Some(&ne) = self.free.get(&e) {
            self.free.remove(&e);
            e = ne;
        }
        self.free.insert(s, e);
    }

    /// Free bytes.
    pub fn free_bytes(&self) -> u64 {
        self.free.iter().map(|(s, e)| e - s).sum()
    }
}

/// Reserve a `PROT_NONE` low window of [`LOW_WINDOW`] bytes at the first free candidate
/// address below [`LOW_LIMIT`].
pub fn reserve_low_window(drv: &Arc<dyn Driver>) -> Result<Mapping> {
    let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::NORESERVE;
    let mut hint = LOW_BASE;
    while hint + LOW_WINDOW <= LOW_LIMIT {
        let m = Mapping::map(
            drv,
            Some(hint),
            LOW_WINDOW as usize,
            Prot::empty(),
            flags,
            None,
            0,
        )?;
        if m.addr() == hint {
            return Ok(m);
        }
        drop(m);
        hint += LOW_WINDOW;
    }
    bail!(
        Device,
        "no free {LOW_WINDOW:#x}-byte VA window between {LOW_BASE:#x} and {LOW_LIMIT:#x} for GPU-visible host mappings"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_alignment_and_merging() {
        let mut a = VaAllocator::new("test", 0x1000, 0x10_0000);
        let x = a.alloc(0x1000, 0x1000).unwrap();
        let y = a.alloc(0x3000, 0x1_0000).unwrap();
        assert_eq!((x, y), (0x1000, 0x1_0000));
        let z = a.alloc(0x1000, 0x1000).unwrap();
        assert_eq!(z, 0x2000, "the gap before the aligned block is reused");
        a.free(y, 0x3000);
        a.free(x, 0x1000);
        a.free(z, 0x1000);
        assert_eq!(a.free_bytes(), 0x10_0000 - 0x1000);
        assert_eq!(a.free.len(), 1, "fully merged: {:?}", a.free);
        assert!(a.alloc(0x10_0000, 0x1000).is_err());
        assert!(a.alloc(0, 0x1000).is_err());
        assert!(a.alloc(0x1000, 3).is_err());
    }
}
