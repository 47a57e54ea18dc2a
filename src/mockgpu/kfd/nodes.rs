//! The emulated topology: which GPUs exist, their `properties` text, and the virtual sysfs /
//! devfs tree a real process would see (`/sys/devices/virtual/kfd/kfd/topology/...`,
//! `/dev/kfd`, `/dev/dri/renderD<128+i>`).
//!
//! Node 0 is a CPU node (`gpu_id` 0); nodes 1..=N are GPUs of one architecture from [`GPU_SPECS`]
//! (knobs `MOCKGPU_COUNT`, default 2, and `MOCKGPU_ARCH`, default gfx1100).
//!
//! Not guaranteed: the spec values are shaped like the named boards (the gfx1100 row follows the
//! 7900XTX mock of tinygrad) but were not read from real hardware; `gpu_id`s are stable hashes of
//! the position, not KFD's hash of the properties.

use crate::driver::kfd::topology::{queue_buffer_sizes, NodeProperties, QueueBufferSizes};
use crate::{bail, Result};

/// One emulatable GPU architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuSpec {
    pub arch: &'static str,
    pub gfx_target_version: u32,
    pub simd_count: u32,
    pub simd_per_cu: u32,
    pub max_waves_per_simd: u32,
    pub lds_size_in_kb: u32,
    pub wave_front_size: u32,
    pub array_count: u32,
    pub simd_arrays_per_engine: u32,
    pub cu_per_simd_array: u32,
    pub max_slots_scratch_cu: u32,
    pub device_id: u32,
    pub num_sdma_engines: u32,
    pub num_sdma_xgmi_engines: u32,
    pub num_sdma_queues_per_engine: u32,
    pub num_cp_queues: u32,
    pub num_xcc: u32,
    /// VRAM bytes (`local_mem_size`; also the emulated VRAM budget).
    pub local_mem_size: u64,
    pub max_engine_clk_fclk: u32,
}

const GIB: u64 = 1 << 30;

/// The architectures the emulator can present.
pub const GPU_SPECS: &[GpuSpec] = &[
    // RX 7900 XTX (Navi 31): tinygrad's mock properties.
    GpuSpec {
        arch: "gfx1100",
        gfx_target_version: 110000,
        simd_count: 192,
        simd_per_cu: 2,
        max_waves_per_simd: 16,
        lds_size_in_kb: 64,
        wave_front_size: 32,
        array_count: 12,
        simd_arrays_per_engine: 2,
        cu_per_simd_array: 8,
        max_slots_scratch_cu: 32,
        device_id: 0x744C,
        num_sdma_engines: 2,
        num_sdma_xgmi_engines: 0,
        num_sdma_queues_per_engine: 6,
        num_cp_queues: 8,
        num_xcc: 1,
        local_mem_size: 24 * GIB,
        max_engine_clk_fclk: 2526,
    },
    // RX 6900 XT (Navi 21), 80 CUs.
    GpuSpec {
        arch: "gfx1030",
        gfx_target_version: 100300,
        simd_count: 160,
        simd_per_cu: 2,
        max_waves_per_simd: 16,
        lds_size_in_kb: 64,
        wave_front_size: 32,
        array_count: 8,
        simd_arrays_per_engine: 2,
        cu_per_simd_array: 10,
        max_slots_scratch_cu: 32,
        device_id: 0x73BF,
        num_sdma_engines: 4,
        num_sdma_xgmi_engines: 0,
        num_sdma_queues_per_engine: 8,
        num_cp_queues: 8,
        num_xcc: 1,
        local_mem_size: 16 * GIB,
        max_engine_clk_fclk: 2250,
    },
    // MI250X, one GCD: 110 CUs, wave64.
    GpuSpec {
        arch: "gfx90a",
        gfx_target_version: 90010,
        simd_count: 440,
        simd_per_cu: 4,
        max_waves_per_simd: 8,
        lds_size_in_kb: 64,
        wave_front_size: 64,
        array_count: 8,
        simd_arrays_per_engine: 1,
        cu_per_simd_array: 14,
        max_slots_scratch_cu: 32,
        device_id: 0x740C,
        num_sdma_engines: 2,
        num_sdma_xgmi_engines: 3,
        num_sdma_queues_per_engine: 8,
        num_cp_queues: 8,
        num_xcc: 1,
        local_mem_size: 64 * GIB,
        max_engine_clk_fclk: 1700,
    },
    // MI300X: 304 CUs over 8 XCCs, wave64.
    GpuSpec {
        arch: "gfx942",
        gfx_target_version: 90402,
        simd_count: 1216,
        simd_per_cu: 4,
        max_waves_per_simd: 8,
        lds_size_in_kb: 64,
        wave_front_size: 64,
        array_count: 32,
        simd_arrays_per_engine: 1,
        cu_per_simd_array: 10,
        max_slots_scratch_cu: 32,
        device_id: 0x74A1,
        num_sdma_engines: 2,
        num_sdma_xgmi_engines: 14,
        num_sdma_queues_per_engine: 8,
        num_cp_queues: 24,
        num_xcc: 8,
        local_mem_size: 192 * GIB,
        max_engine_clk_fclk: 2100,
    },
    // RX 9070 XT (Navi 48), 64 CUs.
    GpuSpec {
        arch: "gfx1201",
        gfx_target_version: 120001,
        simd_count: 128,
        simd_per_cu: 2,
        max_waves_per_simd: 16,
        lds_size_in_kb: 64,
        wave_front_size: 32,
        array_count: 8,
        simd_arrays_per_engine: 2,
        cu_per_simd_array: 8,
        max_slots_scratch_cu: 32,
        device_id: 0x7550,
        num_sdma_engines: 2,
        num_sdma_xgmi_engines: 0,
        num_sdma_queues_per_engine: 8,
        num_cp_queues: 8,
        num_xcc: 1,
        local_mem_size: 16 * GIB,
        max_engine_clk_fclk: 2970,
    },
];

/// The spec of an architecture name (`gfx1100`, ...).
pub fn gpu_spec(arch: &str) -> Result<&'static GpuSpec> {
    match GPU_SPECS.iter().find(|s| s.arch == arch) {
        Some(s) => Ok(s),
        None => {
            let known: Vec<&str> = GPU_SPECS.iter().map(|s| s.arch).collect();
            bail!(
                InvalidArgument,
                "MOCKGPU_ARCH={arch:?} is not emulated (known: {known:?})"
            )
        }
    }
}

/// The first render minor (`/dev/dri/renderD128`).
pub const RENDER_MINOR_BASE: u32 = 128;

/// An emulated GPU node's fixed description.
#[derive(Clone, Debug)]
pub(crate) struct NodeDesc {
    pub gpu_id: u32,
    pub spec: &'static GpuSpec,
    pub render_minor: u32,
    pub props_text: String,
    pub props: NodeProperties,
    pub sizes: QueueBufferSizes,
}

/// The `gpu_id` of the `index`-th emulated GPU: stable, non-zero, 16 bits (as KFD's are).
pub fn emu_gpu_id(index: usize) -> u32 {
    (0x2A00 + 0x0B11 * index as u32) & 0xFFFF
}

fn properties_text(spec: &GpuSpec, index: usize, print_cwsr: Option<&QueueBufferSizes>) -> String {
    let s = spec;
    let mut rows: Vec<(&str, u64)> = vec![
        ("cpu_cores_count", 0),
        ("simd_count", s.simd_count as u64),
        ("mem_banks_count", 1),
        ("caches_count", 0),
        ("io_links_count", 1),
        ("p2p_links_count", 0),
        ("cpu_core_id_base", 0),
        ("simd_id_base", 0x8000_0000 + 0x100 * index as u64),
        ("max_waves_per_simd", s.max_waves_per_simd as u64),
        ("lds_size_in_kb", s.lds_size_in_kb as u64),
        ("gds_size_in_kb", 0),
        ("num_gws", 64),
        ("wave_front_size", s.wave_front_size as u64),
        ("array_count", s.array_count as u64),
        ("simd_arrays_per_engine", s.simd_arrays_per_engine as u64),
        ("cu_per_simd_array", s.cu_per_simd_array as u64),
        ("simd_per_cu", s.simd_per_cu as u64),
        ("max_slots_scratch_cu", s.max_slots_scratch_cu as u64),
        ("gfx_target_version", s.gfx_target_version as u64),
        ("vendor_id", 0x1002),
        ("device_id", s.device_id as u64),
        ("location_id", 0x300 + 0x100 * index as u64),
        ("domain", 0),
        (
            "drm_render_minor",
            (RENDER_MINOR_BASE + index as u32) as u64,
        ),
        ("hive_id", 0),
        ("num_sdma_engines", s.num_sdma_engines as u64),
        ("num_sdma_xgmi_engines", s.num_sdma_xgmi_engines as u64),
        (
            "num_sdma_queues_per_engine",
            s.num_sdma_queues_per_engine as u64,
        ),
        ("num_cp_queues", s.num_cp_queues as u64),
        ("max_engine_clk_fclk", s.max_engine_clk_fclk as u64),
        ("local_mem_size", s.local_mem_size),
        ("fw_version", 0),
        ("capability", 0),
        ("debug_prop", 0),
        ("sdma_fw_version", 0),
        ("unique_id", 0x5eed_0000 + index as u64),
        ("num_xcc", s.num_xcc as u64),
        ("max_engine_clk_ccompute", 3000),
    ];
    if let Some(q) = print_cwsr {
        rows.push(("cwsr_size", q.cwsr_size as u64));
        rows.push(("ctl_stack_size", q.ctl_stack_size as u64));
    }
    rows.iter().map(|(k, v)| format!("{k} {v}\n")).collect()
}

/// Build the descriptions of `count` GPUs of `spec`. With `print_cwsr`, `properties` also lists
/// `cwsr_size` and `ctl_stack_size` like the newest kernels do.
pub(crate) fn build_nodes(
    spec: &'static GpuSpec,
    count: usize,
    print_cwsr: bool,
) -> Result<Vec<NodeDesc>> {
    if count == 0 || count > 16 {
        bail!(
            InvalidArgument,
            "MOCKGPU_COUNT={count}: the emulator presents 1 to 16 GPUs"
        );
    }
    let mut out = Vec::with_capacity(count);
    for index in 0..count {
        let base = NodeProperties::parse(&properties_text(spec, index, None))?;
        let sizes = queue_buffer_sizes(&base)?;
        let props_text = properties_text(spec, index, print_cwsr.then_some(&sizes));
        out.push(NodeDesc {
            gpu_id: emu_gpu_id(index),
            spec,
            render_minor: RENDER_MINOR_BASE + index as u32,
            props: NodeProperties::parse(&props_text)?,
            props_text,
            sizes,
        });
    }
    Ok(out)
}

/// The topology directory.
pub const TOPOLOGY: &str = "/sys/devices/virtual/kfd/kfd/topology";

const CPU_PROPERTIES: &str =
    "cpu_cores_count 16\nsimd_count 0\nmem_banks_count 1\ncaches_count 0\n\
io_links_count 0\np2p_links_count 0\ncpu_core_id_base 0\nsimd_id_base 0\nmax_waves_per_simd 0\n\
lds_size_in_kb 0\ngds_size_in_kb 0\nnum_gws 0\nwave_front_size 0\narray_count 0\n\
simd_arrays_per_engine 0\ncu_per_simd_array 0\nsimd_per_cu 0\nmax_slots_scratch_cu 0\n\
gfx_target_version 0\nvendor_id 0\ndevice_id 0\nlocation_id 0\ndomain 0\ndrm_render_minor 0\n\
hive_id 0\nnum_sdma_engines 0\nnum_sdma_xgmi_engines 0\nnum_sdma_queues_per_engine 0\n\
num_cp_queues 0\nmax_engine_clk_fclk 0\nlocal_mem_size 0\nfw_version 0\ncapability 0\n\
debug_prop 0\nsdma_fw_version 0\nunique_id 0\nnum_xcc 0\nmax_engine_clk_ccompute 3000\n";

/// What a virtual path is.
pub(crate) enum VPath {
    File(String),
    Dir(Vec<String>),
    /// Not part of the emulated tree: the real file system answers.
    Outside,
    /// Inside the emulated tree but absent.
    Missing,
}

/// Resolve a path of the virtual sysfs / devfs.
pub(crate) fn lookup(nodes: &[NodeDesc], path: &str) -> VPath {
    let path = path.trim_end_matches('/');
    if path == "/dev/dri" {
        return VPath::Dir(
            nodes
                .iter()
                .map(|n| format!("renderD{}", n.render_minor))
                .collect(),
        );
    }
    let Some(rest) = path.strip_prefix("/sys/devices/virtual/kfd") else {
        return VPath::Outside;
    };
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    let numbered = |n: usize| (0..=n).map(|i| i.to_string()).collect::<Vec<_>>();
    match parts.as_slice() {
        [] => VPath::Dir(vec!["kfd".into()]),
        ["kfd"] => VPath::Dir(vec!["topology".into()]),
        ["kfd", "topology"] => VPath::Dir(vec![
            "generation_id".into(),
            "nodes".into(),
            "system_properties".into(),
        ]),
        ["kfd", "topology", "generation_id"] => VPath::File("1\n".into()),
        ["kfd", "topology", "system_properties"] => {
            VPath::File("platform_oem 0\nplatform_id 0\nplatform_rev 0\n".into())
        }
        ["kfd", "topology", "nodes"] => VPath::Dir(numbered(nodes.len())),
        ["kfd", "topology", "nodes", n, tail @ ..] => node_path(nodes, n, tail),
        _ => VPath::Missing,
    }
}

fn node_path(nodes: &[NodeDesc], n: &str, tail: &[&str]) -> VPath {
    let Ok(n) = n.parse::<usize>() else {
        return VPath::Missing;
    };
    let gpu = if n == 0 { None } else { nodes.get(n - 1) };
    if n > 0 && gpu.is_none() {
        return VPath::Missing;
    }
    match (tail, gpu) {
        ([], _) => VPath::Dir(vec!["gpu_id".into(), "name".into(), "properties".into()]),
        (["gpu_id"], None) => VPath::File("0\n".into()),
        (["gpu_id"], Some(g)) => VPath::File(format!("{}\n", g.gpu_id)),
        (["name"], None) => VPath::File("\n".into()),
        (["name"], Some(g)) => VPath::File(format!("{}\n", g.spec.arch)),
        (["properties"], None) => VPath::File(CPU_PROPERTIES.into()),
        (["properties"], Some(g)) => VPath::File(g.props_text.clone()),
        _ => VPath::Missing,
    }
}
