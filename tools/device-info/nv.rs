//! The NVIDIA half of `device-info`: the driver (version, the struct layouts it takes), each GPU
//! CARD_INFO lists, and for each one that opens its classes, QMD version, launch action, the GR
//! info indices (0x07, 0x09, 0x0D, 0x14, 0x17, 0x20) and the local memory sized from them.
//! With `MOCKGPU=1` the emulated driver's (`MOCKGPU_NV_*`).

use std::path::Path;

use rawgrad::helpers::getenv;
use rawgrad::runtime::builtin::nv_driver;
use rawgrad::runtime::nv::{open_nv_device, NvProcess};

/// Print the NV block (or why there is none).
pub fn report() {
    let mock = getenv("MOCKGPU", 0) != 0;
    if !mock && !Path::new("/dev/nvidiactl").exists() {
        println!(
            "no NVIDIA GPU: /dev/nvidiactl does not exist (set MOCKGPU=1 to see the emulated RM)"
        );
        return;
    }
    let proc = match nv_driver().and_then(NvProcess::new) {
        Ok(p) => p,
        Err(e) => {
            println!("NV skipped: cannot open the NVIDIA driver: {e}");
            return;
        }
    };
    let how = if mock {
        "emulated RM/UVM (MOCKGPU=1)"
    } else {
        "/dev/nvidiactl"
    };
    println!(
        "{how}: NVIDIA driver {} (struct layouts of family {}), {} GPU(s)",
        proc.ctl().version(),
        proc.family(),
        proc.cards().len()
    );
    for (i, c) in proc.cards().to_vec().iter().enumerate() {
        println!(
            "NV:{i}: gpu_id {:#x} minor {} PCI {:04x}:{:04x}",
            c.gpu_id, c.minor_number, c.pci_info.vendor_id, c.pci_info.device_id
        );
        match open_nv_device(&proc, i, &format!("NV:{i}")) {
            Ok(dev) => {
                let b = dev.backend();
                let a = b.classes().arch;
                println!(
                    "  {} ({:#x}), copy {:#x}, channel {:#x}, usermode {:#x}, QMD {}, launch action {:#x} ({})",
                    a.compute_class_name,
                    a.compute_class,
                    b.classes().copy.class,
                    b.classes().channel.class,
                    b.classes().usermode,
                    a.qmd_version.name(),
                    b.pcas_action() as u32,
                    b.pcas_action().name()
                );
                println!("  {}", b.gr().describe());
                let (per_thread, per_tpc, total) = b.local_memory();
                println!(
                    "  local memory: {per_thread:#x} bytes/thread, {per_tpc:#x} bytes/TPC x {} TPC slots = {total:#x} bytes",
                    b.gr().tpc_slots()
                );
            }
            Err(e) => println!("  open failed: {e}"),
        }
    }
}
