//! The first run of the NV backend on an NVIDIA host, step by step with a status
//! line each: the bring-up of `NV:0` (each bring-up step logs itself), GR info, local memory,
//! USERD before the first submit, a host semaphore release, a copy-engine copy, a kernel writing a
//! constant (the launch actions tried in turn), a kernel with arguments at cbuf0, one queue reset
//! with the VA balance checked; then a summary.
//!
//! Usage: `nv_first_run [FIXTURES_DIR]` with `FIXTURES_DIR` holding `fill_sm<NN>.cubin` and
//! `add_n_sm<NN>.cubin` (default: `tests/fixtures/cubin`). With `MOCKGPU=1` it runs on the
//! emulator with mock cubins instead. Exit status 0 when every step passed.

use std::path::PathBuf;
use std::process::ExitCode;

use rawgrad::helpers::Context;
use rawgrad::runtime::builtin::{nv_driver, nv_first_run_kernels};
use rawgrad::runtime::nv::first_run::first_run;

fn main() -> ExitCode {
    let _log = Context::new(&[("NV_BRINGUP_LOG", 1)]);
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("tests/fixtures/cubin"));
    let drv = match nv_driver() {
        Ok(d) => d,
        Err(e) => {
            println!("[first-run] driver: FAIL {e}");
            return ExitCode::from(2);
        }
    };
    match first_run(drv, nv_first_run_kernels(&dir)) {
        Ok(r) => {
            let failed: Vec<String> = r
                .failed_actions
                .iter()
                .map(|(a, _)| format!("{:#x}", *a as u32))
                .collect();
            let va = |(low, high): (u64, u64)| format!("low {low:#x} / GPU-only {high:#x}");
            println!(
                "[first-run] all steps passed: driver {}, {}; USERD (GPGet, GPPut) before the first submit {:?}; launch action {:#x} {} (failed before it: [{}]); VA free before the reset {}, after {}",
                r.driver,
                r.gr.describe(),
                r.first_userd,
                r.launch_action as u32,
                r.launch_action.name(),
                failed.join(", "),
                va(r.va_before_reset),
                va(r.va_after_reset)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("[first-run] stopped: {e}");
            ExitCode::FAILURE
        }
    }
}
