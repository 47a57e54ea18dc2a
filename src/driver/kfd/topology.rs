//! KFD topology as sysfs shows it (`/sys/devices/virtual/kfd/kfd/topology/nodes/N/{gpu_id,
//! name,properties}`), read through a [`Driver`], and the per-node queue-buffer sizes KFD computes
//! (`kfd_queue_ctx_save_restore_size` in `kfd_queue.c`), which Linux >= 6.12 requires
//! CREATE_QUEUE to match exactly.
//!
//! Not guaranteed: only the `properties` keys listed on [`NodeProperties`] accessors are
//! interpreted; everything else is kept as parsed integers.

use indexmap::IndexMap;

use crate::driver::api::Driver;
use crate::{bail, Result};

/// The sysfs directory holding one sub-directory per topology node.
pub const KFD_TOPOLOGY_NODES: &str = "/sys/devices/virtual/kfd/kfd/topology/nodes";

/// A node's `properties` file: `name value` lines, every value an integer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeProperties {
    values: IndexMap<String, u64>,
}

impl NodeProperties {
    /// Parse `name value` lines (blank lines ignored).
    pub fn parse(text: &str) -> Result<NodeProperties> {
        let mut values = IndexMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let mut it = line.split_whitespace();
            let (Some(k), Some(v), None) = (it.next(), it.next(), it.next()) else {
                bail!(
                    Device,
                    "topology properties line {}: expected `name value`, got {line:?}",
                    i + 1
                );
            };
            let Ok(v) = v.parse::<u64>() else {
                bail!(
                    Device,
                    "topology properties line {}: {k} value {v:?} is not an integer",
                    i + 1
                );
            };
            values.insert(k.to_string(), v);
        }
        Ok(NodeProperties { values })
    }

    /// A value, if present.
    pub fn get(&self, key: &str) -> Option<u64> {
        self.values.get(key).copied()
    }

    /// A value that must be present.
    pub fn require(&self, key: &str) -> Result<u64> {
        match self.get(key) {
            Some(v) => Ok(v),
            None => bail!(Device, "topology properties: missing `{key}`"),
        }
    }

    /// All `(name, value)` pairs in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.values.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// `gfx_target_version`, e.g. 110000 for gfx1100.
    pub fn gfx_target_version(&self) -> Result<u32> {
        Ok(self.require("gfx_target_version")? as u32)
    }

    /// The target name: `gfx{major}{minor:x}{stepping:x}` (90010 -> gfx90a, 110000 -> gfx1100).
    pub fn gfx_name(&self) -> Result<String> {
        Ok(gfx_name(self.gfx_target_version()?))
    }

    /// `drm_render_minor`: the render node is `/dev/dri/renderD<minor>`.
    pub fn drm_render_minor(&self) -> Result<u32> {
        Ok(self.require("drm_render_minor")? as u32)
    }

    /// `num_xcc` (absent on older kernels: 1).
    pub fn num_xcc(&self) -> u32 {
        self.get("num_xcc").filter(|&n| n > 0).unwrap_or(1) as u32
    }
}

/// `gfx{major}{minor:x}{stepping:x}` of a `gfx_target_version`.
pub fn gfx_name(v: u32) -> String {
    format!("gfx{}{:x}{:x}", v / 10000, (v / 100) % 100, v % 100)
}

/// One GPU node of the topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KfdNode {
    /// The node number (directory name).
    pub node: u32,
    /// The `gpu_id` KFD ioctls take.
    pub gpu_id: u32,
    /// The `name` file's content (e.g. `gfx1100`), trimmed.
    pub name: String,
    pub props: NodeProperties,
}

/// The GPU nodes (non-zero `gpu_id`) sorted by node number, as tinygrad enumerates `AMD:n`.
pub fn read_topology(drv: &dyn Driver) -> Result<Vec<KfdNode>> {
    let mut nodes = Vec::new();
    for entry in drv.list_dir(KFD_TOPOLOGY_NODES)? {
        let Ok(node) = entry.parse::<u32>() else {
            continue;
        };
        let dir = format!("{KFD_TOPOLOGY_NODES}/{node}");
        let gpu_text = drv.read_file(&format!("{dir}/gpu_id"))?;
        let Ok(gpu_id) = gpu_text.trim().parse::<u32>() else {
            bail!(
                Device,
                "{dir}/gpu_id: {:?} is not an integer",
                gpu_text.trim()
            );
        };
        if gpu_id == 0 {
            continue;
        }
        let props = NodeProperties::parse(&drv.read_file(&format!("{dir}/properties"))?)?;
        let name = drv
            .read_file(&format!("{dir}/name"))
            .unwrap_or_default()
            .trim()
            .to_string();
        nodes.push(KfdNode {
            node,
            gpu_id,
            name,
            props,
        });
    }
    nodes.sort_by_key(|n| n.node);
    Ok(nodes)
}

/// The queue-buffer sizes of a node (bytes), as `kfd_queue.c` computes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueBufferSizes {
    /// `eop_buffer_size` CREATE_QUEUE must pass for compute queues (and the EOP buffer's size).
    pub eop_buffer_size: u64,
    /// `ctl_stack_size` CREATE_QUEUE must pass.
    pub ctl_stack_size: u32,
    /// `ctx_save_restore_size` CREATE_QUEUE must pass (control stack + workgroup data).
    pub cwsr_size: u32,
    /// Debugger memory per XCC that follows the CWSR area.
    pub debug_memory_size: u32,
    /// The size of the CWSR buffer itself: `align((cwsr + debug) * num_xcc, 4096)`.
    pub cwsr_total_size: u64,
}

const PAGE: u64 = 4096;

fn align_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

fn vgpr_size_per_cu(gfxv: u32) -> u64 {
    if gfxv / 100 * 100 == 90400 || gfxv == 90010 || gfxv == 90008 || gfxv == 90500 {
        0x80000
    } else if matches!(gfxv, 110000 | 110001 | 120000 | 120001) {
        0x60000
    } else {
        0x40000
    }
}

/// The queue-buffer sizes for a node. When the kernel prints `ctl_stack_size` / `cwsr_size` in
/// `properties` (newer kernels), those values win over the formula.
pub fn queue_buffer_sizes(props: &NodeProperties) -> Result<QueueBufferSizes> {
    let gfxv = props.gfx_target_version()?;
    if gfxv < 80001 {
        bail!(
            Device,
            "gfx_target_version {gfxv}: no CWSR before gfx8 (Carrizo)"
        );
    }
    let (simd_count, simd_per_cu) = (props.require("simd_count")?, props.require("simd_per_cu")?);
    let num_xcc = props.num_xcc() as u64;
    if simd_per_cu == 0 {
        bail!(Device, "topology properties: simd_per_cu is 0");
    }
    let cu_num = simd_count / simd_per_cu / num_xcc;
    let wave_num = if gfxv < 100100 {
        let spe = props.require("simd_arrays_per_engine")?.max(1);
        (cu_num * 40).min(props.require("array_count")? / spe * 512)
    } else {
        cu_num * 32
    };
    let lds = if gfxv == 90500 {
        props.require("lds_size_in_kb")? << 10
    } else {
        0x10000
    };
    let wg_data_size = align_up(
        cu_num * (vgpr_size_per_cu(gfxv) + 0x4000 + lds + 0x1000),
        PAGE,
    );
    let per_wave = if gfxv >= 100100 { 12 } else { 8 };
    let mut ctl_stack_size = align_up(40 + wave_num * per_wave + 8, PAGE);
    if gfxv / 10000 * 10000 == 100000 {
        ctl_stack_size = ctl_stack_size.min(0x7000);
    }
    let ctl_stack_size = props.get("ctl_stack_size").unwrap_or(ctl_stack_size);
    let cwsr_size = props
        .get("cwsr_size")
        .unwrap_or(ctl_stack_size + wg_data_size);
    let debug_memory_size = align_up(wave_num * 32, 64);
    let cwsr_total_size = align_up((cwsr_size + debug_memory_size) * num_xcc, PAGE);
    let eop_buffer_size = if gfxv == 80002 { 0x8000 } else { 4096 };
    let (Ok(ctl), Ok(cwsr), Ok(dbg)) = (
        u32::try_from(ctl_stack_size),
        u32::try_from(cwsr_size),
        u32::try_from(debug_memory_size),
    ) else {
        bail!(
            Device,
            "queue buffer sizes overflow u32 for {simd_count} SIMDs"
        );
    };
    Ok(QueueBufferSizes {
        eop_buffer_size,
        ctl_stack_size: ctl,
        cwsr_size: cwsr,
        debug_memory_size: dbg,
        cwsr_total_size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(text: &str) -> NodeProperties {
        NodeProperties::parse(text).unwrap()
    }

    #[test]
    fn gfx_names() {
        assert_eq!(gfx_name(90010), "gfx90a");
        assert_eq!(gfx_name(90402), "gfx942");
        assert_eq!(gfx_name(100300), "gfx1030");
        assert_eq!(gfx_name(110000), "gfx1100");
        assert_eq!(gfx_name(120001), "gfx1201");
    }

    #[test]
    fn cwsr_sizes_96cu_gfx1100() {
        // 7900XTX: 96 CUs, wave32. wg_data = 96 * 0x75000; ctl = align(40 + 3072*12 + 8) = 0xA000
        // (so tinygrad 0.9.x's hardcoded 0x2C02000 is exactly the CWSR buffer size, but passing
        // it as ctx_save_restore_size with ctl_stack_size 0 fails the >= 6.12 checks).
        let p = props("simd_count 192\nsimd_per_cu 2\narray_count 12\nsimd_arrays_per_engine 2\ngfx_target_version 110000\nnum_xcc 1\n");
        let s = queue_buffer_sizes(&p).unwrap();
        assert_eq!(s.ctl_stack_size, 0xA000);
        assert_eq!(s.cwsr_size, 0x2BEA000);
        assert_eq!(s.debug_memory_size, 0x18000);
        assert_eq!(s.cwsr_total_size, 0x2C02000);
        assert_eq!(s.eop_buffer_size, 0x1000);
    }

    #[test]
    fn cwsr_sizes_gfx10_cap_and_gfx9_waves() {
        // gfx1030, 80 CUs: ctl = align(40 + 2560*12 + 8) = 0x8000, capped to 0x7000 on gfx10.
        let p = props("simd_count 160\nsimd_per_cu 2\narray_count 8\nsimd_arrays_per_engine 2\ngfx_target_version 100300\n");
        let s = queue_buffer_sizes(&p).unwrap();
        assert_eq!(s.ctl_stack_size, 0x7000);
        assert_eq!(s.cwsr_size, 0x7000 + 80 * 0x55000);
        // gfx90a, 110 CUs: waves = min(110*40, 8/1*512) = 4096; ctl = align(40 + 4096*8 + 8) = 0x9000.
        let p = props("simd_count 440\nsimd_per_cu 4\narray_count 8\nsimd_arrays_per_engine 1\ngfx_target_version 90010\n");
        let s = queue_buffer_sizes(&p).unwrap();
        assert_eq!(s.ctl_stack_size, 0x9000);
        assert_eq!(s.cwsr_size, 0x9000 + 110 * 0x95000);
        assert_eq!(s.debug_memory_size, 4096 * 32);
    }

    #[test]
    fn printed_sizes_win_and_bad_lines_fail() {
        let p = props("simd_count 192\nsimd_per_cu 2\ngfx_target_version 110000\nctl_stack_size 4096\ncwsr_size 8192\n");
        let s = queue_buffer_sizes(&p).unwrap();
        assert_eq!((s.ctl_stack_size, s.cwsr_size), (4096, 8192));
        assert!(NodeProperties::parse("simd_count x").is_err());
        assert!(NodeProperties::parse("a 1 2").is_err());
        assert!(props("simd_count 2").require("gfx_target_version").is_err());
    }
}
