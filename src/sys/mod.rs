//! Generated bindings only: `#[repr(C)]` structs and constants produced by `tools/gen-bindings`
//! from C headers, committed so that the normal build needs no libclang. Never edit these files by
//! hand; regenerate them (`cargo run --manifest-path tools/gen-bindings/Cargo.toml`).
//!
//! - [`kfd`]: `/usr/include/linux/kfd_ioctl.h` (KFD ioctl interface 1.11): the argument structs
//!   and `KFD_*` constants. The ioctl request numbers are function-like macros that bindgen cannot
//!   expand; `driver::kfd` computes them from these structs and pins them with tests.
//! - [`nv`]: rawgrad's own NVIDIA RM/UVM declarations (`headers/nv/`): common structs and
//!   constants plus one module per driver family (570, 580).
//!
//! Not guaranteed: layouts are those of the header the file was generated from (x86-64 Linux);
//! each generated file carries bindgen's const layout assertions, so a mismatch fails the build.

#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc,
    rustdoc::broken_intra_doc_links,
    rustdoc::invalid_html_tags,
    rustdoc::bare_urls
)]
pub mod kfd;
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    clippy::all,
    rustdoc::broken_intra_doc_links
)]
pub mod nv;
