//! Generated NVIDIA RM/UVM bindings (`tools/gen-bindings` from rawgrad's own headers under
//! `headers/nv/`): one module per header.
//!
//! - [`common`]: everything that is the same in every supported driver family: escape structs,
//!   RM_ALLOC parameters, control parameters, UVM parameters, USERD and notifier layouts, class
//!   ids, escape and UVM request numbers, flags and `NV_STATUS` codes.
//! - [`v570`], [`v580`]: the structs whose layout depends on the driver family (NVOS46, the
//!   vaspace and channel allocation parameters, GPFIFO_SCHEDULE, GET_CLASSLIST_V2, the root
//!   client parameters, GET_BUILD_VERSION_V2, UVM_FREE and UVM_UNREGISTER_CHANNEL). Each repeats
//!   the few common typedefs it uses.
//! - [`v590`]: the two UVM structs family 590 shrank (UVM_FREE, UVM_UNREGISTER_CHANNEL); 590 and
//!   595 take [`v580`]'s layouts for everything else.
//!
//! Not guaranteed: x86-64 Linux layouts only; `driver::nv` pins every size to the values measured
//! against each tag's headers and picks the family at run time (`driver::nv::DriverFamily`).

#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    rustdoc::broken_intra_doc_links
)]
pub mod common;
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    rustdoc::broken_intra_doc_links
)]
pub mod v570;
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    rustdoc::broken_intra_doc_links
)]
pub mod v580;
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    rustdoc::broken_intra_doc_links
)]
pub mod v590;
