/* Shim for gen-bindings: kfd_ioctl.h only needs the __u32/__u64 types from drm/drm.h. */
#include <linux/types.h>
