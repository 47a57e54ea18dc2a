//! Real-hardware tests: the emulator's bring-up sequence run against the kernel's `/dev/kfd`.
//! They run only where `/dev/kfd` exists and otherwise skip, printing why (CI and most dev boxes).

use std::sync::Arc;

use super::api::Driver;
use super::kfd::topology::read_topology;
use super::real::RealDriver;
use crate::mockgpu::kfd::tests::bringup::run_bringup;

fn real_kfd() -> Option<Arc<dyn Driver>> {
    if !std::path::Path::new("/dev/kfd").exists() {
        eprintln!("skipped: /dev/kfd does not exist (no AMD GPU with the amdgpu/KFD driver here)");
        return None;
    }
    Some(Arc::new(RealDriver::new()))
}

#[test]
fn real_topology_has_a_gpu() {
    let Some(drv) = real_kfd() else { return };
    let nodes = read_topology(drv.as_ref()).unwrap();
    assert!(
        !nodes.is_empty(),
        "/dev/kfd exists but the topology lists no GPU node"
    );
    for n in &nodes {
        assert!(
            n.props.gfx_target_version().unwrap() >= 90000,
            "{}: {:?}",
            n.node,
            n.props.gfx_name()
        );
    }
}

#[test]
fn real_bringup_sequence() {
    let Some(drv) = real_kfd() else { return };
    let r = run_bringup(&drv, true).unwrap();
    assert_ne!(r.compute.0, r.sdma.0);
}

#[test]
fn open_driver_follows_mockgpu() {
    let _g = crate::helpers::Context::new(&[("MOCKGPU", 1), ("MOCKGPU_COUNT", 3)]);
    let drv = crate::mockgpu::open_driver().unwrap();
    assert_eq!(drv.name(), "emu");
    assert_eq!(read_topology(drv.as_ref()).unwrap().len(), 3);
    drop(_g);
    let _g = crate::helpers::Context::new(&[("MOCKGPU", 0)]);
    assert_eq!(crate::mockgpu::open_driver().unwrap().name(), "real");
}
