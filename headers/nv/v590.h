/*
 * rawgrad: the UVM structs that driver family 590 changed, as in the 590.48.01 and 595.45.04
 * drivers (kernel-open/nvidia-uvm/uvm_ioctl.h of both tags; sizes and offsets checked with a C
 * probe against those headers). Everything else families 590 and 595 take is v580.h's layout
 * (NVOS46, FERMI_VASPACE_A, GPFIFO_SCHEDULE, GET_CLASSLIST_V2: the same sizes as 580.142). See
 * common.h for what these files are.
 *
 * tools/gen-bindings turns this file into src/sys/nv/v590.rs, which uses the common types.
 */
#ifndef RAWGRAD_NV_V590_H
#define RAWGRAD_NV_V590_H

#include "common.h"

/* UVM_FREE (UVM_IOCTL_BASE(34)): 16 bytes, rmStatus at 8 (`length` removed; uvm_va_range.c
 * uvm_free now finds the range by its base alone) */
typedef struct {
    NvU64 base;
    NV_STATUS rmStatus;
} UVM_FREE_PARAMS;

/* UVM_UNREGISTER_CHANNEL (UVM_IOCTL_BASE(28)): 12 bytes, rmStatus at 8 (gpuUuid removed) */
typedef struct {
    NvHandle hClient;
    NvHandle hChannel;
    NV_STATUS rmStatus;
} UVM_UNREGISTER_CHANNEL_PARAMS;

#endif /* RAWGRAD_NV_V590_H */
