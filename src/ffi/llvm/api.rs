//! The LLVM C API as function pointers resolved from a `dlopen`ed libLLVM, and RAII owners for the
//! LLVM objects rawgrad creates (context, module, target machine, memory buffer, message).
//!
//! Owns: the table of C entry points ([`Api`]), resolved once per loaded library with `dlsym`, and
//! the `unsafe` calls that create and dispose LLVM objects. The safe compile flow built on them is
//! in the parent module.
//!
//! Not guaranteed: the signatures below are those of the LLVM 13-19 C headers (`llvm-c/Core.h`,
//! `IRReader.h`, `Analysis.h`, `TargetMachine.h`, `Transforms/PassBuilder.h`, `Error.h`,
//! `Support.h`); a library whose ABI differs from them is not detected beyond the symbol names.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};

use libloading::os::unix::Library as RawLibrary;

use crate::{Error, Result};

pub type ContextRef = *mut c_void;
pub type ModuleRef = *mut c_void;
pub type MemoryBufferRef = *mut c_void;
pub type TargetRef = *mut c_void;
pub type TargetMachineRef = *mut c_void;
pub type TargetDataRef = *mut c_void;
pub type PassBuilderOptionsRef = *mut c_void;
pub type ErrorRef = *mut c_void;
pub type DiagnosticInfoRef = *mut c_void;
pub type DiagnosticHandler = unsafe extern "C" fn(DiagnosticInfoRef, *mut c_void);
pub type Bool = c_int;

/// `LLVMVerifierFailureAction::LLVMReturnStatusAction`.
pub const VERIFY_RETURN_STATUS: c_int = 2;
/// `LLVMCodeGenFileType`.
pub const FILE_ASSEMBLY: c_int = 0;
pub const FILE_OBJECT: c_int = 1;
/// `LLVMDiagnosticSeverity::LLVMDSError`, `LLVMDSWarning`.
pub const DS_ERROR: c_int = 0;
pub const DS_WARNING: c_int = 1;

/// Declares the function-pointer table and its resolver from one list of C signatures.
macro_rules! llvm_api {
    ($( $name:ident : fn($($arg:ty),*) $(-> $ret:ty)? ; )*) => {
        /// The LLVM C entry points rawgrad calls (required ones; a library lacking any of them is
        /// refused at load time).
        #[allow(non_snake_case)]
        pub struct Api {
            $( pub $name: unsafe extern "C" fn($($arg),*) $(-> $ret)?, )*
        }

        impl Api {
            /// Resolve every entry point in `lib` (the error names the first one missing).
            pub fn resolve(lib: &RawLibrary, shown: &str) -> Result<Api> {
                Ok(Api {
                    $( $name: {
                        // SAFETY: the symbol is typed with the signature of the LLVM C header that
                        // declares it (see the module doc); the pointer stays valid because the
                        // library is never unloaded (the parent module leaks its handle).
                        let f = unsafe {
                            lib.get::<unsafe extern "C" fn($($arg),*) $(-> $ret)?>(
                                concat!(stringify!($name), "\0").as_bytes(),
                            )
                        };
                        *f.map_err(|e| Error::Compile(format!(
                            "{shown}: the LLVM C function {} is missing ({e}); rawgrad needs LLVM >= 13",
                            stringify!($name)
                        )))?
                    }, )*
                })
            }
        }
    };
}

llvm_api! {
    LLVMContextCreate: fn() -> ContextRef;
    LLVMContextDispose: fn(ContextRef);
    LLVMContextSetDiagnosticHandler: fn(ContextRef, Option<DiagnosticHandler>, *mut c_void);
    LLVMGetDiagInfoDescription: fn(DiagnosticInfoRef) -> *mut c_char;
    LLVMGetDiagInfoSeverity: fn(DiagnosticInfoRef) -> c_int;
    LLVMDisposeMessage: fn(*mut c_char);
    LLVMCreateMemoryBufferWithMemoryRangeCopy: fn(*const c_char, usize, *const c_char) -> MemoryBufferRef;
    LLVMGetBufferStart: fn(MemoryBufferRef) -> *const c_char;
    LLVMGetBufferSize: fn(MemoryBufferRef) -> usize;
    LLVMDisposeMemoryBuffer: fn(MemoryBufferRef);
    LLVMParseIRInContext: fn(ContextRef, MemoryBufferRef, *mut ModuleRef, *mut *mut c_char) -> Bool;
    LLVMDisposeModule: fn(ModuleRef);
    LLVMLinkModules2: fn(ModuleRef, ModuleRef) -> Bool;
    LLVMVerifyModule: fn(ModuleRef, c_int, *mut *mut c_char) -> Bool;
    LLVMSetTarget: fn(ModuleRef, *const c_char);
    LLVMSetModuleDataLayout: fn(ModuleRef, TargetDataRef);
    LLVMPrintModuleToString: fn(ModuleRef) -> *mut c_char;
    LLVMGetTargetFromTriple: fn(*const c_char, *mut TargetRef, *mut *mut c_char) -> Bool;
    LLVMCreateTargetMachine: fn(TargetRef, *const c_char, *const c_char, *const c_char, c_int, c_int, c_int) -> TargetMachineRef;
    LLVMDisposeTargetMachine: fn(TargetMachineRef);
    LLVMCreateTargetDataLayout: fn(TargetMachineRef) -> TargetDataRef;
    LLVMDisposeTargetData: fn(TargetDataRef);
    LLVMTargetMachineEmitToMemoryBuffer: fn(TargetMachineRef, ModuleRef, c_int, *mut *mut c_char, *mut MemoryBufferRef) -> Bool;
    LLVMGetDefaultTargetTriple: fn() -> *mut c_char;
    LLVMGetHostCPUName: fn() -> *mut c_char;
    LLVMGetHostCPUFeatures: fn() -> *mut c_char;
    LLVMCreatePassBuilderOptions: fn() -> PassBuilderOptionsRef;
    LLVMDisposePassBuilderOptions: fn(PassBuilderOptionsRef);
    LLVMRunPasses: fn(ModuleRef, *const c_char, TargetMachineRef, PassBuilderOptionsRef) -> ErrorRef;
    LLVMGetErrorMessage: fn(ErrorRef) -> *mut c_char;
    LLVMDisposeErrorMessage: fn(*mut c_char);
    LLVMParseCommandLineOptions: fn(c_int, *const *const c_char, *const c_char);
}

/// `LLVMGetVersion` (LLVM >= 16), when the library has it.
pub type GetVersionFn = unsafe extern "C" fn(*mut c_uint, *mut c_uint, *mut c_uint);
/// `LLVMInitialize<Target>{TargetInfo,Target,TargetMC,AsmPrinter}`.
pub type InitFn = unsafe extern "C" fn();

/// An optional entry point: `None` when the library does not export it.
pub fn optional<T: Copy>(lib: &RawLibrary, name: &str) -> Option<T> {
    let mut sym = name.as_bytes().to_vec();
    sym.push(0);
    // SAFETY: callers pick `T` to be the C signature of `name` in the LLVM headers (only
    // `GetVersionFn` and `InitFn` are used); the library is never unloaded.
    unsafe { lib.get::<T>(&sym) }.ok().map(|s| *s)
}

/// A NUL-terminated copy of `s` for a C call; `what` names the argument in the error.
pub fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s)
        .map_err(|_| Error::InvalidArgument(format!("LLVM: {what} {s:?} contains a NUL byte")))
}

/// A `char *` LLVM allocated; disposed with `LLVMDisposeMessage`.
pub struct Message<'a> {
    api: &'a Api,
    ptr: *mut c_char,
}

impl<'a> Message<'a> {
    /// Take ownership of `ptr` (may be null).
    pub fn new(api: &'a Api, ptr: *mut c_char) -> Message<'a> {
        Message { api, ptr }
    }

    /// The text (empty for a null message).
    pub fn text(&self) -> String {
        if self.ptr.is_null() {
            return String::new();
        }
        // SAFETY: a non-null message from LLVM is a NUL-terminated string that lives until
        // `LLVMDisposeMessage`, which only `drop` calls.
        unsafe { CStr::from_ptr(self.ptr) }
            .to_string_lossy()
            .into_owned()
    }
}

impl Drop for Message<'_> {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: the pointer came from an LLVM call documented to return a message the caller
            // frees with LLVMDisposeMessage, and it is freed once.
            unsafe { (self.api.LLVMDisposeMessage)(self.ptr) };
        }
    }
}

/// The text of an `LLVMErrorRef` (consumed).
pub fn error_text(api: &Api, err: ErrorRef) -> String {
    // SAFETY: `err` is a non-null error returned by an LLVM call; LLVMGetErrorMessage consumes it
    // and returns a string freed with LLVMDisposeErrorMessage, done here once.
    unsafe {
        let msg = (api.LLVMGetErrorMessage)(err);
        if msg.is_null() {
            return "(no message)".into();
        }
        let text = CStr::from_ptr(msg).to_string_lossy().into_owned();
        (api.LLVMDisposeErrorMessage)(msg);
        text
    }
}

/// Diagnostics LLVM reported through the context's handler while compiling.
#[derive(Default, Debug)]
pub struct Diagnostics {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    /// The API to read diagnostic infos with (set before the handler is installed).
    get: Option<(DescriptionFn, SeverityFn, DisposeFn)>,
}

type DescriptionFn = unsafe extern "C" fn(DiagnosticInfoRef) -> *mut c_char;
type SeverityFn = unsafe extern "C" fn(DiagnosticInfoRef) -> c_int;
type DisposeFn = unsafe extern "C" fn(*mut c_char);

/// The diagnostic handler installed on every context: records errors and warnings instead of
/// letting LLVM print them and `exit(1)` on an error (its default without a handler).
unsafe extern "C" fn record_diagnostic(info: DiagnosticInfoRef, ctx: *mut c_void) {
    if ctx.is_null() || info.is_null() {
        return;
    }
    // `ctx` is boxed inside `Context` and dropped after LLVMContextDispose; LLVM calls the
    // handler on the compiling thread, while no other reference to the diagnostics exists.
    // SAFETY: `ctx` is the live `*mut Diagnostics` that `Context::new` gave
    // LLVMContextSetDiagnosticHandler, and this is its only reference during the call.
    let diags = unsafe { &mut *(ctx as *mut Diagnostics) };
    let Some((desc, sev, dispose)) = diags.get else {
        return;
    };
    // SAFETY: `info` is the live diagnostic LLVM passes to its handler; the description is a
    // message freed with LLVMDisposeMessage once, here.
    let (text, severity) = unsafe {
        let p = desc(info);
        let text = if p.is_null() {
            String::new()
        } else {
            let t = CStr::from_ptr(p).to_string_lossy().into_owned();
            dispose(p);
            t
        };
        (text, sev(info))
    };
    match severity {
        DS_ERROR => diags.errors.push(text),
        DS_WARNING => diags.warnings.push(text),
        _ => {}
    }
}

/// An LLVM context with rawgrad's diagnostic handler; disposed on drop.
pub struct Context<'a> {
    api: &'a Api,
    pub raw: ContextRef,
    diags: Box<Diagnostics>,
}

impl<'a> Context<'a> {
    pub fn new(api: &'a Api) -> Result<Context<'a>> {
        // SAFETY: LLVMContextCreate takes no arguments and returns a fresh context or null.
        let raw = unsafe { (api.LLVMContextCreate)() };
        if raw.is_null() {
            return Err(Error::Compile("LLVMContextCreate returned null".into()));
        }
        let mut diags = Box::new(Diagnostics {
            get: Some((
                api.LLVMGetDiagInfoDescription,
                api.LLVMGetDiagInfoSeverity,
                api.LLVMDisposeMessage,
            )),
            ..Diagnostics::default()
        });
        let ctx_ptr = (&mut *diags) as *mut Diagnostics as *mut c_void;
        // SAFETY: `raw` is a live context; the handler has the C signature LLVM expects and the
        // context pointer is the boxed diagnostics, which stay at the same address and outlive
        // the context (see `Drop`).
        unsafe { (api.LLVMContextSetDiagnosticHandler)(raw, Some(record_diagnostic), ctx_ptr) };
        Ok(Context { api, raw, diags })
    }

    /// The diagnostics recorded so far (errors, warnings).
    pub fn diagnostics(&self) -> (&[String], &[String]) {
        (&self.diags.errors, &self.diags.warnings)
    }
}

impl Drop for Context<'_> {
    fn drop(&mut self) {
        // SAFETY: the context is live and disposed once; every module in it was disposed before
        // (modules borrow the context in `Module`), and the diagnostics box is dropped after this.
        unsafe { (self.api.LLVMContextDispose)(self.raw) };
    }
}

/// A module owned by rawgrad; disposed on drop (before its context, which it borrows).
pub struct Module<'a> {
    api: &'a Api,
    pub raw: ModuleRef,
    _ctx: std::marker::PhantomData<&'a Context<'a>>,
}

impl<'a> Module<'a> {
    /// Parse LLVM IR text into a module of `ctx`.
    pub fn parse(api: &'a Api, ctx: &'a Context<'a>, ir: &str) -> Result<Module<'a>> {
        let name = c"rawgrad";
        // SAFETY: `ir` is a live byte slice of the given length; the name is NUL-terminated. The
        // range is copied into a new, NUL-terminated buffer that LLVM owns.
        let buf = unsafe {
            (api.LLVMCreateMemoryBufferWithMemoryRangeCopy)(
                ir.as_ptr().cast::<c_char>(),
                ir.len(),
                name.as_ptr(),
            )
        };
        if buf.is_null() {
            return Err(Error::Compile(
                "LLVMCreateMemoryBufferWithMemoryRangeCopy returned null".into(),
            ));
        }
        let mut module: ModuleRef = std::ptr::null_mut();
        let mut msg: *mut c_char = std::ptr::null_mut();
        // SAFETY: `ctx.raw` and `buf` are live; LLVMParseIRInContext takes ownership of the buffer
        // (it is not used again) and writes a module or an error message to the out pointers.
        let failed =
            unsafe { (api.LLVMParseIRInContext)(ctx.raw, buf, &mut module, &mut msg) } != 0;
        let msg = Message::new(api, msg);
        if failed || module.is_null() {
            return Err(Error::Compile(format!(
                "LLVM could not parse the IR: {}",
                msg.text()
            )));
        }
        Ok(Module {
            api,
            raw: module,
            _ctx: std::marker::PhantomData,
        })
    }

    /// Run the IR verifier; the error carries its report.
    pub fn verify(&self) -> Result<()> {
        let mut msg: *mut c_char = std::ptr::null_mut();
        // SAFETY: the module is live; with the return-status action the verifier only reports.
        let broken =
            unsafe { (self.api.LLVMVerifyModule)(self.raw, VERIFY_RETURN_STATUS, &mut msg) } != 0;
        let msg = Message::new(self.api, msg);
        if broken {
            return Err(Error::Compile(format!(
                "LLVM IR verifier: {}",
                msg.text().trim_end()
            )));
        }
        Ok(())
    }

    /// Link `src` into this module (`LLVMLinkModules2`, which destroys `src`); the linker's
    /// errors arrive through the context's diagnostics as well.
    pub fn link(&self, src: Module<'a>) -> Result<()> {
        let raw = src.raw;
        // `LLVMLinkModules2` takes `src` over and destroys it: it must not be disposed again.
        std::mem::forget(src);
        // SAFETY: both modules are live and belong to the same context (`Module<'a>` borrows
        // it); `raw` is owned by nobody else after the `forget` above and is not used again.
        let failed = unsafe { (self.api.LLVMLinkModules2)(self.raw, raw) } != 0;
        if failed {
            return Err(Error::Compile("LLVM could not link the modules".into()));
        }
        Ok(())
    }

    /// The module as IR text.
    pub fn print(&self) -> String {
        // SAFETY: the module is live; the returned string is freed by `Message`.
        Message::new(self.api, unsafe {
            (self.api.LLVMPrintModuleToString)(self.raw)
        })
        .text()
    }
}

impl Drop for Module<'_> {
    fn drop(&mut self) {
        // SAFETY: the module is live, owned here alone, and disposed once before its context.
        unsafe { (self.api.LLVMDisposeModule)(self.raw) };
    }
}

/// A target machine; disposed on drop.
pub struct TargetMachine<'a> {
    api: &'a Api,
    pub raw: TargetMachineRef,
    /// Whether dropping this value disposes the machine (false for [`TargetMachine::borrowed`]).
    owned: bool,
}

impl<'a> TargetMachine<'a> {
    /// `LLVMCreateTargetMachine` for `triple`/`cpu`/`features` at codegen level `level` (0-3),
    /// relocation model `reloc` (`LLVMRelocMode`), default code model.
    pub fn new(
        api: &'a Api,
        triple: &str,
        cpu: &str,
        features: &str,
        level: c_int,
        reloc: c_int,
    ) -> Result<TargetMachine<'a>> {
        let t = cstring(triple, "triple")?;
        let mut target: TargetRef = std::ptr::null_mut();
        let mut msg: *mut c_char = std::ptr::null_mut();
        // SAFETY: the triple is NUL-terminated; LLVM writes the target or an error message.
        let failed =
            unsafe { (api.LLVMGetTargetFromTriple)(t.as_ptr(), &mut target, &mut msg) } != 0;
        let msg = Message::new(api, msg);
        if failed || target.is_null() {
            return Err(Error::Compile(format!(
                "LLVM has no target for triple {triple:?}: {}",
                msg.text()
            )));
        }
        let (c, f) = (cstring(cpu, "cpu")?, cstring(features, "features")?);
        // SAFETY: `target` came from LLVMGetTargetFromTriple; the strings are NUL-terminated and
        // copied by LLVM; the enums are in their C ranges (checked by the caller's constants).
        let raw = unsafe {
            (api.LLVMCreateTargetMachine)(
                target,
                t.as_ptr(),
                c.as_ptr(),
                f.as_ptr(),
                level,
                reloc,
                0,
            )
        };
        if raw.is_null() {
            return Err(Error::Compile(format!(
                "LLVMCreateTargetMachine({triple}, cpu {cpu:?}, features {features:?}) failed"
            )));
        }
        Ok(TargetMachine {
            api,
            raw,
            owned: true,
        })
    }

    /// Give up ownership: the caller disposes the machine later with [`dispose_target_machine`].
    pub fn into_raw(self) -> TargetMachineRef {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }

    /// A view of a machine made by [`TargetMachine::new`] and owned elsewhere (alive for `'a`).
    pub fn borrowed(api: &'a Api, raw: TargetMachineRef) -> TargetMachine<'a> {
        TargetMachine {
            api,
            raw,
            owned: false,
        }
    }

    /// Give `module` this machine's triple and data layout.
    pub fn configure(&self, module: &Module<'_>, triple: &str) -> Result<()> {
        let t = cstring(triple, "triple")?;
        // SAFETY: the module and machine are live; the data layout is created, copied into the
        // module and disposed here.
        unsafe {
            (self.api.LLVMSetTarget)(module.raw, t.as_ptr());
            let dl = (self.api.LLVMCreateTargetDataLayout)(self.raw);
            if dl.is_null() {
                return Err(Error::Compile(
                    "LLVMCreateTargetDataLayout returned null".into(),
                ));
            }
            (self.api.LLVMSetModuleDataLayout)(module.raw, dl);
            (self.api.LLVMDisposeTargetData)(dl);
        }
        Ok(())
    }

    /// Run the new pass manager pipeline `passes` (e.g. `default<O3>`) over `module`.
    pub fn run_passes(&self, module: &Module<'_>, passes: &str) -> Result<()> {
        let p = cstring(passes, "pass pipeline")?;
        // SAFETY: the options object is created and disposed here; the module and machine are
        // live; a non-null error is consumed by `error_text`.
        unsafe {
            let opts = (self.api.LLVMCreatePassBuilderOptions)();
            let err = (self.api.LLVMRunPasses)(module.raw, p.as_ptr(), self.raw, opts);
            (self.api.LLVMDisposePassBuilderOptions)(opts);
            if !err.is_null() {
                return Err(Error::Compile(format!(
                    "LLVMRunPasses({passes}): {}",
                    error_text(self.api, err)
                )));
            }
        }
        Ok(())
    }

    /// Emit `module` as an object (`FILE_OBJECT`) or assembly (`FILE_ASSEMBLY`) file.
    pub fn emit(&self, module: &Module<'_>, file_type: c_int) -> Result<Vec<u8>> {
        let mut msg: *mut c_char = std::ptr::null_mut();
        let mut buf: MemoryBufferRef = std::ptr::null_mut();
        // SAFETY: machine and module are live; LLVM writes a new memory buffer or a message.
        let failed = unsafe {
            (self.api.LLVMTargetMachineEmitToMemoryBuffer)(
                self.raw, module.raw, file_type, &mut msg, &mut buf,
            )
        } != 0;
        let msg = Message::new(self.api, msg);
        if failed || buf.is_null() {
            return Err(Error::Compile(format!(
                "LLVM code generation failed: {}",
                msg.text()
            )));
        }
        // SAFETY: `buf` is a live memory buffer; its start and size describe its bytes, copied
        // out before the buffer is disposed (once).
        unsafe {
            let start = (self.api.LLVMGetBufferStart)(buf);
            let size = (self.api.LLVMGetBufferSize)(buf);
            let out = if start.is_null() || size == 0 {
                vec![]
            } else {
                std::slice::from_raw_parts(start.cast::<u8>(), size).to_vec()
            };
            (self.api.LLVMDisposeMemoryBuffer)(buf);
            Ok(out)
        }
    }
}

impl Drop for TargetMachine<'_> {
    fn drop(&mut self) {
        if self.owned {
            dispose_target_machine(self.api, self.raw);
        }
    }
}

/// Dispose a machine taken with [`TargetMachine::into_raw`] (once, when nothing uses it).
pub fn dispose_target_machine(api: &Api, raw: TargetMachineRef) {
    // SAFETY: `raw` came from LLVMCreateTargetMachine (through `new`), its owner gives it up
    // here exactly once, and no borrowed view of it outlives this call (callers' contract).
    unsafe { (api.LLVMDisposeTargetMachine)(raw) };
}

/// `LLVMParseCommandLineOptions` with `args` (after a program name): LLVM's options are global
/// to the library. Callers pass only options this library knows (LLVM exits on an unknown one).
pub fn parse_command_line(api: &Api, args: &[&str]) -> Result<()> {
    let owned: Vec<CString> = std::iter::once("rawgrad")
        .chain(args.iter().copied())
        .map(|a| cstring(a, "command-line option"))
        .collect::<Result<_>>()?;
    let argv: Vec<*const c_char> = owned.iter().map(|a| a.as_ptr()).collect();
    let overview = cstring("rawgrad", "overview")?;
    // SAFETY: `argv` holds `argv.len()` NUL-terminated strings that outlive the call; LLVM copies
    // what it keeps.
    unsafe {
        (api.LLVMParseCommandLineOptions)(argv.len() as c_int, argv.as_ptr(), overview.as_ptr())
    };
    Ok(())
}

/// A string LLVM returns for the host (triple, CPU name, features).
pub fn host_string(api: &Api, f: unsafe extern "C" fn() -> *mut c_char) -> String {
    // SAFETY: `f` is one of the LLVM host queries, which take no arguments and return a message
    // freed with LLVMDisposeMessage (done by `Message`).
    Message::new(api, unsafe { f() }).text()
}
