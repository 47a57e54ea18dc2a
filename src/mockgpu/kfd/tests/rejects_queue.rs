//! CREATE_QUEUE variants the emulator must refuse: KFD's property checks and the Linux >= 6.12
//! queue-buffer checks, each with its errno and the check named in the message.

use super::*;
use crate::driver::kfd::*;

type Args = kfd_ioctl_create_queue_args;

/// A device with one compute queue's buffers, ready to be broken one field at a time.
fn compute_setup() -> (Arc<dyn Driver>, Dev, QueueBufs) {
    let (drv, _) = emu(1);
    let dev = open_gpu(&drv, 0).unwrap();
    let qb = dev.queue_buffers(0x4000, true).unwrap();
    (drv, dev, qb)
}

fn create(dev: &Dev, a: &Args) -> Result<u32> {
    let mut a = *a;
    ops::create_queue(dev.drv.as_ref(), dev.kfd, &mut a).map(|_| a.queue_id)
}

#[test]
fn property_checks() {
    let (_drv, dev, qb) = compute_setup();
    let good = dev.queue_args(&qb);
    let pct = Args {
        queue_percentage: 101,
        ..good
    };
    fails(
        create(&dev, &pct),
        libc::EINVAL,
        "queue_percentage 101 exceeds 100",
    );
    fails(
        create(
            &dev,
            &Args {
                queue_priority: 16,
                ..good
            },
        ),
        libc::EINVAL,
        "queue_priority 16",
    );
    fails(
        create(
            &dev,
            &Args {
                ring_size: 0x3000,
                ..good
            },
        ),
        libc::EINVAL,
        "not a power of two",
    );
    fails(
        create(
            &dev,
            &Args {
                ring_size: 512,
                ..good
            },
        ),
        libc::EINVAL,
        "KFD_MIN_QUEUE_RING_SIZE",
    );
    let kernel = Args {
        read_pointer_address: 0xFFFF_8000_0000_0000,
        ..good
    };
    fails(create(&dev, &kernel), libc::EFAULT, "read_pointer_address");
    fails(
        create(
            &dev,
            &Args {
                queue_type: 7,
                ..good
            },
        ),
        524,
        "queue_type 7",
    );
    fails(
        create(
            &dev,
            &Args {
                gpu_id: 0xBAD,
                ..good
            },
        ),
        libc::EINVAL,
        "gpu_id 0xbad",
    );
    assert_eq!(create(&dev, &good).unwrap(), 0, "queue ids start at 0");
}

#[test]
fn size_checks_linux_6_12() {
    let (_drv, dev, qb) = compute_setup();
    let good = dev.queue_args(&qb);
    let s = dev.sizes;
    // tinygrad 0.9.1/0.9.2 passed ctl_stack_size 0 and the CWSR *buffer* size as
    // ctx_save_restore_size; both are refused by Linux >= 6.12.
    let r = create(
        &dev,
        &Args {
            ctl_stack_size: 0,
            ..good
        },
    );
    fails(
        r,
        libc::EINVAL,
        "not the device's control-stack size 0xa000",
    );
    let r = create(
        &dev,
        &Args {
            ctx_save_restore_size: s.cwsr_total_size as u32,
            ..good
        },
    );
    fails(r, libc::EINVAL, "not the device's CWSR size 0x2bea000");
    let r = create(
        &dev,
        &Args {
            eop_buffer_size: 0x2000,
            ..good
        },
    );
    fails(r, libc::EINVAL, "not the device's EOP size 0x1000");
    let r = create(
        &dev,
        &Args {
            ctx_save_restore_address: 0,
            ..good
        },
    );
    fails(r, libc::EINVAL, "CWSR area 0x0 is not inside a buffer");
    let short = dev.alloc(s.cwsr_total_size - 0x1000, VRAM, false).unwrap();
    let r = create(
        &dev,
        &Args {
            ctx_save_restore_address: short.va,
            ..good
        },
    );
    fails(r, libc::EINVAL, "CWSR area buffer");
    create(&dev, &good).unwrap();
}

#[test]
fn placement_checks_linux_6_12() {
    let (_drv, dev, qb) = compute_setup();
    let good = dev.queue_args(&qb);
    let r = create(
        &dev,
        &Args {
            read_pointer_address: qb.ring.va + 8,
            ..good
        },
    );
    fails(r, libc::EINVAL, "read pointer buffer");
    let r = create(
        &dev,
        &Args {
            read_pointer_address: 0x1000,
            ..good
        },
    );
    fails(
        r,
        libc::EINVAL,
        "read pointer 0x1000 is not inside a buffer mapped on this GPU",
    );
    let r = create(
        &dev,
        &Args {
            ring_size: 0x2000,
            ..good
        },
    );
    fails(r, libc::EINVAL, "exactly 0x2000");
    let r = create(
        &dev,
        &Args {
            ring_base_address: qb.ring.va + 0x1000,
            ..good
        },
    );
    fails(r, libc::EINVAL, "first page of its buffer");
    // A two-page pointer buffer: pointers in its second page, then in its first.
    let two = dev.alloc(0x2000, GTT_UC, true).unwrap();
    let second = Args {
        read_pointer_address: two.va + 0x1008,
        write_pointer_address: two.va + 0x1000,
        ..good
    };
    fails(create(&dev, &second), libc::EINVAL, "write pointer");
    let first = Args {
        read_pointer_address: two.va + 8,
        write_pointer_address: two.va,
        ..good
    };
    fails(create(&dev, &first), libc::EINVAL, "exactly 0x1000");
    // A buffer allocated but not mapped on this GPU does not count.
    let unmapped = dev.alloc(0x1000, GTT_UC, false).unwrap();
    let d = dev.drv.as_ref();
    ops::unmap_memory_from_gpu(d, dev.kfd, unmapped.alloc.handle, &[dev.gpu_id]).unwrap();
    let r = create(
        &dev,
        &Args {
            write_pointer_address: unmapped.va,
            read_pointer_address: unmapped.va + 8,
            ..good
        },
    );
    fails(r, libc::EINVAL, "not inside a buffer mapped");
}

#[test]
fn queue_buffers_are_pinned_while_the_queue_lives() {
    let (drv, dev, qb) = compute_setup();
    let (d, kfd, gpu) = (drv.as_ref(), dev.kfd, dev.gpu_id);
    let id = create(&dev, &dev.queue_args(&qb)).unwrap();
    let r = ops::unmap_memory_from_gpu(d, kfd, qb.ring.alloc.handle, &[gpu]);
    fails(r, libc::EBUSY, "destroy the queue first");
    fails(
        ops::destroy_queue(d, kfd, id + 1),
        libc::EINVAL,
        "does not match any queue",
    );
    ops::destroy_queue(d, kfd, id).unwrap();
    dev.free_queue_buffers(qb).unwrap();
}

#[test]
fn sdma_queue_limits() {
    let (drv, _) = emu(1);
    let dev = open_gpu(&drv, 0).unwrap();
    // Keep every queue's buffers alive: dropping a CPU view frees its VA for reuse while the GPU
    // buffer still occupies it.
    let mut made = Vec::new();
    for _ in 0..12 {
        let qb = dev.queue_buffers(0x1000, false).unwrap();
        made.push((create(&dev, &dev.queue_args(&qb)).unwrap(), qb));
    }
    let qb = dev.queue_buffers(0x1000, false).unwrap();
    fails(
        create(&dev, &dev.queue_args(&qb)),
        libc::ENOMEM,
        "2 engines x 6 queues",
    );
    let xgmi = Args {
        queue_type: KFD_IOC_QUEUE_TYPE_SDMA_XGMI,
        ..dev.queue_args(&qb)
    };
    fails(create(&dev, &xgmi), libc::ENOMEM, "0 engines");
    let slots: Vec<u64> = made.iter().map(|(id, _)| *id as u64).collect();
    assert_eq!(slots, (0..12).collect::<Vec<u64>>());
}
