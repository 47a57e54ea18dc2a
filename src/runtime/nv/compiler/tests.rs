use super::*;

#[test]
fn scratch() {
    let _c = crate::helpers::Context::with_str(&[("NV_SITE_PACKAGES", "/tmp/nvvenv/lib/python3.11/site-packages")]);
    for kind in [NvCompilerKind::Nvrtc, NvCompilerKind::Ptxas, NvCompilerKind::NvJitLink] {
        let c = NVCompiler::with_kind("NV", 90, kind).unwrap();
        println!("{c:?}");
    }
}
