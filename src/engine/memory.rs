//! The memory planner: tinygrad 0.9.1's `_internal_memory_planner` / `memory_planner`.
//!
//! Over a list of buffer lists (the buffers of each schedule item or JIT item, in execution
//! order), every buffer that is not allocated yet and not referenced by a live lazy buffer
//! (`lb_refcount == 0`: an intermediate nobody can read afterwards) is replaced: by a buffer of
//! the same (device, size, dtype) freed by an earlier item (one whose last appearance has
//! passed), or by a new one. View buffers are recreated over their base's replacement, at the
//! same offset. `NO_MEMORY_PLANNER=1` turns it off.
//!
//! Not guaranteed: the replacements are not allocated here (allocation happens when an item
//! runs); buffer options are not part of the reuse key (as in tinygrad, replacements have the
//! default options).

use std::collections::HashMap;

use indexmap::IndexMap;

use super::schedule::ScheduleItem;
use crate::device::{Buffer, BufferOptions, BufferRef};
use crate::dtype::DType;
use crate::helpers::{debug, getenv};
use crate::Result;

type FreeKey = (String, usize, DType);

/// The replacement of every plannable buffer of `buffers` (an empty map with
/// `NO_MEMORY_PLANNER=1`); `debug_prefix` starts the DEBUG line.
pub fn internal_memory_planner(
    buffers: &[&[BufferRef]],
    debug_prefix: &str,
) -> Result<IndexMap<BufferRef, BufferRef>> {
    let mut assigned: IndexMap<BufferRef, BufferRef> = IndexMap::new();
    if getenv("NO_MEMORY_PLANNER", 0) != 0 {
        return Ok(assigned);
    }
    let mut last_appearance: HashMap<&BufferRef, usize> = HashMap::new();
    for (i, u) in buffers.iter().enumerate() {
        for buf in u.iter() {
            last_appearance.insert(buf, i);
        }
    }
    let mut local_cache: HashMap<FreeKey, Vec<BufferRef>> = HashMap::new();
    for (i, u) in buffers.iter().enumerate() {
        for buf in u.iter() {
            if buf.is_allocated() || buf.lb_refcount() > 0 {
                continue;
            }
            if buf.is_view() {
                if !assigned.contains_key(buf) {
                    let base = buf.base();
                    let new_base = assigned.get(&base).cloned().unwrap_or(base);
                    let view = new_base.view(buf.size(), buf.dtype(), buf.offset())?;
                    assigned.insert(buf.clone(), view);
                }
                continue;
            }
            let key: FreeKey = (buf.device().to_string(), buf.size(), buf.dtype());
            let free = local_cache.entry(key).or_default();
            if !assigned.contains_key(buf) {
                let replacement = free.pop().unwrap_or_else(|| {
                    Buffer::new(
                        buf.device(),
                        buf.size(),
                        buf.dtype(),
                        BufferOptions::default(),
                    )
                });
                assigned.insert(buf.clone(), replacement);
            }
            if last_appearance.get(buf) == Some(&i) {
                if let Some(r) = assigned.get(buf) {
                    if !free.contains(r) {
                        free.push(r.clone());
                    }
                }
            }
        }
    }
    report(&assigned, debug_prefix);
    Ok(assigned)
}

fn report(assigned: &IndexMap<BufferRef, BufferRef>, debug_prefix: &str) {
    if debug() < 1 {
        return;
    }
    let mut olds: Vec<&BufferRef> = Vec::new();
    let mut news: Vec<&BufferRef> = Vec::new();
    for (k, v) in assigned {
        if !olds.contains(&k) {
            olds.push(k);
        }
        if !news.contains(&v) {
            news.push(v);
        }
    }
    if olds.len() != news.len() {
        let mb = |xs: &[&BufferRef]| xs.iter().map(|b| b.nbytes()).sum::<usize>() as f64 / 1e6;
        println!(
            "{debug_prefix}memory reduced from {:.2} MB -> {:.2} MB, {} -> {} bufs",
            mb(&olds),
            mb(&news),
            olds.len(),
            news.len()
        );
    }
}

/// tinygrad's `memory_planner`: the schedule with every item's buffers replaced through
/// [`internal_memory_planner`].
pub fn memory_planner(schedule: Vec<ScheduleItem>) -> Result<Vec<ScheduleItem>> {
    let lists: Vec<&[BufferRef]> = schedule.iter().map(|si| si.bufs.as_slice()).collect();
    let assigned = internal_memory_planner(&lists, "")?;
    drop(lists);
    Ok(schedule
        .into_iter()
        .map(|mut si| {
            for b in si.bufs.iter_mut() {
                if let Some(r) = assigned.get(b) {
                    *b = r.clone();
                }
            }
            si
        })
        .collect())
}
