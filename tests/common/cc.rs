//! Test helper: compile rendered CLANG source with the system C compiler into a temporary shared
//! object, load it, and call its fixed-ABI `NAME_rg` entry point. (The real CLANG runtime lives in
//! src/runtime/cpu/clang.rs; this is only for tests of the renderer.)

#![allow(dead_code)]

use std::ffi::{c_int, c_void};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

pub type EntryFn = unsafe extern "C" fn(*mut *mut c_void, *const c_int, c_int, c_int);

/// The compiler to use (`cc`), or None when the machine has none (tests then skip).
pub fn compiler() -> Option<&'static str> {
    let ok = Command::new("cc")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        Some("cc")
    } else {
        eprintln!("no C compiler (cc) found: skipping the compiled-C checks");
        None
    }
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A loaded kernel library.
pub struct Lib {
    lib: libloading::Library,
    path: PathBuf,
}

impl Drop for Lib {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Compile `src` with `cc -O2 -shared -fPIC -march=native -ffp-contract=off -Wall -Werror` (the
/// CLANG device's flags, `-Werror` added) and load it.
pub fn compile(cc: &str, src: &str) -> Lib {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir();
    let base = dir.join(format!("rawgrad-uops-test-{}-{n}", std::process::id()));
    let c = base.with_extension("c");
    let so = base.with_extension("so");
    std::fs::write(&c, src).unwrap();
    let out = Command::new(cc)
        .args([
            "-O2",
            "-shared",
            "-fPIC",
            "-march=native",
            "-ffp-contract=off",
            "-Wall",
            "-Werror",
            "-x",
            "c",
        ])
        .arg(&c)
        .arg("-o")
        .arg(&so)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&c);
    assert!(
        out.status.success(),
        "cc failed:\n{}\n--- source ---\n{src}",
        String::from_utf8_lossy(&out.stderr)
    );
    // SAFETY: the library is the one just compiled from renderer output; its initialisers are the
    // C runtime's own (the rendered source defines no constructors).
    let lib = unsafe { libloading::Library::new(&so) }.unwrap();
    Lib { lib, path: so }
}

impl Lib {
    /// Call `name_rg(bufs, vals, core, ncores)` for every core in turn.
    pub fn run(&self, name: &str, bufs: &mut [Vec<u8>], vals: &[i32], ncores: i32) {
        let sym = format!("{name}_rg");
        // SAFETY: `NAME_rg` is emitted by the CLANG renderer with exactly the `EntryFn` signature.
        let f: libloading::Symbol<EntryFn> = unsafe { self.lib.get(sym.as_bytes()) }.unwrap();
        let mut ptrs: Vec<*mut c_void> = bufs
            .iter_mut()
            .map(|b| b.as_mut_ptr() as *mut c_void)
            .collect();
        for core in 0..ncores {
            // SAFETY: every buffer pointer is valid for the sizes the kernel was built for (the tests
            // size them from the same shapes), `vals` holds the kernel's variables, and the buffers
            // outlive the call.
            unsafe { f(ptrs.as_mut_ptr(), vals.as_ptr(), core, ncores) };
        }
    }
}
