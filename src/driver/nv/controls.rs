//! Typed RM controls on [`NvCtl`] (open-gpu-kernel-modules `src/common/sdk/nvidia/inc/ctrl/`), one
//! method per control, named after it. Each builds the parameter struct (in the family's layout
//! where it differs), issues [`NvCtl::rm_control`] and returns the outputs. Embedded pointers
//! (class list, GR info list) are built from vectors here, so callers never hand RM a raw address.
//!
//! Not guaranteed: no policy (PERF_BOOST failing in a VM is the caller's to tolerate).

use super::ctl::NvCtl;
use super::family::BuildVersion;
use crate::driver::api::IoctlArg;
use crate::sys::nv::common::*;
use crate::{bail, Result};

impl NvCtl {
    /// NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2 on the client (1032 bytes in 570 and 580).
    pub fn get_build_version_v2(&self, h_client: u32) -> Result<BuildVersion> {
        let mut bytes = vec![0u8; self.family().sizes().build_version_v2_params];
        self.rm_control_raw(
            h_client,
            h_client,
            NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2,
            &mut bytes,
        )?;
        self.family().build_version(&bytes)
    }

    /// NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2: the ids of `gpu_id` (from CARD_INFO); the device
    /// allocation takes `deviceInstance`.
    pub fn get_id_info_v2(
        &self,
        h_client: u32,
        gpu_id: u32,
    ) -> Result<NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS> {
        let mut p = NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS {
            gpuId: gpu_id,
            ..Default::default()
        };
        self.rm_control(
            h_client,
            h_client,
            NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2,
            &mut p,
        )?;
        Ok(p)
    }

    /// NV0080_CTRL_CMD_GPU_GET_CLASSLIST, count first: the classes the device offers.
    pub fn get_classlist(&self, h_client: u32, h_device: u32) -> Result<Vec<u32>> {
        let mut p = NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS::default();
        self.rm_control(
            h_client,
            h_device,
            NV0080_CTRL_CMD_GPU_GET_CLASSLIST,
            &mut p,
        )?;
        let mut list = vec![0u32; p.numClasses as usize];
        if list.is_empty() {
            return Ok(list);
        }
        p.classList = list.as_mut_ptr() as u64;
        self.rm_control(
            h_client,
            h_device,
            NV0080_CTRL_CMD_GPU_GET_CLASSLIST,
            &mut p,
        )?;
        list.truncate(p.numClasses as usize);
        Ok(list)
    }

    /// NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2: the fixed-array form (size per family; prefer
    /// [`NvCtl::get_classlist`]).
    pub fn get_classlist_v2(&self, h_client: u32, h_device: u32) -> Result<Vec<u32>> {
        let mut bytes = vec![0u8; self.family().sizes().classlist_v2_params];
        self.rm_control_raw(
            h_client,
            h_device,
            NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2,
            &mut bytes,
        )?;
        self.family().classlist_v2(&bytes)
    }

    /// NV2080_CTRL_CMD_GPU_GET_GID_INFO in binary form: the 16-byte GPU UUID (what UVM takes).
    pub fn get_gid_info(&self, h_client: u32, h_subdevice: u32) -> Result<[u8; 16]> {
        let mut p = NV2080_CTRL_GPU_GET_GID_INFO_PARAMS {
            index: 0,
            flags: NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY
                << NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_SHIFT,
            length: 16,
            ..Default::default()
        };
        self.rm_control(
            h_client,
            h_subdevice,
            NV2080_CTRL_CMD_GPU_GET_GID_INFO,
            &mut p,
        )?;
        if p.length != 16 {
            bail!(
                Device,
                "NV2080_CTRL_CMD_GPU_GET_GID_INFO: binary GID is {} bytes, expected 16 ({})",
                p.length,
                p.describe()
            );
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&p.data[..16]);
        Ok(uuid)
    }

    /// NV2080_CTRL_CMD_GR_GET_INFO: the values of the GR info `indices`
    /// (`NV2080_CTRL_GR_INFO_INDEX_*`), in order.
    pub fn gr_get_info(
        &self,
        h_client: u32,
        h_subdevice: u32,
        indices: &[u32],
    ) -> Result<Vec<u32>> {
        let mut list: Vec<NV2080_CTRL_GR_INFO> = indices
            .iter()
            .map(|&index| NV2080_CTRL_GR_INFO { index, data: 0 })
            .collect();
        let mut p = NV2080_CTRL_GR_GET_INFO_PARAMS {
            grInfoListSize: list.len() as u32,
            grInfoList: list.as_mut_ptr() as u64,
            ..Default::default()
        };
        self.rm_control(h_client, h_subdevice, NV2080_CTRL_CMD_GR_GET_INFO, &mut p)?;
        Ok(list.iter().map(|i| i.data).collect())
    }

    /// NV2080_CTRL_CMD_PERF_BOOST (clocks up; may be refused in a VM).
    pub fn perf_boost(
        &self,
        h_client: u32,
        h_subdevice: u32,
        flags: u32,
        duration: u32,
    ) -> Result<()> {
        let mut p = NV2080_CTRL_PERF_BOOST_PARAMS { flags, duration };
        self.rm_control(h_client, h_subdevice, NV2080_CTRL_CMD_PERF_BOOST, &mut p)
    }

    /// NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN: the value to write to the doorbell.
    pub fn get_work_submit_token(&self, h_client: u32, h_channel: u32) -> Result<u32> {
        let mut p = NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS::default();
        self.rm_control(
            h_client,
            h_channel,
            NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN,
            &mut p,
        )?;
        Ok(p.workSubmitToken)
    }

    /// NVA06C_CTRL_CMD_GPFIFO_SCHEDULE on a TSG (2-byte parameters before 580, 3 from 580).
    pub fn gpfifo_schedule(&self, h_client: u32, h_tsg: u32, enable: bool) -> Result<()> {
        let mut bytes = self.family().gpfifo_schedule_params(enable, false);
        self.rm_control_raw(h_client, h_tsg, NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, &mut bytes)
    }

    /// NV2080_CTRL_CMD_FB_FLUSH_GPU_CACHE of the whole cache with `flags`
    /// (`NV2080_CTRL_FB_FLUSH_GPU_CACHE_FLAGS_*` shifted into place).
    pub fn fb_flush_gpu_cache(&self, h_client: u32, h_subdevice: u32, flags: u32) -> Result<()> {
        let mut p = NV2080_CTRL_FB_FLUSH_GPU_CACHE_PARAMS {
            flags,
            ..Default::default()
        };
        self.rm_control(
            h_client,
            h_subdevice,
            NV2080_CTRL_CMD_FB_FLUSH_GPU_CACHE,
            &mut p,
        )
    }
}
