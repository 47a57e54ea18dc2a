/*
 * rawgrad: declarations of the NVIDIA RM escape and UVM ioctl interface that the NV backend uses,
 * the parts that are the same in every supported driver family (570, 575, 580, 590, 595).
 *
 * Written by rawgrad from NVIDIA/open-gpu-kernel-modules (field names, order,
 * sizes and offsets as measured on the 550/570/580 driver sources); not copied from NVIDIA's
 * headers. Field and macro names follow NVIDIA's spelling so a reader can grep from one to the
 * other. x86-64 Linux only. User pointers inside structs are carried as 64-bit integers (NvP64).
 *
 * tools/gen-bindings turns this file into src/sys/nv/common.rs; the per-family structs live in
 * v570.h (570, 575), v580.h (580, 590, 595) and v590.h (the UVM structs 590 changed).
 */
#ifndef RAWGRAD_NV_COMMON_H
#define RAWGRAD_NV_COMMON_H

typedef unsigned char NvU8;
typedef unsigned short NvU16;
typedef unsigned int NvU32;
typedef int NvS32;
typedef unsigned long long NvU64;
typedef NvU8 NvBool;
typedef NvU16 NvV16;
typedef NvU32 NvV32;
typedef NvU32 NvHandle;
/* A user-space pointer as the kernel sees it: 64 bits, 8-byte aligned. */
typedef NvU64 NvP64;
typedef NvU64 NvLength;
typedef NvU32 NV_STATUS;

/* ------------------------------------------------------------------------------------------ */
/* Escapes: _IOWR(NV_IOCTL_MAGIC, nr, size) on /dev/nvidiactl and /dev/nvidiaN (nv_escape.h). */
/* ------------------------------------------------------------------------------------------ */

#define NV_IOCTL_MAGIC 0x46
#define NV_IOCTL_BASE 200

#define NV_ESC_RM_ALLOC_MEMORY 0x27
#define NV_ESC_RM_FREE 0x29
#define NV_ESC_RM_CONTROL 0x2A
#define NV_ESC_RM_ALLOC 0x2B
#define NV_ESC_RM_MAP_MEMORY 0x4E
#define NV_ESC_RM_UNMAP_MEMORY 0x4F
#define NV_ESC_RM_MAP_MEMORY_DMA 0x57
#define NV_ESC_CARD_INFO 0xC8
#define NV_ESC_REGISTER_FD 0xC9
#define NV_ESC_ALLOC_OS_EVENT 0xCE
#define NV_ESC_FREE_OS_EVENT 0xCF
#define NV_ESC_STATUS_CODE 0xD1
#define NV_ESC_CHECK_VERSION_STR 0xD2
#define NV_ESC_IOCTL_XFER_CMD 0xD3
#define NV_ESC_ATTACH_GPUS_TO_FD 0xD4
#define NV_ESC_EXPORT_TO_DMABUF_FD 0xD9
#define NV_ESC_WAIT_OPEN_COMPLETE 0xDA

/* The largest argument an escape can encode (14-bit _IOC size); larger ones go through XFER. */
#define NV_ABSOLUTE_MAX_IOCTL_SIZE 16384

/* NV_ESC_RM_FREE */
typedef struct {
    NvHandle hRoot;
    NvHandle hObjectParent;
    NvHandle hObjectOld;
    NvV32 status;
} NVOS00_PARAMETERS;

/* NV_ESC_RM_ALLOC_MEMORY (on /dev/nvidiaN) */
typedef struct {
    NvHandle hRoot;
    NvHandle hObjectParent;
    NvHandle hObjectNew;
    NvV32 hClass;
    NvV32 flags;
    NvP64 pMemory;
    NvU64 limit;
    NvV32 status;
} NVOS02_PARAMETERS;

typedef struct {
    NVOS02_PARAMETERS params;
    int fd;
} nv_ioctl_nvos02_parameters_with_fd;

/* NVOS02 flags for NV01_MEMORY_SYSTEM_OS_DESCRIPTOR */
#define NVOS02_FLAGS_PHYSICALITY_SHIFT 4
#define NVOS02_FLAGS_PHYSICALITY_CONTIGUOUS 0
#define NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS 1
#define NVOS02_FLAGS_COHERENCY_SHIFT 12
#define NVOS02_FLAGS_COHERENCY_UNCACHED 0
#define NVOS02_FLAGS_COHERENCY_CACHED 1
#define NVOS02_FLAGS_COHERENCY_WRITE_COMBINE 2
#define NVOS02_FLAGS_MAPPING_SHIFT 30
#define NVOS02_FLAGS_MAPPING_DEFAULT 0
#define NVOS02_FLAGS_MAPPING_NO_MAP 1

/* NV_ESC_RM_ALLOC */
typedef struct {
    NvHandle hRoot;
    NvHandle hObjectParent;
    NvHandle hObjectNew;
    NvV32 hClass;
    NvP64 pAllocParms;
    NvU32 paramsSize;
    NvV32 status;
} NVOS21_PARAMETERS;

/* NV_ESC_RM_ALLOC with access rights (not used by rawgrad; declared for its size) */
typedef struct {
    NvHandle hRoot;
    NvHandle hObjectParent;
    NvHandle hObjectNew;
    NvV32 hClass;
    NvP64 pAllocParms;
    NvP64 pRightsRequested;
    NvU32 paramsSize;
    NvU32 flags;
    NvV32 status;
} NVOS64_PARAMETERS;

/* NV_ESC_RM_CONTROL */
typedef struct {
    NvHandle hClient;
    NvHandle hObject;
    NvV32 cmd;
    NvU32 flags;
    NvP64 params;
    NvU32 paramsSize;
    NvV32 status;
} NVOS54_PARAMETERS;

/* NV_ESC_RM_MAP_MEMORY */
typedef struct {
    NvHandle hClient;
    NvHandle hDevice;
    NvHandle hMemory;
    NvU64 offset;
    NvU64 length;
    NvP64 pLinearAddress;
    NvU32 status;
    NvU32 flags;
} NVOS33_PARAMETERS;

typedef struct {
    NVOS33_PARAMETERS params;
    int fd;
} nv_ioctl_nvos33_parameters_with_fd;

/* NVOS33 flags */
#define NVOS33_FLAGS_ACCESS_SHIFT 0
#define NVOS33_FLAGS_ACCESS_MASK 0x3
#define NVOS33_FLAGS_ACCESS_READ_WRITE 0
#define NVOS33_FLAGS_ACCESS_READ_ONLY 1
#define NVOS33_FLAGS_ACCESS_WRITE_ONLY 2
#define NVOS33_FLAGS_MAPPING_SHIFT 15
#define NVOS33_FLAGS_MAPPING_DEFAULT 0
#define NVOS33_FLAGS_MAPPING_DIRECT 1
#define NVOS33_FLAGS_MAPPING_REFLECTED 2
#define NVOS33_FLAGS_MAP_FIXED_SHIFT 18
#define NVOS33_FLAGS_RESERVE_ON_UNMAP_SHIFT 19
#define NVOS33_FLAGS_CACHING_TYPE_SHIFT 23
#define NVOS33_FLAGS_CACHING_TYPE_MASK 0x7
#define NVOS33_FLAGS_CACHING_TYPE_CACHED 0
#define NVOS33_FLAGS_CACHING_TYPE_UNCACHED 1
#define NVOS33_FLAGS_CACHING_TYPE_WRITECOMBINED 2
#define NVOS33_FLAGS_CACHING_TYPE_DEFAULT 7

/* NV_ESC_RM_UNMAP_MEMORY */
typedef struct {
    NvHandle hClient;
    NvHandle hDevice;
    NvHandle hMemory;
    NvP64 pLinearAddress;
    NvU32 status;
    NvU32 flags;
} NVOS34_PARAMETERS;

/* NVOS46 (NV_ESC_RM_MAP_MEMORY_DMA) flags; the struct itself differs per family */
#define NVOS46_FLAGS_CACHE_SNOOP_SHIFT 4
#define NVOS46_FLAGS_CACHE_SNOOP_ENABLE 1
#define NVOS46_FLAGS_PAGE_SIZE_SHIFT 8
#define NVOS46_FLAGS_PAGE_SIZE_4KB 1
#define NVOS46_FLAGS_DMA_OFFSET_FIXED_SHIFT 15
#define NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE 1

/* NV_ESC_CARD_INFO: an array of these; the count is the argument size / sizeof */
typedef struct {
    NvU32 domain;
    NvU8 bus;
    NvU8 slot;
    NvU8 function;
    NvU16 vendor_id;
    NvU16 device_id;
} nv_pci_info_t;

typedef struct {
    NvBool valid;
    nv_pci_info_t pci_info;
    NvU32 gpu_id;
    NvU16 interrupt_line;
    NvU64 reg_address;
    NvU64 reg_size;
    NvU64 fb_address;
    NvU64 fb_size;
    NvU32 minor_number;
    NvU8 dev_name[10];
} nv_ioctl_card_info_t;

/* NV_ESC_REGISTER_FD (on /dev/nvidiaN) */
typedef struct {
    int ctl_fd;
} nv_ioctl_register_fd_t;

/* NV_ESC_CHECK_VERSION_STR */
#define NV_RM_API_VERSION_STRING_LENGTH 64
#define NV_RM_API_VERSION_CMD_STRICT 0
#define NV_RM_API_VERSION_CMD_RELAXED 0x31
#define NV_RM_API_VERSION_CMD_QUERY 0x32
#define NV_RM_API_VERSION_REPLY_UNRECOGNIZED 0
#define NV_RM_API_VERSION_REPLY_RECOGNIZED 1

typedef struct {
    NvU32 cmd;
    NvU32 reply;
    char versionString[NV_RM_API_VERSION_STRING_LENGTH];
} nv_ioctl_rm_api_version_t;

/* NV_ESC_ALLOC_OS_EVENT / NV_ESC_FREE_OS_EVENT */
typedef struct {
    NvHandle hClient;
    NvHandle hDevice;
    NvU32 fd;
    NvU32 Status;
} nv_ioctl_alloc_os_event_t;

typedef struct {
    NvHandle hClient;
    NvHandle hDevice;
    NvU32 fd;
    NvU32 Status;
} nv_ioctl_free_os_event_t;

/* NV_ESC_IOCTL_XFER_CMD: an escape whose argument is larger than the _IOC size field allows */
typedef struct {
    NvU32 cmd;
    NvU32 size;
    NvP64 ptr;
} nv_ioctl_xfer_t;

/* NV_ESC_WAIT_OPEN_COMPLETE */
typedef struct {
    int rc;
    NvU32 adapterStatus;
} nv_ioctl_wait_open_complete_t;

/* ------------------------------------------------------------------------------------------ */
/* Classes (g_allclasses.h)                                                                   */
/* ------------------------------------------------------------------------------------------ */

#define NV01_NULL_OBJECT 0x0
#define NV01_ROOT 0x0
#define NV01_ROOT_NON_PRIV 0x1
#define NV01_MEMORY_SYSTEM 0x3E
#define NV01_MEMORY_LOCAL_USER 0x40
#define NV01_ROOT_CLIENT 0x41
#define NV01_MEMORY_VIRTUAL 0x70
#define NV01_MEMORY_SYSTEM_OS_DESCRIPTOR 0x71
#define NV01_EVENT_OS_EVENT 0x79
#define NV01_DEVICE_0 0x80
#define NV20_SUBDEVICE_0 0x2080
#define GT200_DEBUGGER 0x83DE
#define FERMI_CONTEXT_SHARE_A 0x9067
#define FERMI_VASPACE_A 0x90F1
#define KEPLER_CHANNEL_GROUP_A 0xA06C
#define MAXWELL_PROFILER_DEVICE 0xB2CC
#define VOLTA_USERMODE_A 0xC361
#define TURING_USERMODE_A 0xC461
#define AMPERE_USERMODE_A 0xC561
#define HOPPER_USERMODE_A 0xC661
#define BLACKWELL_USERMODE_A 0xC761
#define VOLTA_CHANNEL_GPFIFO_A 0xC36F
#define TURING_CHANNEL_GPFIFO_A 0xC46F
#define AMPERE_CHANNEL_GPFIFO_A 0xC56F
#define HOPPER_CHANNEL_GPFIFO_A 0xC86F
#define BLACKWELL_CHANNEL_GPFIFO_A 0xC96F
#define BLACKWELL_CHANNEL_GPFIFO_B 0xCA6F
#define AMPERE_COMPUTE_A 0xC6C0
#define AMPERE_COMPUTE_B 0xC7C0
#define ADA_COMPUTE_A 0xC9C0
#define HOPPER_COMPUTE_A 0xCBC0
#define BLACKWELL_COMPUTE_A 0xCDC0
#define BLACKWELL_COMPUTE_B 0xCEC0
#define AMPERE_DMA_COPY_A 0xC6B5
#define AMPERE_DMA_COPY_B 0xC7B5
#define HOPPER_DMA_COPY_A 0xC8B5
#define BLACKWELL_DMA_COPY_A 0xC9B5
#define BLACKWELL_DMA_COPY_B 0xCAB5
#define AMPERE_A 0xC697
#define AMPERE_B 0xC797
#define ADA_A 0xC997
#define HOPPER_A 0xCB97
#define HOPPER_SEC2_WORK_LAUNCH_A 0xCBA2

/* ------------------------------------------------------------------------------------------ */
/* RM_ALLOC parameters that are the same in every supported family                           */
/* ------------------------------------------------------------------------------------------ */

/* NV01_DEVICE_0 */
typedef struct {
    NvU32 deviceId;
    NvHandle hClientShare;
    NvHandle hTargetClient;
    NvHandle hTargetDevice;
    NvV32 flags;
    NvU64 vaSpaceSize;
    NvU64 vaStartInternal;
    NvU64 vaLimitInternal;
    NvV32 vaMode;
} NV0080_ALLOC_PARAMETERS;

#define NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES 0
#define NV_DEVICE_ALLOCATION_VAMODE_SINGLE_VASPACE 1
#define NV_DEVICE_ALLOCATION_VAMODE_MULTIPLE_VASPACES 2

/* NV20_SUBDEVICE_0 */
typedef struct {
    NvU32 subDeviceId;
} NV2080_ALLOC_PARAMETERS;

/* NV01_MEMORY_LOCAL_USER, NV01_MEMORY_SYSTEM */
typedef struct {
    NvU32 owner;
    NvU32 type;
    NvU32 flags;
    NvU32 width;
    NvU32 height;
    NvS32 pitch;
    NvU32 attr;
    NvU32 attr2;
    NvU32 format;
    NvU32 comprCovg;
    NvU32 zcullCovg;
    NvU64 rangeLo;
    NvU64 rangeHi;
    NvU64 size;
    NvU64 alignment;
    NvU64 offset;
    NvU64 limit;
    NvP64 address;
    NvU32 ctagOffset;
    NvHandle hVASpace;
    NvU32 internalflags;
    NvU32 tag;
    NvS32 numaNode;
} NV_MEMORY_ALLOCATION_PARAMS;

#define NVOS32_TYPE_IMAGE 0
#define NVOS32_TYPE_NOTIFIER 13

#define NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT 0x00000001
#define NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE 0x00000100
#define NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED 0x00004000
#define NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED 0x00008000
#define NVOS32_ALLOC_FLAGS_PERSISTENT_VIDMEM 0x00010000

#define NVOS32_ATTR_PAGE_SIZE_SHIFT 23
#define NVOS32_ATTR_PAGE_SIZE_DEFAULT 0
#define NVOS32_ATTR_PAGE_SIZE_4KB 1
#define NVOS32_ATTR_PAGE_SIZE_BIG 2
#define NVOS32_ATTR_PAGE_SIZE_HUGE 3
#define NVOS32_ATTR_LOCATION_SHIFT 25
#define NVOS32_ATTR_LOCATION_VIDMEM 0
#define NVOS32_ATTR_LOCATION_PCI 1
#define NVOS32_ATTR_PHYSICALITY_SHIFT 27
#define NVOS32_ATTR_PHYSICALITY_DEFAULT 0
#define NVOS32_ATTR_PHYSICALITY_NONCONTIGUOUS 1
#define NVOS32_ATTR_PHYSICALITY_CONTIGUOUS 2
#define NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS 3
#define NVOS32_ATTR_COHERENCY_SHIFT 29

#define NVOS32_ATTR2_ZBC_SHIFT 0
#define NVOS32_ATTR2_ZBC_PREFER_NO_ZBC 1
#define NVOS32_ATTR2_GPU_CACHEABLE_SHIFT 2
#define NVOS32_ATTR2_GPU_CACHEABLE_YES 1
#define NVOS32_ATTR2_GPU_CACHEABLE_NO 2
#define NVOS32_ATTR2_PAGE_SIZE_HUGE_SHIFT 20
#define NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB 1

/* NV01_MEMORY_VIRTUAL */
typedef struct {
    NvU64 offset;
    NvU64 limit;
    NvHandle hVASpace;
} NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS;

/* FERMI_VASPACE_A flags (the struct differs per family) */
#define NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED 0x8
#define NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING 0x40
#define NV_VASPACE_ALLOCATION_INDEX_GPU_NEW 0

/* KEPLER_CHANNEL_GROUP_A (TSG) */
typedef struct {
    NvHandle hObjectError;
    NvHandle hObjectEccError;
    NvHandle hVASpace;
    NvU32 engineType;
    NvBool bIsCallingContextVgpuPlugin;
} NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS;

#define NV2080_ENGINE_TYPE_NULL 0x0
#define NV2080_ENGINE_TYPE_GRAPHICS 0x1

/* FERMI_CONTEXT_SHARE_A (subcontext) */
typedef struct {
    NvHandle hVASpace;
    NvU32 flags;
    NvU32 subctxId;
} NV_CTXSHARE_ALLOCATION_PARAMETERS;

#define NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SYNC 0
#define NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC 1
#define NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SPECIFIED 2

/* Part of the channel allocation parameters (reserved fields; clients leave them zero) */
typedef struct {
    NvU64 base;
    NvU64 size;
    NvU32 addressSpace;
    NvU32 cacheAttrib;
} NV_MEMORY_DESC_PARAMS;

#define NV_MAX_SUBDEVICES 8
#define CC_CHAN_ALLOC_IV_SIZE_DWORD 3
#define CC_CHAN_ALLOC_NONCE_SIZE_DWORD 8

/* ------------------------------------------------------------------------------------------ */
/* RM controls that are the same in every supported family (src/common/sdk/nvidia/inc/ctrl/) */
/* ------------------------------------------------------------------------------------------ */

#define NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2 0x13E
#define NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2 0x205
#define NV0080_CTRL_CMD_GPU_GET_CLASSLIST 0x800201
#define NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2 0x800292
#define NV2080_CTRL_CMD_GPU_GET_GID_INFO 0x2080014A
#define NV2080_CTRL_CMD_GR_GET_INFO 0x20801201
#define NV2080_CTRL_CMD_FB_FLUSH_GPU_CACHE 0x2080130E
#define NV2080_CTRL_CMD_PERF_BOOST 0x2080200A
#define NVA06C_CTRL_CMD_GPFIFO_SCHEDULE 0xA06C0101
#define NVA06F_CTRL_CMD_GPFIFO_SCHEDULE 0xA06F0103
#define NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN 0xC36F0108

/* NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2 */
typedef struct {
    NvU32 gpuId;
    NvU32 gpuFlags;
    NvU32 deviceInstance;
    NvU32 subDeviceInstance;
    NvU32 sliStatus;
    NvU32 boardId;
    NvU32 gpuInstance;
    NvS32 numaId;
} NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS;

/* NV0080_CTRL_CMD_GPU_GET_CLASSLIST: call with classList = 0 for the count, then with a buffer */
typedef struct {
    NvU32 numClasses;
    NvP64 classList;
} NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS;

/* NV2080_CTRL_CMD_GPU_GET_GID_INFO */
#define NV2080_GPU_MAX_GID_LENGTH 256
#define NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_SHIFT 1
#define NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_ASCII 0
#define NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY 1

typedef struct {
    NvU32 index;
    NvU32 flags;
    NvU32 length;
    NvU8 data[NV2080_GPU_MAX_GID_LENGTH];
} NV2080_CTRL_GPU_GET_GID_INFO_PARAMS;

/* NV2080_CTRL_CMD_GR_GET_INFO */
typedef struct {
    NvU32 flags;
    NvU64 route;
} NV0080_CTRL_GR_ROUTE_INFO;

typedef struct {
    NvU32 index;
    NvU32 data;
} NV2080_CTRL_GR_INFO;

typedef struct {
    NvU32 grInfoListSize;
    NvP64 grInfoList;
    NV0080_CTRL_GR_ROUTE_INFO grRouteInfo;
} NV2080_CTRL_GR_GET_INFO_PARAMS;

#define NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_COUNT 0x07
#define NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_SUB_COUNT 0x09
#define NV2080_CTRL_GR_INFO_INDEX_SM_VERSION 0x0C
#define NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM 0x0D
#define NV2080_CTRL_GR_INFO_INDEX_MAX_THREADS_PER_WARP 0x0E
#define NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS 0x14
#define NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC 0x17
#define NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC 0x20

/* NV2080_CTRL_CMD_PERF_BOOST */
typedef struct {
    NvU32 flags;
    NvU32 duration;
} NV2080_CTRL_PERF_BOOST_PARAMS;

#define NV2080_CTRL_PERF_BOOST_FLAGS_CMD_CLEAR 0x0
#define NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_1LEVEL 0x1
#define NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_TO_MAX 0x2
#define NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_SHIFT 4
#define NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_YES 1
#define NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_PRIORITY_SHIFT 6
#define NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_PRIORITY_HIGH 1
#define NV2080_CTRL_PERF_BOOST_DURATION_INFINITE 0xFFFFFFFF

/* NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN */
typedef struct {
    NvU32 workSubmitToken;
} NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS;

/* NV2080_CTRL_CMD_FB_FLUSH_GPU_CACHE */
#define NV2080_CTRL_FB_FLUSH_GPU_CACHE_MAX_ADDRESSES 500
#define NV2080_CTRL_FB_FLUSH_GPU_CACHE_FLAGS_WRITE_BACK_SHIFT 2
#define NV2080_CTRL_FB_FLUSH_GPU_CACHE_FLAGS_WRITE_BACK_YES 1
#define NV2080_CTRL_FB_FLUSH_GPU_CACHE_FLAGS_INVALIDATE_SHIFT 3
#define NV2080_CTRL_FB_FLUSH_GPU_CACHE_FLAGS_INVALIDATE_YES 1
#define NV2080_CTRL_FB_FLUSH_GPU_CACHE_FLAGS_FLUSH_MODE_SHIFT 4
#define NV2080_CTRL_FB_FLUSH_GPU_CACHE_FLAGS_FLUSH_MODE_FULL_CACHE 1

typedef struct {
    NvU64 addressArray[NV2080_CTRL_FB_FLUSH_GPU_CACHE_MAX_ADDRESSES];
    NvU32 addressArraySize;
    NvU32 addressAlign;
    NvU64 memBlockSizeBytes;
    NvU32 flags;
} NV2080_CTRL_FB_FLUSH_GPU_CACHE_PARAMS;

/* ------------------------------------------------------------------------------------------ */
/* Channel memory layouts                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* USERD of AMPERE_CHANNEL_GPFIFO_A (same for HOPPER): 512 bytes per channel */
typedef struct {
    NvU32 Ignored00[0x010];
    NvU32 Put;
    NvU32 Get;
    NvU32 Reference;
    NvU32 PutHi;
    NvU32 Ignored01[0x002];
    NvU32 TopLevelGet;
    NvU32 TopLevelGetHi;
    NvU32 GetHi;
    NvU32 Ignored02[0x007];
    NvU32 Ignored03;
    NvU32 Ignored04[0x001];
    NvU32 GPGet;
    NvU32 GPPut;
    NvU32 Ignored05[0x5c];
} AmpereAControlGPFifo;

/* Usermode (doorbell) page registers */
#define NVC361_TIME_0 0x80
#define NVC361_TIME_1 0x84
#define NVC361_NOTIFY_CHANNEL_PENDING 0x90
#define NV_USERMODE_MAP_SIZE 0x10000

/* Error notifier records written by RM into the channel's hObjectError memory */
typedef struct {
    NvU32 nanoseconds[2];
} NvNotificationTimeStamp;

typedef struct {
    NvNotificationTimeStamp timeStamp;
    NvV32 info32;
    NvV16 info16;
    NvV16 status;
} NvNotification;

#define NV_CHANNELGPFIFO_NOTIFICATION_TYPE_ERROR 0
#define NV_CHANNELGPFIFO_NOTIFICATION_TYPE_WORK_SUBMIT_TOKEN 1
#define NV_CHANNELGPFIFO_NOTIFICATION_TYPE_KEY_ROTATION_STATUS 2
#define NV_NOTIFICATION_STATUS_IN_PROGRESS 0x8000
#define NV_NOTIFICATION_STATUS_DONE_SUCCESS 0x0
/* What RM writes into `status` of record 0 on a robust-channel (RC) error (rawgrad's name: RM
 * passes the literal 0xffff) */
#define NV_NOTIFICATION_STATUS_RC_ERROR 0xFFFF
/* Robust-channel error types written into info32 (the Xid numbers) */
#define ROBUST_CHANNEL_GR_EXCEPTION 13
#define ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT 31

/* ------------------------------------------------------------------------------------------ */
/* UVM (/dev/nvidia-uvm): plain request numbers, no _IOC encoding (uvm_ioctl.h)               */
/* ------------------------------------------------------------------------------------------ */

#define UVM_INITIALIZE 0x30000001
#define UVM_REGISTER_GPU_VASPACE 25
#define UVM_REGISTER_CHANNEL 27
/* UVM_IOCTL_BASE(28) in every family 570..595 (kernel-open/nvidia-uvm/uvm_ioctl.h); its params
 * are per family (v570.h/v580.h: with gpuUuid, v590.h: without) */
#define UVM_UNREGISTER_CHANNEL 28
#define UVM_ENABLE_PEER_ACCESS 29
#define UVM_MAP_EXTERNAL_ALLOCATION 33
#define UVM_FREE 34
#define UVM_REGISTER_GPU 37
#define UVM_CREATE_EXTERNAL_RANGE 73
#define UVM_MM_INITIALIZE 75

#define UVM_INIT_FLAGS_MULTI_PROCESS_SHARING_MODE 0x2
#define UVM_MAX_GPUS 256

typedef struct {
    NvU8 uuid[16];
} NvProcessorUuid;

typedef struct {
    NvU64 flags;
    NV_STATUS rmStatus;
} UVM_INITIALIZE_PARAMS;

typedef struct {
    NvS32 uvmFd;
    NV_STATUS rmStatus;
} UVM_MM_INITIALIZE_PARAMS;

typedef struct {
    NvProcessorUuid gpu_uuid;
    NvBool numaEnabled;
    NvS32 numaNodeId;
    NvS32 rmCtrlFd;
    NvHandle hClient;
    NvHandle hSmcPartRef;
    NV_STATUS rmStatus;
} UVM_REGISTER_GPU_PARAMS;

typedef struct {
    NvProcessorUuid gpuUuid;
    NvS32 rmCtrlFd;
    NvHandle hClient;
    NvHandle hVaSpace;
    NV_STATUS rmStatus;
} UVM_REGISTER_GPU_VASPACE_PARAMS;

typedef struct {
    NvProcessorUuid gpuUuid;
    NvS32 rmCtrlFd;
    NvHandle hClient;
    NvHandle hChannel;
    NvU64 base;
    NvU64 length;
    NV_STATUS rmStatus;
} UVM_REGISTER_CHANNEL_PARAMS;

typedef struct {
    NvU64 base;
    NvU64 length;
    NV_STATUS rmStatus;
} UVM_CREATE_EXTERNAL_RANGE_PARAMS;

#define UvmGpuMappingTypeDefault 0
#define UvmGpuMappingTypeReadWriteAtomic 1
#define UvmGpuMappingTypeReadWrite 2
#define UvmGpuMappingTypeReadOnly 3
#define UvmGpuCachingTypeDefault 0
#define UvmGpuCachingTypeForceUncached 1
#define UvmGpuCachingTypeForceCached 2

typedef struct {
    NvProcessorUuid gpuUuid;
    NvU32 gpuMappingType;
    NvU32 gpuCachingType;
    NvU32 gpuFormatType;
    NvU32 gpuElementBits;
    NvU32 gpuCompressionType;
} UvmGpuMappingAttributes;

typedef struct {
    NvU64 base;
    NvU64 length;
    NvU64 offset;
    UvmGpuMappingAttributes perGpuAttributes[UVM_MAX_GPUS];
    NvU64 gpuAttributesCount;
    NvS32 rmCtrlFd;
    NvHandle hClient;
    NvHandle hMemory;
    NV_STATUS rmStatus;
} UVM_MAP_EXTERNAL_ALLOCATION_PARAMS;

/* UVM_FREE_PARAMS and UVM_UNREGISTER_CHANNEL_PARAMS are per family (v570.h, v580.h, v590.h) */

typedef struct {
    NvProcessorUuid gpuUuidA;
    NvProcessorUuid gpuUuidB;
    NV_STATUS rmStatus;
} UVM_ENABLE_PEER_ACCESS_PARAMS;

/* ------------------------------------------------------------------------------------------ */
/* RM status codes (nvstatuscodes; the ones met in practice and the common neighbours)        */
/* ------------------------------------------------------------------------------------------ */

#define NV_OK 0x00000000
#define NV_ERR_GENERIC 0x0000FFFF
#define NV_ERR_BROKEN_FB 0x00000001
#define NV_ERR_BUFFER_TOO_SMALL 0x00000002
#define NV_ERR_BUSY_RETRY 0x00000003
#define NV_ERR_CALLBACK_NOT_SCHEDULED 0x00000004
#define NV_ERR_CARD_NOT_PRESENT 0x00000005
#define NV_ERR_CYCLE_DETECTED 0x00000006
#define NV_ERR_DMA_IN_USE 0x00000007
#define NV_ERR_DMA_MEM_NOT_LOCKED 0x00000008
#define NV_ERR_DMA_MEM_NOT_UNLOCKED 0x00000009
#define NV_ERR_DUAL_LINK_INUSE 0x0000000A
#define NV_ERR_ECC_ERROR 0x0000000B
#define NV_ERR_FIFO_BAD_ACCESS 0x0000000C
#define NV_ERR_FREQ_NOT_SUPPORTED 0x0000000D
#define NV_ERR_GPU_DMA_NOT_INITIALIZED 0x0000000E
#define NV_ERR_GPU_IS_LOST 0x0000000F
#define NV_ERR_GPU_IN_FULLCHIP_RESET 0x00000010
#define NV_ERR_GPU_NOT_FULL_POWER 0x00000011
#define NV_ERR_GPU_UUID_NOT_FOUND 0x00000012
#define NV_ERR_HOT_SWITCH 0x00000013
#define NV_ERR_I2C_ERROR 0x00000014
#define NV_ERR_I2C_SPEED_TOO_HIGH 0x00000015
#define NV_ERR_ILLEGAL_ACTION 0x00000016
#define NV_ERR_IN_USE 0x00000017
#define NV_ERR_INFLATE_COMPRESSED_DATA_FAILED 0x00000018
#define NV_ERR_INSERT_DUPLICATE_NAME 0x00000019
#define NV_ERR_INSUFFICIENT_RESOURCES 0x0000001A
#define NV_ERR_INSUFFICIENT_PERMISSIONS 0x0000001B
#define NV_ERR_INSUFFICIENT_POWER 0x0000001C
#define NV_ERR_INVALID_ACCESS_TYPE 0x0000001D
#define NV_ERR_INVALID_ADDRESS 0x0000001E
#define NV_ERR_INVALID_ARGUMENT 0x0000001F
#define NV_ERR_INVALID_BASE 0x00000020
#define NV_ERR_INVALID_CHANNEL 0x00000021
#define NV_ERR_INVALID_CLASS 0x00000022
#define NV_ERR_INVALID_CLIENT 0x00000023
#define NV_ERR_INVALID_COMMAND 0x00000024
#define NV_ERR_INVALID_DATA 0x00000025
#define NV_ERR_INVALID_DEVICE 0x00000026
#define NV_ERR_INVALID_DMA_SPECIFIER 0x00000027
#define NV_ERR_INVALID_EVENT 0x00000028
#define NV_ERR_INVALID_FLAGS 0x00000029
#define NV_ERR_INVALID_FUNCTION 0x0000002A
#define NV_ERR_INVALID_HEAP 0x0000002B
#define NV_ERR_INVALID_INDEX 0x0000002C
#define NV_ERR_INVALID_IRQ_LEVEL 0x0000002D
#define NV_ERR_INVALID_LIMIT 0x0000002E
#define NV_ERR_INVALID_LOCK_STATE 0x0000002F
#define NV_ERR_INVALID_METHOD 0x00000030
#define NV_ERR_INVALID_OBJECT 0x00000031
#define NV_ERR_INVALID_OBJECT_BUFFER 0x00000032
#define NV_ERR_INVALID_OBJECT_HANDLE 0x00000033
#define NV_ERR_INVALID_OBJECT_NEW 0x00000034
#define NV_ERR_INVALID_OBJECT_OLD 0x00000035
#define NV_ERR_INVALID_OBJECT_PARENT 0x00000036
#define NV_ERR_INVALID_OFFSET 0x00000037
#define NV_ERR_INVALID_OPERATION 0x00000038
#define NV_ERR_INVALID_OWNER 0x00000039
#define NV_ERR_INVALID_PARAM_STRUCT 0x0000003A
#define NV_ERR_INVALID_PARAMETER 0x0000003B
#define NV_ERR_INVALID_PATH 0x0000003C
#define NV_ERR_INVALID_POINTER 0x0000003D
#define NV_ERR_INVALID_REGISTRY_KEY 0x0000003E
#define NV_ERR_INVALID_REQUEST 0x0000003F
#define NV_ERR_INVALID_STATE 0x00000040
#define NV_ERR_INVALID_STRING_LENGTH 0x00000041
#define NV_ERR_INVALID_READ 0x00000042
#define NV_ERR_INVALID_WRITE 0x00000043
#define NV_ERR_INVALID_XLATE 0x00000044
#define NV_ERR_IRQ_NOT_FIRING 0x00000045
#define NV_ERR_IRQ_EDGE_TRIGGERED 0x00000046
#define NV_ERR_MEMORY_TRAINING_FAILED 0x00000047
#define NV_ERR_MISMATCHED_SLAVE 0x00000048
#define NV_ERR_MISMATCHED_TARGET 0x00000049
#define NV_ERR_MISSING_TABLE_ENTRY 0x0000004A
#define NV_ERR_MODULE_LOAD_FAILED 0x0000004B
#define NV_ERR_MORE_DATA_AVAILABLE 0x0000004C
#define NV_ERR_MORE_PROCESSING_REQUIRED 0x0000004D
#define NV_ERR_MULTIPLE_MEMORY_TYPES 0x0000004E
#define NV_ERR_NO_FREE_FIFOS 0x0000004F
#define NV_ERR_NO_INTR_PENDING 0x00000050
#define NV_ERR_NO_MEMORY 0x00000051
#define NV_ERR_NO_SUCH_DOMAIN 0x00000052
#define NV_ERR_NO_VALID_PATH 0x00000053
#define NV_ERR_NOT_COMPATIBLE 0x00000054
#define NV_ERR_NOT_READY 0x00000055
#define NV_ERR_NOT_SUPPORTED 0x00000056
#define NV_ERR_OBJECT_NOT_FOUND 0x00000057
#define NV_ERR_OBJECT_TYPE_MISMATCH 0x00000058
#define NV_ERR_OPERATING_SYSTEM 0x00000059
#define NV_ERR_OTHER_DEVICE_FOUND 0x0000005A
#define NV_ERR_OUT_OF_RANGE 0x0000005B
#define NV_ERR_OVERLAPPING_UVM_COMMIT 0x0000005C
#define NV_ERR_PAGE_TABLE_NOT_AVAIL 0x0000005D
#define NV_ERR_PID_NOT_FOUND 0x0000005E
#define NV_ERR_PROTECTION_FAULT 0x0000005F
#define NV_ERR_RC_ERROR 0x00000060
#define NV_ERR_REJECTED_VBIOS 0x00000061
#define NV_ERR_RESET_REQUIRED 0x00000062
#define NV_ERR_STATE_IN_USE 0x00000063
#define NV_ERR_SIGNAL_PENDING 0x00000064
#define NV_ERR_TIMEOUT 0x00000065
#define NV_ERR_TIMEOUT_RETRY 0x00000066
#define NV_ERR_TOO_MANY_PRIMARIES 0x00000067
#define NV_ERR_UVM_ADDRESS_IN_USE 0x00000068
#define NV_ERR_MAX_SESSION_LIMIT_REACHED 0x00000069
#define NV_ERR_LIB_RM_VERSION_MISMATCH 0x0000006A
#define NV_ERR_PRIV_SEC_VIOLATION 0x0000006B
#define NV_ERR_GPU_IN_DEBUG_MODE 0x0000006C
#define NV_ERR_FEATURE_NOT_ENABLED 0x0000006D
#define NV_ERR_RESOURCE_LOST 0x0000006E
#define NV_ERR_PMU_NOT_READY 0x0000006F
#define NV_ERR_FLCN_ERROR 0x00000070
#define NV_ERR_FATAL_ERROR 0x00000071
#define NV_ERR_MEMORY_ERROR 0x00000072
#define NV_ERR_INVALID_LICENSE 0x00000073
#define NV_ERR_NVLINK_INIT_ERROR 0x00000074
#define NV_ERR_NVLINK_MINION_ERROR 0x00000075
#define NV_ERR_NVLINK_CLOCK_ERROR 0x00000076
#define NV_ERR_NVLINK_TRAINING_ERROR 0x00000077
#define NV_ERR_NVLINK_CONFIGURATION_ERROR 0x00000078
#define NV_ERR_RISCV_ERROR 0x00000079
#define NV_ERR_FABRIC_MANAGER_NOT_PRESENT 0x0000007A
#define NV_ERR_ALREADY_SIGNALLED 0x0000007B
#define NV_ERR_QUEUE_TASK_SLOT_NOT_AVAILABLE 0x0000007C
#define NV_ERR_KEY_ROTATION_IN_PROGRESS 0x0000007D
#define NV_ERR_TEST_ONLY_CODE_NOT_ENABLED 0x0000007E
#define NV_ERR_SECURE_BOOT_FAILED 0x0000007F
#define NV_ERR_INSUFFICIENT_ZBC_ENTRY 0x00000080
#define NV_ERR_NVLINK_FABRIC_NOT_READY 0x00000081
#define NV_ERR_NVLINK_FABRIC_FAILURE 0x00000082
#define NV_ERR_GPU_MEMORY_ONLINING_FAILURE 0x00000083
#define NV_ERR_REDUCTION_MANAGER_NOT_AVAILABLE 0x00000084
#define NV_ERR_THRESHOLD_CROSSED 0x00000085
#define NV_ERR_RESOURCE_RETIREMENT_ERROR 0x00000086
#define NV_ERR_FABRIC_STATE_OUT_OF_SYNC 0x00000087
#define NV_ERR_BUFFER_FULL 0x00000088
#define NV_ERR_BUFFER_EMPTY 0x00000089
#define NV_ERR_MC_FLA_OFFSET_TABLE_FULL 0x0000008A
#define NV_WARN_HOT_SWITCH 0x00010001
#define NV_WARN_INCORRECT_PERFMON_DATA 0x00010002
#define NV_WARN_MISMATCHED_SLAVE 0x00010003
#define NV_WARN_MISMATCHED_TARGET 0x00010004
#define NV_WARN_MORE_PROCESSING_REQUIRED 0x00010005
#define NV_WARN_NOTHING_TO_DO 0x00010006
#define NV_WARN_NULL_OBJECT 0x00010007

#endif /* RAWGRAD_NV_COMMON_H */
