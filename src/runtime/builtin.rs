//! The device families rawgrad ships, and the entry points that make sure they are registered
//! before a device is looked up (so users never call an init function). The families:
//!
//! - `CLANG`: [`ClangRenderer`], the C compiler (`clang`, else `cc`), dlopen'd shared objects,
//!   LRU-cached host memory ([`open_clang`]).
//! - `INTERP`: the UOp interpreter ([`open_interp`]).
//! - `LLVM`: LLVM IR compiled in process by libLLVM, loaded by rawgrad's ELF loader ([`open_llvm`]).
//! - `CUDA`: the CUDA driver API fallback ([`open_cuda`]); it loads libcuda only when a `CUDA`
//!   device is selected or probed.
//! - `AMD`: the KFD backend ([`amd::open_amd`]); it opens nothing until an `AMD` device is
//!   selected or probed.
//! - `NV`: the RM/UVM backend ([`nv::open_nv`]); likewise lazy.
//!
//! This is also the one place that picks the emulator: under `MOCKGPU=1` the GPU backends get the
//! emulated KFD or RM/UVM ([`amd_driver`], [`nv_driver`]) and, on an emulated device, the real
//! code by default (AMD's gfx11 code objects from libLLVM 15+, NV's PTX) or, with
//! `MOCKGPU_CODE=uops`, the mock renderers and compilers; on real hardware the libLLVM amdgcn
//! compiler, NVRTC/ptxas/nvJitLink, or a compiler slot that reports why it is missing.
//!
//! The upper layers (lazy, engine, tensor) and users open devices through [`open_device`] and
//! [`default_device`] (tinygrad's `Device[name]` and `Device.DEFAULT`), which register the
//! built-ins first; the table itself is `crate::device::registry`'s, which names no backend.
//! Built-ins register with `register_family_if_absent`, so a family a user registered (before or
//! after) always keeps the user's opener.
//!
//! Not guaranteed: registering a family does not prove it opens (the opener reports why it
//! cannot, for example a missing compiler or device node).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::device::registry::{self, device_index, register_family_if_absent, Compiled};
use crate::device::{Compiler, Toolchain};
use crate::driver::{Driver, RealDriver};
use crate::helpers::getenv;
use crate::mockgpu::amdgpu::attach::mock_driver as amd_mock_driver;
use crate::mockgpu::amdgpu::compiler::{
    amd_mock_code, isa_unavailable, AmdMockCode, MockAmdCompiler, MockAmdRenderer,
    UnavailableAmdCompiler,
};
use crate::mockgpu::nvgpu::attach::mock_driver as nv_mock_driver;
use crate::mockgpu::nvgpu::compiler::{
    mock_code, mock_cubin, MockNvCompiler, MockNvRenderer, MockPtxCompiler, PtxAssembler,
};
use crate::mockgpu::nvgpu::cubin::MockCode;
use crate::mockgpu::EmuConfig;
use crate::renderer::cstyle::ClangRenderer;
use crate::renderer::cuda::CUDARenderer;
use crate::renderer::Renderer;
use crate::runtime::amd::{self, compiler::AMDCompiler, AmdDevice};
use crate::runtime::cpu::clang::open_clang;
use crate::runtime::cpu::interp_device::open_interp;
use crate::runtime::cpu::llvm::open_llvm;
use crate::runtime::fallback::cuda::open_cuda;
use crate::runtime::nv::compiler::UnavailableNvCompiler;
use crate::runtime::nv::first_run::Kernels;
use crate::runtime::nv::{
    self,
    compiler::{NVCompiler, NvCompilerKind},
    NvDevice,
};
use crate::Result;

/// Families tried, in order, when nothing selects a device (families not registered, or that do
/// not open, are skipped). tinygrad 0.9.1 tries CLANG before LLVM; here LLVM comes first (it
/// compiles in process, several times faster than `cc`, and runs as fast or faster: the README's
/// measurements), and CLANG, still `CLANG=1`, is the CPU default where no libLLVM is found.
pub const DEVICE_ORDER: [&str; 6] = ["AMD", "NV", "CUDA", "LLVM", "CLANG", "INTERP"];

/// Register every built-in family that is not registered yet (once per process; later calls
/// return at the cost of one atomic load).
pub fn register_builtin_families() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(register_all);
}

fn register_all() {
    let clang: Arc<dyn Renderer> = Arc::new(ClangRenderer::new());
    // The CPU families take any index (`CLANG:1` is a second CLANG device, as in tinygrad), but
    // one that is not a number is an error naming the device, never silently ignored.
    register_family_if_absent("CLANG", move |name| {
        device_index(name)?;
        open_clang(name, Arc::clone(&clang))
    });
    register_family_if_absent("INTERP", |name| {
        device_index(name)?;
        open_interp(name)
    });
    register_family_if_absent("LLVM", |name| {
        device_index(name)?;
        open_llvm(name)
    });
    register_family_if_absent("AMD", |name| amd::open_amd(name, amd_driver, amd_toolchain));
    register_family_if_absent("NV", |name| nv::open_nv(name, nv_driver, nv_toolchain));
    register_family_if_absent("CUDA", open_cuda);
}

/// tinygrad's `Device[name]`: the opened device (the built-in families registered first).
pub fn open_device(device: &str) -> Result<Arc<Compiled>> {
    register_builtin_families();
    registry::open_registered(device)
}

/// tinygrad's `Device.DEFAULT` over [`DEVICE_ORDER`] (the rules are
/// [`registry::default_device_in`]'s).
pub fn default_device() -> Result<String> {
    register_builtin_families();
    registry::default_device_in(&DEVICE_ORDER)
}

/// `canonicalize`, with `None` meaning [`default_device`] (tinygrad's `Device.canonicalize`).
pub fn canonicalize_opt(device: Option<&str>) -> Result<String> {
    match device {
        Some(d) => Ok(registry::canonicalize(d)),
        None => default_device(),
    }
}

/// The registered family names (the built-ins included), sorted.
pub fn registered_families() -> Vec<String> {
    register_builtin_families();
    registry::registered_families()
}

/// Whether `family` (any case) has an opener (the built-ins included).
pub fn is_registered(family: &str) -> bool {
    register_builtin_families();
    registry::is_registered(family)
}

/// The driver for a new KFD process: the emulator with software GPUs under `MOCKGPU=1`
/// (`MOCKGPU_COUNT`, `MOCKGPU_ARCH`), else the kernel.
pub fn amd_driver() -> Result<Arc<dyn Driver>> {
    if getenv("MOCKGPU", 0) != 0 {
        Ok(Arc::new(amd_mock_driver(EmuConfig::from_env())?))
    } else {
        Ok(Arc::new(RealDriver::new()))
    }
}

/// The driver for a new NV process: the emulator with software NV GPUs under `MOCKGPU=1`
/// (`MOCKGPU_NV_COUNT`, `MOCKGPU_NV_ARCH`, `MOCKGPU_NV_DRIVER`), else the kernel.
pub fn nv_driver() -> Result<Arc<dyn Driver>> {
    if getenv("MOCKGPU", 0) != 0 {
        Ok(Arc::new(nv_mock_driver(EmuConfig::from_env())?))
    } else {
        Ok(Arc::new(RealDriver::new()))
    }
}

/// An AMD device's compiler and renderer: on the emulator the hardware path (`MOCKGPU_CODE=isa`,
/// the default on gfx11: the software GPU runs the RDNA3 machine code; without a libLLVM that
/// knows the target a compiler slot that says so and how to get out, never the UOps) or the mock
/// pair (`MOCKGPU_CODE=uops`); on hardware the libLLVM amdgcn compiler and its LLVM IR renderer,
/// or a compiler slot that says why it is missing.
pub fn amd_toolchain(dev: &AmdDevice) -> Toolchain {
    let target = dev.backend().target();
    let emu = dev.backend().process().core().drv.name() == "emu";
    if emu {
        match amd_mock_code(target) {
            Ok(AmdMockCode::Uops) => {
                return Toolchain {
                    compiler: Arc::new(MockAmdCompiler::new(target)),
                    renderer: Arc::new(MockAmdRenderer::for_target(target)),
                }
            }
            Ok(AmdMockCode::Isa) => {}
            Err(e) => {
                return Toolchain {
                    compiler: Arc::new(UnavailableAmdCompiler::on_emulator(
                        target,
                        e.message().into(),
                    )),
                    renderer: Arc::new(MockAmdRenderer::new()),
                }
            }
        }
    }
    match AMDCompiler::new(target) {
        Ok(c) => {
            let r = c.renderer();
            Toolchain {
                compiler: Arc::new(c),
                renderer: Arc::new(r),
            }
        }
        Err(e) => Toolchain {
            compiler: Arc::new(if emu {
                UnavailableAmdCompiler::on_emulator(target, isa_unavailable(target, e.message()))
            } else {
                UnavailableAmdCompiler::new(target, e.message().to_string())
            }),
            renderer: Arc::new(MockAmdRenderer::new()),
        },
    }
}

/// An NV device's compiler and renderer: on the emulator the PTX path (`MOCKGPU_CODE=ptx`, the
/// default: with ptxas's cubin beside the PTX when ptxas is found) or the mock pair
/// (`MOCKGPU_CODE=uops`); on hardware the CUDA renderer and [`NVCompiler`]; else a compiler slot
/// that says why no NVIDIA compiler is available.
pub fn nv_toolchain(dev: &NvDevice) -> Toolchain {
    let b = dev.backend();
    let (arch, sm) = (b.classes().arch, b.sm());
    let unavailable = |e: crate::Error, renderer: Arc<dyn Renderer>| Toolchain {
        compiler: Arc::new(UnavailableNvCompiler::new(sm, e.message().to_string())),
        renderer,
    };
    if b.process().driver().name() != "emu" {
        return match NVCompiler::new("NV", sm) {
            Ok(c) => {
                let renderer = c.renderer();
                Toolchain {
                    compiler: Arc::new(c),
                    renderer,
                }
            }
            Err(e) => unavailable(e, Arc::new(CUDARenderer::nv(sm))),
        };
    }
    let mock = || -> Toolchain {
        Toolchain {
            compiler: Arc::new(MockNvCompiler::new(arch, sm)),
            renderer: Arc::new(MockNvRenderer::for_sm(sm)),
        }
    };
    match mock_code().and_then(|c| match c {
        MockCode::Uops => Ok(None),
        MockCode::Ptx => MockPtxCompiler::new(arch, sm).map(|c| Some(with_ptxas(c, sm))),
    }) {
        Ok(None) => mock(),
        Ok(Some(c)) => {
            let renderer = Arc::new(c.renderer());
            Toolchain {
                compiler: Arc::new(c),
                renderer,
            }
        }
        Err(e) => unavailable(e, Arc::new(MockNvRenderer::for_sm(sm))),
    }
}

/// The emulator's PTX compiler, also assembling each kernel with ptxas when this machine has it
/// (the hardware path's assembler, [`NVCompiler::assemble`]); without ptxas, PTX only.
fn with_ptxas(c: MockPtxCompiler, sm: u32) -> MockPtxCompiler {
    match NVCompiler::with_kind("NV", sm, NvCompilerKind::Ptxas) {
        Ok(nv) => {
            let key = nv.cache_key().unwrap_or_default();
            c.with_assembler(PtxAssembler {
                key,
                assemble: Arc::new(move |ptx: &str| nv.assemble(ptx)),
            })
        }
        Err(_) => c,
    }
}

/// The kernels of the NV first run (`examples/nv_first_run.rs`): mock cubins built from UOps
/// under `MOCKGPU=1`, else the precompiled cubins in `fixtures`.
pub fn nv_first_run_kernels(fixtures: &Path) -> Kernels<'_> {
    if getenv("MOCKGPU", 0) != 0 {
        Kernels::Built(mock_cubin)
    } else {
        Kernels::Fixtures(fixtures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::registry::default_device_in;
    use crate::device::testing::register_host_family;
    use crate::helpers::Context;

    #[test]
    fn canonicalize_opt_drops_index_zero() {
        assert_eq!(canonicalize_opt(Some("nv:0")).unwrap(), "NV");
    }

    #[test]
    fn every_builtin_family_is_registered_and_ordered() {
        let fams = registered_families();
        for f in DEVICE_ORDER {
            assert!(fams.contains(&f.to_string()), "{f} missing from {fams:?}");
            assert!(is_registered(&f.to_lowercase()));
        }
        let dev = open_device("interp").unwrap();
        assert_eq!(dev.name, "INTERP");
        assert!(Arc::ptr_eq(&dev, &open_device("INTERP:0").unwrap()));
        let e = open_device("CLANG:x").unwrap_err();
        assert!(e.message().contains("\"x\" is not a device index"), "{e}");
    }

    #[test]
    fn llvm_is_the_first_cpu_family_and_clang_stays_selectable() {
        let pos = |f: &str| DEVICE_ORDER.iter().position(|d| *d == f).unwrap();
        assert!(pos("LLVM") < pos("CLANG") && pos("CLANG") < pos("INTERP"));
        register_builtin_families();
        // The environment's family knobs (`AMD=1` in CI) off, then CLANG=1 picks CLANG over LLVM.
        let fams = registered_families();
        let off: Vec<(&str, i64)> = fams.iter().map(|f| (f.as_str(), 0)).collect();
        let _off = Context::new(&off);
        let _d = Context::with_str(&[("DEVICE", "")]);
        let _c = Context::new(&[("CLANG", 1)]);
        assert_eq!(default_device().unwrap(), "CLANG");
    }

    #[test]
    fn default_from_knobs() {
        // (The registry's own rules, tested here beside the built-ins.) The built-ins first, so the families seen below do not change while the test runs.
        register_builtin_families();
        register_host_family("RGTEST_DEFA");
        register_host_family("RGTEST_DEFB");
        let order = ["RGTEST_DEFB"];
        {
            let _g = Context::with_str(&[("DEVICE", "rgtest_defb:1")]);
            assert_eq!(default_device_in(&order).unwrap(), "RGTEST_DEFB:1");
            assert_eq!(canonicalize_opt(None).unwrap(), "RGTEST_DEFB:1");
        }
        {
            // Knobs of the other registered families from the environment (`AMD=1` in CI) are off.
            let others: Vec<String> = registered_families()
                .into_iter()
                .filter(|f| !f.starts_with("RGTEST_DEF"))
                .collect();
            let off: Vec<(&str, i64)> = others.iter().map(|f| (f.as_str(), 0)).collect();
            let _off = Context::new(&off);
            let _g = Context::new(&[("RGTEST_DEFA", 1)]);
            assert_eq!(default_device_in(&order).unwrap(), "RGTEST_DEFA");
            // The order's knobs come before the other families' (by name).
            let _b = Context::new(&[("RGTEST_DEFB", 1)]);
            assert_eq!(default_device_in(&order).unwrap(), "RGTEST_DEFB");
            drop(_b);
            // DEVICE wins over family knobs.
            let _h = Context::with_str(&[("DEVICE", "RGTEST_DEFB")]);
            assert_eq!(default_device_in(&order).unwrap(), "RGTEST_DEFB");
        }
        {
            let _g = Context::with_str(&[("DEVICE", "RGTEST_UNREGISTERED")]);
            let e = default_device_in(&order).unwrap_err();
            assert!(e.message().contains("DEVICE=RGTEST_UNREGISTERED"), "{e}");
        }
        {
            // A family knob naming a family of the order that is not registered is an error.
            let _g = Context::new(&[("RGTEST_DEF_UNREG", 1)]);
            let e = default_device_in(&["RGTEST_DEF_UNREG"]).unwrap_err();
            assert!(e.message().contains("RGTEST_DEF_UNREG=1"), "{e}");
        }
    }
}
