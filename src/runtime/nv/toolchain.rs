//! Finding NVIDIA's compiler tools on this machine at run time: the `ptxas` executable and the
//! NVRTC and nvJitLink libraries. Nothing is linked; a missing tool is an error that says where
//! rawgrad looked and how to get it.
//!
//! Where, in order (the first hit wins; among several files in one place the newest version):
//! 1. the knob naming the file: `PTXAS`, `NVRTC_LIB`, `NVJITLINK_LIB`;
//! 2. `PATH` (ptxas) / `LD_LIBRARY_PATH` (libraries);
//! 3. the CUDA toolkit: `CUDA_PATH`, `CUDA_HOME`, `/usr/local/cuda`, `/usr/local/cuda-*` (newest
//!    first), `/opt/cuda` (`bin/`, `lib64/`, `lib/`, `targets/<arch>-linux/lib/`);
//! 4. NVIDIA's PyPI wheels (`pip install nvidia-cuda-nvcc nvidia-cuda-nvrtc nvidia-nvjitlink`):
//!    `nvidia/cu*/bin/ptxas` and `nvidia/cu*/lib/` (CUDA 13 wheels), `nvidia/cuda_nvcc/bin/ptxas`,
//!    `nvidia/cuda_nvrtc/lib/`, `nvidia/nvjitlink/lib/` (CUDA 12 wheels), in the site-packages
//!    folders of `NV_SITE_PACKAGES` (colon separated), `VIRTUAL_ENV`, `CONDA_PREFIX`, the Python
//!    installations whose `python3` is on `PATH`, `~/.local`, `/usr/local/lib/python3*` and
//!    `/usr/lib/python3*` — found by probing the file system, without running Python;
//! 5. the system library folders (`/usr/lib/<arch>-linux-gnu`, `/usr/lib64`, `/usr/lib`,
//!    `/usr/local/lib`).
//!
//! Not guaranteed: that a file found works (loading or running it is the caller's check).

use std::path::{Path, PathBuf};

use crate::driver::process::which;
use crate::ffi::nvlib::so_version;
use crate::helpers::getenv_str;
use crate::{Error, Result};

/// One of the tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NvTool {
    Ptxas,
    Nvrtc,
    NvJitLink,
}

impl NvTool {
    /// The knob naming the file directly.
    pub fn knob(self) -> &'static str {
        match self {
            NvTool::Ptxas => "PTXAS",
            NvTool::Nvrtc => "NVRTC_LIB",
            NvTool::NvJitLink => "NVJITLINK_LIB",
        }
    }

    /// How to get it.
    pub fn install_hint(self) -> &'static str {
        match self {
            NvTool::Ptxas => {
                "install the CUDA toolkit, or `pip install nvidia-cuda-nvcc` (ptxas), or set PTXAS"
            }
            NvTool::Nvrtc => {
                "install the CUDA toolkit, or `pip install nvidia-cuda-nvrtc`, or set NVRTC_LIB"
            }
            NvTool::NvJitLink => {
                "install the CUDA toolkit (12+), or `pip install nvidia-nvjitlink`, or set NVJITLINK_LIB"
            }
        }
    }

    fn name(self) -> &'static str {
        match self {
            NvTool::Ptxas => "ptxas",
            NvTool::Nvrtc => "NVRTC (libnvrtc.so)",
            NvTool::NvJitLink => "nvJitLink (libnvJitLink.so)",
        }
    }

    /// The library's file-name stem (`libnvrtc`).
    fn lib_stem(self) -> &'static str {
        match self {
            NvTool::Ptxas => "ptxas",
            NvTool::Nvrtc => "libnvrtc",
            NvTool::NvJitLink => "libnvJitLink",
        }
    }

    /// Wheel subfolders (under `site-packages/nvidia/`) of CUDA 12 wheels.
    fn wheel_dir(self) -> &'static str {
        match self {
            NvTool::Ptxas => "cuda_nvcc/bin",
            NvTool::Nvrtc => "cuda_nvrtc/lib",
            NvTool::NvJitLink => "nvjitlink/lib",
        }
    }
}

fn env_paths(key: &str) -> Vec<PathBuf> {
    getenv_str(key)
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Subfolders of `dir` whose name starts with `prefix`, newest (by the numbers in the name)
/// first.
fn versioned_children(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut v: Vec<(Vec<u32>, PathBuf)> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let rest = name.strip_prefix(prefix)?;
            let nums = rest
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|p| p.parse().ok())
                .collect();
            Some((nums, e.path()))
        })
        .collect();
    v.sort_by(|a, b| b.0.cmp(&a.0));
    v.into_iter().map(|(_, p)| p).collect()
}

/// CUDA toolkit roots, in search order.
pub fn toolkit_roots() -> Vec<PathBuf> {
    let mut roots = vec![];
    for k in ["CUDA_PATH", "CUDA_HOME"] {
        roots.extend(env_paths(k));
    }
    roots.push(PathBuf::from("/usr/local/cuda"));
    roots.extend(versioned_children(Path::new("/usr/local"), "cuda-"));
    roots.push(PathBuf::from("/opt/cuda"));
    roots
}

/// `site-packages`-style folders under a Python prefix (`<prefix>/lib/python3*/site-packages`).
fn prefix_site_dirs(prefix: &Path, out: &mut Vec<PathBuf>) {
    for lib in ["lib", "lib64"] {
        for py in versioned_children(&prefix.join(lib), "python3") {
            for s in ["site-packages", "dist-packages"] {
                out.push(py.join(s));
            }
        }
    }
}

/// Python package folders that may hold NVIDIA's wheels, in search order.
pub fn site_package_dirs() -> Vec<PathBuf> {
    let mut out = env_paths("NV_SITE_PACKAGES");
    for k in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        for p in env_paths(k) {
            prefix_site_dirs(&p, &mut out);
        }
    }
    for dir in env_paths("PATH") {
        if dir.join("python3").is_file() {
            if let Some(prefix) = dir.parent() {
                prefix_site_dirs(prefix, &mut out);
            }
        }
    }
    if let Some(home) = getenv_str("HOME") {
        prefix_site_dirs(&Path::new(&home).join(".local"), &mut out);
    }
    prefix_site_dirs(Path::new("/usr/local"), &mut out);
    prefix_site_dirs(Path::new("/usr"), &mut out);
    out.push(PathBuf::from("/usr/lib/python3/dist-packages"));
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| p.is_dir() && seen.insert(p.clone()));
    out
}

/// Folders that may hold `tool`, in search order.
fn candidate_dirs(tool: NvTool) -> Vec<PathBuf> {
    let mut dirs = vec![];
    let bin = tool == NvTool::Ptxas;
    dirs.extend(env_paths(if bin { "PATH" } else { "LD_LIBRARY_PATH" }));
    let arch = std::env::consts::ARCH;
    for root in toolkit_roots() {
        if bin {
            dirs.push(root.join("bin"));
        } else {
            dirs.push(root.join("lib64"));
            dirs.push(root.join("lib"));
            dirs.push(root.join(format!("targets/{arch}-linux/lib")));
        }
    }
    for site in site_package_dirs() {
        let nv = site.join("nvidia");
        for cu in versioned_children(&nv, "cu") {
            dirs.push(cu.join(if bin { "bin" } else { "lib" }));
        }
        dirs.push(nv.join(tool.wheel_dir()));
    }
    if !bin {
        for d in [
            format!("/usr/lib/{arch}-linux-gnu"),
            "/usr/lib64".into(),
            "/usr/lib".into(),
            "/usr/local/lib".into(),
        ] {
            dirs.push(PathBuf::from(d));
        }
    }
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

/// The newest `libX.so*` in `dir` (not `libX-builtins`).
fn library_in(dir: &Path, stem: &str) -> Option<PathBuf> {
    let rd = std::fs::read_dir(dir).ok()?;
    rd.flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == format!("{stem}.so") || n.starts_with(&format!("{stem}.so.")))
                && p.is_file()
        })
        .max_by_key(|p| so_version(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The file of `tool`, or an error that lists where rawgrad looked and how to install it.
pub fn find_tool(tool: NvTool) -> Result<PathBuf> {
    if let Some(forced) = getenv_str(tool.knob()).filter(|s| !s.trim().is_empty()) {
        let p = PathBuf::from(forced.trim());
        let ok = if tool == NvTool::Ptxas {
            is_executable(&p) || which(&forced).is_some()
        } else {
            p.is_file()
        };
        if !ok {
            return Err(Error::Compile(format!(
                "{}: {}={} is not a usable file",
                tool.name(),
                tool.knob(),
                p.display()
            )));
        }
        return Ok(which(&forced).unwrap_or(p));
    }
    let dirs = candidate_dirs(tool);
    for d in &dirs {
        let hit = if tool == NvTool::Ptxas {
            Some(d.join("ptxas")).filter(|p| is_executable(p))
        } else {
            library_in(d, tool.lib_stem())
        };
        if let Some(p) = hit {
            return Ok(p);
        }
    }
    Err(Error::Compile(format!(
        "{} not found ({}); looked in {} folders: {}",
        tool.name(),
        tool.install_hint(),
        dirs.len(),
        crate::ffi::nvlib::shown(&dirs)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helpers::Context;

    #[test]
    fn a_forced_file_that_is_missing_is_an_error() {
        let _c = Context::with_str(&[("PTXAS", "/nonexistent/ptxas")]);
        let e = find_tool(NvTool::Ptxas).unwrap_err();
        assert!(e.message().contains("PTXAS=/nonexistent/ptxas"), "{e}");
    }

    #[test]
    fn wheel_layouts_are_found() {
        let root = std::env::temp_dir().join(format!("rawgrad-nvtools-{}", std::process::id()));
        let site = root.join("site-packages");
        let cu13 = site.join("nvidia/cu13");
        let cu12 = site.join("nvidia/nvjitlink/lib");
        std::fs::create_dir_all(cu13.join("bin")).unwrap();
        std::fs::create_dir_all(cu13.join("lib")).unwrap();
        std::fs::create_dir_all(&cu12).unwrap();
        let ptxas = cu13.join("bin/ptxas");
        std::fs::write(&ptxas, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ptxas, std::fs::Permissions::from_mode(0o755)).unwrap();
        for f in [
            "libnvrtc.so.13",
            "libnvrtc-builtins.so.13.5",
            "libnvrtc.so.12",
        ] {
            std::fs::write(cu13.join("lib").join(f), "").unwrap();
        }
        std::fs::write(cu12.join("libnvJitLink.so.12"), "").unwrap();
        let sp = site.display().to_string();
        let _c = Context::with_str(&[
            ("NV_SITE_PACKAGES", sp.as_str()),
            ("PATH", "/nonexistent"),
            ("LD_LIBRARY_PATH", ""),
            ("CUDA_PATH", "/nonexistent"),
            ("CUDA_HOME", "/nonexistent"),
        ]);
        let dirs = site_package_dirs();
        assert_eq!(dirs.first(), Some(&site), "{dirs:?}");
        // a toolkit in /usr/local/cuda would come first; only check when there is none
        if !Path::new("/usr/local/cuda").exists() {
            assert_eq!(find_tool(NvTool::Ptxas).unwrap(), ptxas);
            assert_eq!(
                find_tool(NvTool::Nvrtc).unwrap(),
                cu13.join("lib/libnvrtc.so.13")
            );
            assert_eq!(
                find_tool(NvTool::NvJitLink).unwrap(),
                cu12.join("libnvJitLink.so.12")
            );
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn missing_tools_say_how_to_get_them() {
        let _c = Context::with_str(&[
            ("NV_SITE_PACKAGES", "/nonexistent"),
            ("VIRTUAL_ENV", ""),
            ("CONDA_PREFIX", ""),
            ("HOME", "/nonexistent"),
            ("PATH", "/nonexistent"),
        ]);
        if let Err(e) = find_tool(NvTool::Ptxas) {
            assert!(e.message().contains("pip install nvidia-cuda-nvcc"), "{e}");
            assert!(e.message().contains("/usr/local/cuda/bin"), "{e}");
        }
    }
}
