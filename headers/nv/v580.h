/*
 * rawgrad: the NVIDIA RM structs whose layout depends on the driver family, as in the 580.142
 * driver (family 580.x). See common.h for what these files are and where the facts come from
 * (the sizes that changed between the tags 550.54.15, 570.86.16 and 580.142).
 *
 * tools/gen-bindings turns this file into src/sys/nv/v580.rs, which uses the common types.
 */
#ifndef RAWGRAD_NV_V580_H
#define RAWGRAD_NV_V580_H

#include "common.h"

/* NV_ESC_RM_MAP_MEMORY_DMA: 64 bytes */
typedef struct {
    NvHandle hClient;
    NvHandle hDevice;
    NvHandle hDma;
    NvHandle hMemory;
    NvU64 offset;
    NvU64 length;
    NvV32 flags;
    NvV32 flags2;
    NvV32 kindOverride;
    NvU64 dmaOffset;
    NvV32 status;
} NVOS46_PARAMETERS;

/* FERMI_VASPACE_A allocation parameters: 56 bytes */
typedef struct {
    NvU32 index;
    NvV32 flags;
    NvU64 vaSize;
    NvU64 vaStartInternal;
    NvU64 vaLimitInternal;
    NvU32 bigPageSize;
    NvU64 vaBase;
    NvU32 pasid;
} NV_VASPACE_ALLOCATION_PARAMETERS;

/* NVA06F/NVA06C_CTRL_CMD_GPFIFO_SCHEDULE: 3 bytes */
typedef struct {
    NvBool bEnable;
    NvBool bSkipSubmit;
    NvBool bSkipEnable;
} NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS;

typedef NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS;

/* NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2: a fixed array (804 bytes); prefer the count-first
 * NV0080_CTRL_CMD_GPU_GET_CLASSLIST */
#define NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE 200

typedef struct {
    NvU32 numClasses;
    NvU32 classList[NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE];
} NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS;

/* Channel (GPFIFO class) allocation parameters: 368 bytes (360 in 550, before tpcConfigID) */
typedef struct {
    NvHandle hObjectError;
    NvHandle hObjectBuffer;
    NvU64 gpFifoOffset;
    NvU32 gpFifoEntries;
    NvU32 flags;
    NvHandle hContextShare;
    NvHandle hVASpace;
    NvHandle hUserdMemory[NV_MAX_SUBDEVICES];
    NvU64 userdOffset[NV_MAX_SUBDEVICES];
    NvU32 engineType;
    NvU32 cid;
    NvU32 subDeviceId;
    NvHandle hObjectEccError;
    NV_MEMORY_DESC_PARAMS instanceMem;
    NV_MEMORY_DESC_PARAMS userdMem;
    NV_MEMORY_DESC_PARAMS ramfcMem;
    NV_MEMORY_DESC_PARAMS mthdbufMem;
    NvHandle hPhysChannelGroup;
    NvU32 internalFlags;
    NV_MEMORY_DESC_PARAMS errorNotifierMem;
    NV_MEMORY_DESC_PARAMS eccErrorNotifierMem;
    NvU32 ProcessID;
    NvU32 SubProcessID;
    NvU32 encryptIv[CC_CHAN_ALLOC_IV_SIZE_DWORD];
    NvU32 decryptIv[CC_CHAN_ALLOC_IV_SIZE_DWORD];
    NvU32 hmacNonce[CC_CHAN_ALLOC_NONCE_SIZE_DWORD];
    NvU32 tpcConfigID;
} NV_CHANNEL_ALLOC_PARAMS;

/* NV01_ROOT_CLIENT allocation parameters: 120 bytes (108 in 550) */
#define NV_PROC_NAME_MAX_LENGTH 100

typedef struct {
    NvHandle hClient;
    NvU32 processID;
    char szProcessName[NV_PROC_NAME_MAX_LENGTH];
    NvP64 pOsPidInfo;
} NV0000_ALLOC_PARAMETERS;

/* NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2: 1032 bytes (776 in 550, before driverBranch) */
#define NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE 256

typedef struct {
    char driverVersionBuffer[NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE];
    char versionBuffer[NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE];
    char driverBranch[NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE];
    char titleBuffer[NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_MAX_STRING_SIZE];
    NvU32 changelistNumber;
    NvU32 officialChangelistNumber;
} NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS;

/* UVM_FREE (UVM_IOCTL_BASE(34)): 24 bytes, rmStatus at 16 (kernel-open/nvidia-uvm/uvm_ioctl.h
 * of 570.86.16, 575.64.05 and 580.142: `length` is still there; 590 removed it) */
typedef struct {
    NvU64 base;
    NvU64 length;
    NV_STATUS rmStatus;
} UVM_FREE_PARAMS;

/* UVM_UNREGISTER_CHANNEL (UVM_IOCTL_BASE(28)): 28 bytes, rmStatus at 24 (same header and tags;
 * the handler, uvm_user_channel.c uvm_api_unregister_channel, never reads gpuUuid) */
typedef struct {
    NvProcessorUuid gpuUuid;
    NvHandle hClient;
    NvHandle hChannel;
    NV_STATUS rmStatus;
} UVM_UNREGISTER_CHANNEL_PARAMS;

#endif /* RAWGRAD_NV_V580_H */
