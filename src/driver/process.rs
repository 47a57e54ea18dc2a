//! Process helpers for the compilers that run as child processes (cc, clang): finding a program
//! on `PATH`, running it with bytes on stdin, and temporary file paths that clean up after
//! themselves.
//!
//! Not guaranteed: a child that hangs blocks the caller (there is no timeout); a temporary file
//! left behind by a killed process is not collected.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Error, Result};

/// Run `f` when the process exits normally (`atexit`): used to write profiles at exit.
pub fn at_exit(f: extern "C" fn()) -> Result<()> {
    // SAFETY: `f` is a plain `extern "C" fn()` with no captured state; atexit only stores the
    // pointer and calls it once during normal process termination.
    let rc = unsafe { libc::atexit(f) };
    if rc != 0 {
        return Err(Error::Io(format!("atexit failed with {rc}")));
    }
    Ok(())
}

/// The first executable file named `program` on `PATH` (or `program` itself when it contains a
/// `/` and is a file).
pub fn which(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What a finished child process left.
#[derive(Debug)]
pub struct ProcessOutput {
    /// Exit status 0.
    pub success: bool,
    /// The exit status as text (`exit status: 1`, `signal: 9`).
    pub status: String,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Run `program args...` with `stdin` fed to its standard input, and wait for it.
pub fn run_with_stdin(program: &Path, args: &[&OsStr], stdin: &[u8]) -> Result<ProcessOutput> {
    let shown = program.display();
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Io(format!("spawning {shown}: {e}")))?;
    let mut pipe = child
        .stdin
        .take()
        .ok_or_else(|| Error::Internal(format!("{shown}: stdin was not piped")))?;
    // Feed stdin from a second thread so a child that writes much output before reading all of
    // its input cannot deadlock against us.
    let written = std::thread::scope(|s| {
        let feeder = s.spawn(move || pipe.write_all(stdin));
        let out = child.wait_with_output();
        (feeder.join(), out)
    });
    let out = written
        .1
        .map_err(|e| Error::Io(format!("waiting for {shown}: {e}")))?;
    // A child that exits without reading all of stdin breaks the pipe; its status tells why.
    if let Ok(Err(e)) = &written.0 {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(Error::Io(format!("writing stdin of {shown}: {e}")));
        }
    }
    Ok(ProcessOutput {
        success: out.status.success(),
        status: out.status.to_string(),
        stdout: out.stdout,
        stderr: out.stderr,
    })
}

/// A unique path in the system temporary directory, removed (if it exists) on drop.
#[derive(Debug)]
pub struct TempPath {
    path: PathBuf,
}

impl TempPath {
    /// A fresh path `<tmp>/rawgrad-<prefix>-<pid>-<n><suffix>`; nothing is created.
    pub fn new(prefix: &str, suffix: &str) -> TempPath {
        TempPath {
            path: unique_path(&std::env::temp_dir(), prefix, suffix),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A name in `dir` that no other call in this process returns, and that other processes do not
/// return either (the pid is part of it).
pub fn unique_path(dir: &Path, prefix: &str, suffix: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    dir.join(format!(
        "rawgrad-{prefix}-{}-{n}-{nanos:x}{suffix}",
        std::process::id()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_programs_and_runs_them() {
        let sh = which("sh").expect("sh on PATH");
        assert!(which("rawgrad-no-such-program").is_none());
        let out =
            run_with_stdin(&sh, &[OsStr::new("-c"), OsStr::new("tr a-z A-Z")], b"abc").unwrap();
        assert!(out.success);
        assert_eq!(out.stdout, b"ABC");
        let bad = run_with_stdin(
            &sh,
            &[OsStr::new("-c"), OsStr::new("echo no >&2; exit 3")],
            b"",
        )
        .unwrap();
        assert!(!bad.success);
        assert!(bad.status.contains('3'), "{}", bad.status);
        assert_eq!(bad.stderr, b"no\n");
        let missing = run_with_stdin(Path::new("/nonexistent/x"), &[], b"").unwrap_err();
        assert!(
            missing.message().contains("spawning /nonexistent/x"),
            "{missing}"
        );
    }

    #[test]
    fn temp_paths_are_unique_and_removed() {
        let a = TempPath::new("t", ".so");
        let b = TempPath::new("t", ".so");
        assert_ne!(a.path(), b.path());
        std::fs::write(a.path(), b"x").unwrap();
        let p = a.path().to_path_buf();
        drop(a);
        assert!(!p.exists());
    }
}
