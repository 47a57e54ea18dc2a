//! `cargo run --bin device-info`: the AMD GPUs KFD shows (with `MOCKGPU=1`, the emulator's),
//! one block per GPU: topology ids, target, properties summary, the queue-buffer sizes KFD will
//! demand, and whether the device opens (queues, a signal round trip through both engines); then
//! the NVIDIA GPUs ([`nv`]: driver family, classes, GR info, local memory). Exits cleanly, saying
//! why, when there is nothing to show.

mod nv;

use std::path::Path;
use std::sync::Arc;

use rawgrad::driver::kfd::topology::{queue_buffer_sizes, KfdNode};
use rawgrad::hcq::{HcqBackend, HwQueue};
use rawgrad::helpers::getenv;
use rawgrad::hw::amd::targets;
use rawgrad::runtime::amd::{open_amd_device, AmdProcess};
use rawgrad::runtime::builtin::amd_driver;

fn summary(n: &KfdNode) -> String {
    let p = &n.props;
    let g = |k: &str| p.get(k).map_or("?".to_string(), |v| v.to_string());
    let cus = match (p.get("simd_count"), p.get("simd_per_cu")) {
        (Some(s), Some(c)) if c > 0 => (s / c).to_string(),
        _ => "?".into(),
    };
    let vram = p
        .get("local_mem_size")
        .map_or("?".into(), |b| format!("{} MiB", b >> 20));
    format!(
        "{cus} CUs, wave {}, {} KiB LDS, {} SDMA engines x {} queues, {} XCC, VRAM {vram}",
        g("wave_front_size"),
        g("lds_size_in_kb"),
        g("num_sdma_engines"),
        g("num_sdma_queues_per_engine"),
        p.num_xcc()
    )
}

fn describe(proc: &Arc<AmdProcess>, i: usize, n: &KfdNode) {
    let v = n.props.gfx_target_version().unwrap_or(0);
    let target = match targets::lookup(v) {
        Ok(t) => format!("{} (in the target table)", t.name),
        Err(_) => format!(
            "{} (NOT in the target table: cannot be opened)",
            targets::gfx_name(v)
        ),
    };
    println!(
        "AMD:{i}: node {} gpu_id {:#x} name {:?}",
        n.node, n.gpu_id, n.name
    );
    println!("  target: {target}");
    println!("  {}", summary(n));
    match queue_buffer_sizes(&n.props) {
        Ok(s) => {
            println!(
            "  queue buffers: EOP {:#x}, ctl stack {:#x}, CWSR {:#x} (+ debug {:#x}) = BO {:#x}",
            s.eop_buffer_size, s.ctl_stack_size, s.cwsr_size, s.debug_memory_size, s.cwsr_total_size
        )
        }
        Err(e) => println!("  queue buffers: {e}"),
    }
    match open_amd_device(proc, i, &format!("AMD:{i}")) {
        Ok(dev) => {
            let (c, s) = dev.backend().queue_ids();
            let check = (|| {
                let sig = dev.new_signal(0)?;
                let mut q = dev.backend().compute_queue();
                q.signal(&sig, 1)?;
                q.submit(dev.backend())?;
                let mut cq = dev.backend().copy_queue();
                cq.wait(&sig, 1)?.signal(&sig, 2)?;
                cq.submit(dev.backend())?;
                dev.wait_signal(&sig, 2, "device_info signal check")
            })();
            match check {
                Ok(()) => {
                    println!("  opened: compute queue {c}, SDMA queue {s}; signal round trip ok")
                }
                Err(e) => println!(
                    "  opened: compute queue {c}, SDMA queue {s}; signal check FAILED: {e}"
                ),
            }
        }
        Err(e) => println!("  open failed: {e}"),
    }
}

fn main() {
    amd();
    nv::report();
}

fn amd() {
    let mock = getenv("MOCKGPU", 0) != 0;
    if !mock && !Path::new("/dev/kfd").exists() {
        println!("no AMD GPU: /dev/kfd does not exist (set MOCKGPU=1 to see the emulated KFD)");
        return;
    }
    let proc = match amd_driver().and_then(AmdProcess::new) {
        Ok(p) => p,
        Err(e) => {
            println!("skipped: cannot open KFD: {e}");
            return;
        }
    };
    let driver = if mock {
        "emulated KFD (MOCKGPU=1)"
    } else {
        "/dev/kfd"
    };
    println!("{driver}: {} GPU node(s)", proc.nodes().len());
    if proc.nodes().is_empty() {
        println!("nothing to show: the topology lists no GPU node");
        return;
    }
    for (i, n) in proc.nodes().to_vec().iter().enumerate() {
        describe(&proc, i, n);
    }
}
