#!/usr/bin/env python3
"""One-shot migration tool (issue 9, item 8): replace the citations of the research memos that are
not in the repository ("memo 3.2", "(memo 5)", "the memo's ...", "reference/nv-rm-uvm.md") by the
primary sources those memo sections summarise: vendor headers, driver source files, LLVM's
documentation, or the tinygrad file and function.

Run it from the repository root: `python3 tools/memo_citations.py` (`--check` only reports). It
rewrites comments in place under src/, tests/, tools/, examples/ and headers/, prints every
change as `file:line old -> new`, and exits non-zero, listing them, if a citation is left that
neither the table nor an override maps. Running it twice changes nothing the second time.

How a citation is rewritten:
1. OVERRIDES first: exact text (keyed by a distinctive part of the comment, never by path, so
   they survive file moves) where the generic form would read badly or the memo section has no
   primary source of its own (the NV first-run checklist, the open questions).
2. Then the generic form: "memo X.Y" (also "memo X.Y, Z.W", "memo X.Y-X.Z", "memo section N",
   "memo 1.10 steps a-b") becomes SOURCES[(memo, section)]. The memo follows from the file's path
   (AMD/KFD/PM4/SDMA files and the shared hcq/ layer: the AMD memo; NV/RM/UVM/QMD/cubin files:
   the NV memo), else from the comment's words (PM4, SDMA, KFD, gfx / QMD, GPFIFO, RM, UVM),
   else from the section number when only one memo has it.
3. A rewritten comment line longer than 100 columns is re-wrapped: the overflow moves to the
   start of the next line of the same comment (and so on), or onto a new comment line. Trailing
   comments after code and C box comments are never wrapped: they fail instead.

Paths in SOURCES were checked against NVIDIA/open-gpu-kernel-modules, NVIDIA/open-gpu-doc,
torvalds/linux, llvm/llvm-project, Mesa and tinygrad (tags v0.9.1, v0.9.2 and master).
"""

import difflib
import os
import re
import sys

MAX_COLS = 100
ROOTS = ["src", "tests", "tools", "examples", "headers"]
EXTS = (".rs", ".h", ".c", ".sh", ".py", ".toml", ".md")
SELF = os.path.join("tools", "memo_citations.py")

# (memo, section) -> the primary source the section summarises; None: no source of its own (an
# override must handle every such citation).
SOURCES = {
    # reference/amd-kfd.md
    ("amd", "1"): "tinygrad `ops_amd.py` `AMDDevice.__init__`",
    ("amd", "1.1"): "tinygrad `AMDDevice.__init__`, Linux `amdkfd/kfd_topology.c`",
    ("amd", "1.2"): "Linux `include/uapi/linux/kfd_ioctl.h`",
    ("amd", "1.4"): "`kfd_ioctl.h` `kfd_ioctl_acquire_vm_args`",
    ("amd", "1.5"): "`kfd_ioctl.h` ALLOC_MEMORY_OF_GPU, tinygrad `_gpu_alloc`",
    ("amd", "1.6"): "Linux `amdkfd/kfd_priv.h`, `kfd_chardev.c`",
    ("amd", "1.7"): "`kfd_ioctl.h` `kfd_ioctl_create_event_args`",
    ("amd", "2.2"): "`kfd_ioctl.h` `kfd_ioctl_create_queue_args`",
    ("amd", "2.4"): "Linux `amdkfd/kfd_queue.c`",
    ("amd", "2.7"): "tinygrad `ops_amd.py` 0.10.3",
    ("amd", "3"): "Linux `amdgpu/nvd.h`",
    ("amd", "3.1"): "Linux `amdgpu/nvd.h` PACKET3_*",
    ("amd", "3.2"): "`nvd.h` SET_SH_REG_START, `gc_11_0_0_offset.h`",
    ("amd", "3.3"): "tinygrad `ops_amd.py` `_exec`",
    ("amd", "3.4"): "`nvd.h` PACKET3_ACQUIRE_MEM",
    ("amd", "3.5"): "`nvd.h` PACKET3_RELEASE_MEM",
    ("amd", "3.6"): "`nvd.h` PACKET3_WAIT_REG_MEM",
    ("amd", "3.7"): "`nvd.h` PACKET3_INDIRECT_BUFFER",
    ("amd", "3.8"): "Linux `amdgpu/sdma_v6_0_0_pkt_open.h`",
    ("amd", "4.1"): "tinygrad `ops_amd.py` `AMDSignal`",
    ("amd", "4.2"): "tinygrad `ops_amd.py` `_signal`",
    ("amd", "4.3"): "tinygrad `device.py` `_wait_signal`",
    ("amd", "4.4"): "tinygrad `device.py` `HCQCompatCompiled`",
    ("amd", "4.5"): "tinygrad `_wrap_timeline_signal`",
    ("amd", "5"): "LLVM `AMDGPUUsage.rst`",
    ("amd", "5.1"): "LLVM `BinaryFormat/ELF.h` EF_AMDGPU_MACH",
    ("amd", "5.2"): "LLVM `AMDHSAKernelDescriptor.h`",
    ("amd", "5.3"): "LLVM `AMDGPUUsage.rst`, initial kernel state",
    ("amd", "5.4"): "tinygrad `ops_amd.py` `AMDProgram`",
    ("amd", "5.5"): "tinygrad `ops_amd.py` `AMDProgram`",
    ("amd", "5.6"): "tinygrad `AMDDevice.__init__` scratch",
    ("amd", "6.4"): "tinygrad `device.py` `HCQCompatAllocator`",
    ("amd", "6.6"): "tinygrad `runtime/graph/hcq.py`",
    ("amd", "8.2"): "as tinygrad's later `AMDLLVMCompiler`",
    ("amd", "8.3"): "LLVM `GCNProcessors.td`",
    ("amd", "9"): None,
    ("amd", "10"): None,
    # reference/nv-rm-uvm.md
    ("nv", "1"): "tinygrad `ops_nv.py` `NVDevice.__init__`",
    ("nv", "1.1"): "open-gpu-kernel-modules `kernel-open/nvidia/nv.c`",
    ("nv", "1.2"): "`nv_escape.h`, `nv-ioctl-numbers.h`",
    ("nv", "1.3"): "open-gpu-kernel-modules `unix/src/osapi.c`",
    ("nv", "1.4"): "RM `rmapiParamsCopyInit`, `param_copy.c`",
    ("nv", "1.5"): "tinygrad `ops_nv.py` `NVDevice.__init__`",
    ("nv", "1.6"): "`src/common/sdk/nvidia/inc/ctrl/` headers",
    ("nv", "1.7"): "`uvm_ioctl.h`, `uvm_linux_ioctl.h`",
    ("nv", "1.8"): "tinygrad `ops_nv.py` `_gpu_alloc`",
    ("nv", "1.9"): "`g_gpu_class_list.c`",
    ("nv", "1.10"): "the order of tinygrad's `NVDevice.__init__`",
    ("nv", "2"): "open-gpu-doc `classes/host/clc56f.h`",
    ("nv", "2.1"): "open-gpu-doc `clc56f.h` GP entry, USERD",
    ("nv", "2.2"): "`clc56f.h` NVC56F_DMA_*",
    ("nv", "2.3"): "tinygrad `_cmdq_setup_compute_gpfifo`",
    ("nv", "2.4"): "`clc56f.h` SEM_*",
    ("nv", "2.5"): "`clc6c0.h` INVALIDATE_SHADER_CACHES_NO_WFI",
    ("nv", "2.6"): "`clcbc0.h` SEND_PCAS_A, SEND_SIGNALING_PCAS2_B",
    ("nv", "2.7"): "open-gpu-doc `clc6b5.h`..`clcab5.h`",
    ("nv", "2.8"): "`clc6c0.h` LOAD_INLINE_DATA",
    ("nv", "2.9"): "tinygrad `_submit_to_gpfifo`",
    ("nv", "2.10"): "`nvgputypes.h` NvNotification",
    ("nv", "3"): "open-gpu-doc `classes/compute/cl*qmd.h`",
    ("nv", "3.1"): "open-gpu-doc `cl*qmd.h`, Mesa NVK",
    ("nv", "3.2"): "open-gpu-doc `clc6c0qmd.h`, `clcbc0qmd.h`",
    ("nv", "3.3"): "tinygrad `ops_nv.py` `NVProgram.__init__`",
    ("nv", "3.4"): "slots read from ptxas 13 SASS",
    ("nv", "3.5"): "tinygrad `ops_nv.py` `NVProgram`",
    ("nv", "3.6"): "tinygrad `ops_nv.py` `update_exec`",
    ("nv", "3.7"): "tinygrad `_ensure_has_local_memory`",
    ("nv", "4"): "tinygrad `ops_nv.py` `NVSignal`",
    ("nv", "5"): "tinygrad `compiler_cuda.py`",
    ("nv", "5.1"): "tinygrad `compiler_cuda.py`",
    ("nv", "5.2"): "tinygrad `NVProgram.__init__`, ptxas 13 cubins",
    ("nv", "9"): None,
    ("nv", "10"): None,
}

# Exact replacements, applied to the whole file text before the generic pass (a key may span
# lines). Each key is a distinctive part of one comment.
OVERRIDES = [
    # ---- AMD
    ("AMD signals (tinygrad 0.9.2 layout, memo 4.1)", "AMD signals (tinygrad 0.9.2 `AMDSignal`)"),
    ("is made of (memo 3.3-3.6, 4.2):", "is made of (tinygrad `AMDComputeQueue`, `nvd.h`):"),
    (
        "Departures from tinygrad 0.9.2, on the memo's recommendations:",
        "Departures from tinygrad 0.9.2 (the first two as in tinygrad 0.10.3 and PR #9314):",
    ),
    ("RSRC2.USER_SGPR 15 (memo 5.3).", "RSRC2.USER_SGPR 15 (observed)."),
    ("kernel descriptor (memo 5.2) and", "kernel descriptor (`AMDHSAKernelDescriptor.h`) and"),
    (
        "AMD device memory through KFD (memo 1.5)",
        "AMD device memory through KFD (ALLOC_MEMORY_OF_GPU, tinygrad `_gpu_alloc`)",
    ),
    ("hidden kernel arguments (memo 5.3).", "hidden kernel arguments (observed, LLVM 19)."),
    ("//! memo 3.3-3.6 in [`exec`]", "//! tinygrad's `AMDComputeQueue` in [`exec`]"),
    ("the image rawgrad uploads (memo 5.2)", "the image rawgrad uploads (tinygrad `AMDProgram`)"),
    (
        "Sources: the AMD memo (`reference/amd-kfd.md` sections 2.4, 2.7, 3, 5), tinygrad's"
        " `ops_amd.py`"
        "\n//! (0.9.x and later), Linux `amdkfd/kfd_queue.c` and the amdgpu register headers.",
        "Sources: tinygrad's `ops_amd.py` (0.9.x and later), Linux `amdkfd/kfd_queue.c`,"
        " `amdgpu/nvd.h`,"
        "\n//! `sdma_v6_0_0_pkt_open.h`, the amdgpu register headers and LLVM's `AMDGPUUsage.rst`.",
    ),
    ("private segment) memory (memo 2.7, 5.6).", "private segment) memory (tinygrad 0.10.3)."),
    (
        "The SDMA engine of a chip (memo 2.7, 3.8).",
        "The SDMA engine of a chip (`sdma_v6_0_0_pkt_open.h`, tinygrad 0.10.3).",
    ),
    ("scratch base registers (memo 3.2).", "scratch base registers (`gc_9_4_3_offset.h`)."),
    ("// memo 8.3: 17+ per upstream", "// LLVM `GCNProcessors.td`: 17+"),
    ("// memo 8.3: 18 per upstream", "// LLVM `GCNProcessors.td`: 18"),
    ("// observed (memo 5.1)", "// EF_AMDGPU_MACH, LLVM `ELF.h`"),
    (
        "KFD >= 6.12 checks exactly (memo 2.4).",
        "KFD >= 6.12 checks exactly (`kfd_queue.c` `kfd_queue_acquire_buffers`).",
    ),
    ("= 0xA000 (the memo's worked example\n", "= 0xA000 (with the 48 header bytes; a\n"),
    (
        "// omits the 48 header bytes and gets 0x9000); the BO size",
        "// count without them gets 0x9000); the BO size",
    ),
    ("// memo 5.6: 7900XTX 0x200200", "// tinygrad 0.9.0's 7900XTX 0x200200"),
    (
        "The named steps of memo 1.1 for GPU",
        "The named steps of tinygrad's `AMDDevice.__init__` for GPU",
    ),
    ("Opening an AMD device (memo 1):", "Opening an AMD device (tinygrad `AMDDevice.__init__`):"),
    (
        "The per-device timeline (memo 4.4-4.5):",
        "The per-device timeline (tinygrad `HCQCompatCompiled`):",
    ),
    ("kernel + 16 (memo 5.2)", "kernel + 16 (LLVM `AMDGPUUsage.rst`)"),
    # ---- NV
    ("against the class headers (memo 3.2)", "against open-gpu-doc's `cl*qmd.h`"),
    ("(identical for the fields used; memo 3.2).", "(identical for the fields used)."),
    ("`clcbc0qmd.h` (memo 3.2).", "`clcbc0qmd.h`."),
    ("(memo 3.1: a captured libcuda QMD", "(a third-party H100 report: a captured libcuda QMD"),
    (
        "The memo only summarises V05 (from\n//! Mesa and tinygrad master); these positions come",
        "Mesa NVK and tinygrad master\n//! build V05 QMDs too; these positions come",
    ),
    ("(the memo's 583:580 holds for V03/V04 only)", "(583:580 in V03/V04)"),
    ("one grid launch, memo section 3)", "one grid launch, open-gpu-doc `cl*qmd.h`)"),
    (
        "\"from zeros\" (memo 3.1, 3.3)",
        "\"from zeros\" (as Mesa NVK, with tinygrad `NVProgram`'s fields)",
    ),
    (
        "Opening an NV device (memo 1.10)",
        "Opening an NV device (after tinygrad's `NVDevice.__init__`)",
    ),
    ("(memo 2.1, 2.9, 2.10)", "(`clc56f.h`, tinygrad `_new_gpu_fifo`, `nvgputypes.h`)"),
    ("(memo 2.2, `clc56f.h` NVC56F_DMA_*)", "(`clc56f.h` NVC56F_DMA_*)"),
    ("GH100's list (memo 1.9):", "GH100's list (g_gpu_class_list.c):"),
    ("GPFIFO submission (memo 2.1, `clc56f.h`)", "GPFIFO submission (open-gpu-doc `clc56f.h`)"),
    ("(the order matters; memo 2.9)", "(the order matters; tinygrad `_submit_to_gpfifo`)"),
    ("The first run on an NVIDIA host (memo section 9), ", "The first run on an NVIDIA host, "),
    ("on an NVIDIA host (memo section 9), step by step", "on an NVIDIA host, step by step"),
    ("(every memo 1.10 step logs itself", "(every bring-up step logs itself"),
    ("(each memo 1.10 step logs itself)", "(each bring-up step logs itself)"),
    ("(the first-run checklist of memo 9)", "(the first-run checklist)"),
    ("devices share; memo\n//!   1.10 steps 1-5)", "devices share;\n//!   bring-up steps 1-5)"),
    ("every step of memo 1.10 on Hopper", "every bring-up step on Hopper"),
    (
        "the bring-up sequence of memo 1.10,",
        "the bring-up sequence (tinygrad's `NVDevice.__init__` order),",
    ),
    ("/// Steps 1-13 of memo 1.10:", "/// Bring-up steps 1-13:"),
    ("/// Steps 14-19 of memo 1.10 on top of", "/// Bring-up steps 14-19 on top of"),
    ("(tinygrad's NVComputeQueue, memo 2.4-2.6)", "(tinygrad's NVComputeQueue)"),
    ("unconfirmed, memo 2.6: NVK 3,", "unconfirmed, `clcbc0.h` PCAS_ACTION: NVK 3,"),
    (
        "Checks what memo 5.2 says a loader must find in `add_n` built for `sm`.",
        "Checks what a loader must find in `add_n` as ptxas builds it for `sm`.",
    ),
    ("NV programs (memo 3, 5.2):", "NV programs (tinygrad `NVProgram`):"),
    (
        "GPU virtual address plan (memo 1.8):",
        "GPU virtual address plan (tinygrad `_alloc_gpu_vaddr`):",
    ),
    ("as tinygrad builds them (memo 1.8).", "as tinygrad's `_gpu_alloc` builds them."),
    ("40-bit addresses; memo 1.8)", "40-bit addresses; `clc56f.h` SEM_ADDR_HI)"),
    (
        "and the shared/local windows, memo 2.3), the memory barrier",
        "and the shared/local windows, `clc6c0.h`), the memory barrier",
    ),
    (
        "//! memo 2.5) and the two launch paths of memo 2.6:",
        "//! `clc6c0.h`) and the two launch paths of `clcbc0.h`:",
    ),
    (
        "Sources (see `reference/nv-rm-uvm.md`): NVIDIA open-gpu-doc",
        "Sources: NVIDIA open-gpu-doc",
    ),
    (
        "the memo's sections 1.9, 2.3, 2.6, 3.4 and 5.2 (cbuf0 slots checked with ptxas 13), Mesa"
        " NVK",
        "open-gpu-kernel-modules `g_gpu_class_list.c`, tinygrad's `ops_nv.py`, ptxas 13 SASS (cbuf0"
        " slots, cubin attributes), Mesa NVK",
    ),
    (
        "constant buffer 0 (memo 3.4, checked by assembling",
        "constant buffer 0 (checked by assembling",
    ),
    ("SEM_ADDR_HI 24:0 (memo 2.4, src580)", "SEM_ADDR_HI 24:0 (open-gpu-kernel-modules 580)"),
    ("(4 GiB on Hopper+: NVK, memo 2.3)", "(4 GiB on Hopper+: NVK `nvk_cmd_dispatch.c`)"),
    (
        "in front of the kernel's (memo 3.3: 1 KiB)",
        "in front of the kernel's (tinygrad PR #7239: 1 KiB)",
    ),
    ("is UNCONFIRMED (memo 10).", "is UNCONFIRMED."),
    ("256-register units; memo 5.2)", "256-register units; tinygrad `NVProgram.__init__`)"),
    ("GR info the device uses (memo 1.6; indices from", "GR info the device uses (indices from"),
    ("(memo 3.7, tinygrad\n", "(tinygrad\n"),
    (
        "Typed RM controls on [`NvCtl`] (memo 1.6),",
        "Typed RM controls on [`NvCtl`] (open-gpu-kernel-modules"
        " `src/common/sdk/nvidia/inc/ctrl/`),",
    ),
    (
        "differs\n//! between families (memo 1.4):",
        "differs\n//! between families (open-gpu-kernel-modules headers per tag):",
    ),
    ("the controls of memo 1.6, with RM's rules", "the controls rawgrad issues, with RM's rules"),
    ("only the indices of memo 1.6 (others", "only the indices rawgrad asks for (others"),
    (
        "a compute runtime uses (memo 1.5, 1.6);",
        "a compute runtime uses (as tinygrad's `ops_nv.py`);",
    ),
    (
        "literal numbers from the memo's measurements\n//! (section 1.4 and the [sizes] tables)"
        " and a C"
        " probe against the headers of",
        "literal numbers from a C probe\n//! (`sizeof`/`offsetof`) against the headers of",
    ),
    ("beyond what the memo names)", "beyond what tinygrad's `ops_nv.py` allocates)"),
    (
        "key offsets per family (the memo's [sizes]\n//! tables),",
        "key offsets per family (a C probe against each\n//! tag's headers),",
    ),
    (
        "to the measured values\n//! of the reference memo and picks",
        "to the values measured\n//! against each tag's headers and picks",
    ),
    # ---- headers/nv and the NV bindings' provenance (tools/gen-bindings writes it into src/sys/nv)
    ("/* Classes (memo 1.5, 1.9)", "/* Classes (g_allclasses.h)"),
    ("/dev/nvidiaN (memo 1.2).", "/dev/nvidiaN (nv_escape.h)."),
    ("supported family (memo 1.6)", "supported family (src/common/sdk/nvidia/inc/ctrl/)"),
    ("no _IOC encoding (memo 1.7)", "no _IOC encoding (uvm_ioctl.h)"),
    (
        "from the facts collected in reference/nv-rm-uvm.md (field names, order,",
        "from NVIDIA/open-gpu-kernel-modules (field names, order,",
    ),
    (
        "(reference/nv-rm-uvm.md section 1.4: the sizes that changed between 550, 570 and 580).",
        "(the sizes that changed between the tags 550.54.15, 570.86.16 and 580.142).",
    ),
    (
        "rawgrad's own declarations, written from reference/nv-rm-uvm.md",
        "rawgrad's own declarations, written from open-gpu-kernel-modules",
    ),
]

# What counts as a memo citation (the generic pass rewrites the first kind; all must be gone).
SEC = r"\d+(?:\.\d+)?"
CITE = re.compile(
    r"\bmemo(?:'s)?\s+(?:sections?\s+)?(?P<first>" + SEC + r")"
    r"(?:\s*-\s*(?P<last>" + SEC + r"))?"
    r"(?:\s+steps?\s+(?P<steps>\d+-\d+))?"
    r"(?P<more>(?:\s*(?:,|and)\s*" + SEC + r"(?!\d))*)"
)
LEFTOVER = [
    CITE,
    re.compile(r"\bmemo\s*$", re.M),
    re.compile(r"\b(?:the|a) (?:AMD |NV |reference )?memo(?:'s)?\b"),
    re.compile(r"\bmemo's\b"),
    re.compile(r"reference/(?:amd-kfd|nv-rm-uvm|tinygrad-core|hw-review)\.md"),
]

AMD_PATH = re.compile(r"(^|[/_.-])(amd|amdgpu|kfd|pm4|sdma|hcq)([/_.-]|$)")
NV_PATH = re.compile(r"(^|[/_.-])(nv|nvgpu|rm|uvm|qmd|cubin|gpfifo)([/_.-]|$)")
AMD_WORDS = re.compile(r"\b(PM4|SDMA|KFD|gfx\d*|AMD|RSRC\d|kernarg)", re.I)
NV_WORDS = re.compile(r"\b(QMD|GPFIFO|RM|UVM|NV|cubin|pushbuffer|Hopper|sm_\d+)\b")


def memo_for(path, line, section):
    if AMD_PATH.search(path):
        return "amd"
    if NV_PATH.search(path):
        return "nv"
    amd, nv = bool(AMD_WORDS.search(line)), bool(NV_WORDS.search(line))
    if amd != nv:
        return "amd" if amd else "nv"
    have = [m for m in ("amd", "nv") if (m, section) in SOURCES]
    return have[0] if len(have) == 1 else None


def expand(first, last):
    """Sections first..last ("4.4-4.5" -> 4.4, 4.5; "3.3-3.6" -> 3.3 .. 3.6)."""
    if not last:
        return [first]
    a, b = first.split("."), last.split(".")
    if len(a) == 2 and len(b) == 2 and a[0] == b[0] and int(a[1]) <= int(b[1]):
        return [f"{a[0]}.{i}" for i in range(int(a[1]), int(b[1]) + 1)]
    return [first, last]


def generic(path, line, problems, where):
    def sub(m):
        secs = expand(m.group("first"), m.group("last"))
        secs += re.findall(SEC, m.group("more") or "")
        texts = []
        for s in secs:
            memo = memo_for(path, line, s)
            text = SOURCES.get((memo, s)) if memo else None
            if text is None:
                problems.append(f"{where}: no source for 'memo {s}' ({memo or 'which memo?'})")
                return m.group(0)
            if text not in texts:
                texts.append(text)
        out = "; ".join(texts)
        if m.group("steps"):
            out = f"steps {m.group('steps')}; {out}"
        return out

    return CITE.sub(sub, line)


COMMENT = re.compile(r"^(\s*)(//!|///|//|#|\*)( *)(.*)$")


def split_comment(line):
    """(marker key, prefix, text) of a whole-line comment, or None."""
    m = COMMENT.match(line)
    if not m or line.lstrip().startswith("#!") or line.lstrip().startswith("*/"):
        return None
    indent, mark, space, text = m.groups()
    return (indent + mark, indent + mark + space, text)


def starts_item(text):
    return (
        not text
        or re.match(r"^([-*] |\d+\. |\||```|#)", text) is not None
    )


def rewrap(lines, i, problems, where):
    """Re-wraps lines[i] (a comment line over MAX_COLS) into the following comment lines."""
    guard = 0
    while len(lines[i]) > MAX_COLS:
        guard += 1
        c = split_comment(lines[i])
        if c is None or guard > 50:
            problems.append(f"{where}: line {i + 1} has {len(lines[i])} columns, cannot wrap")
            return
        key, prefix, _ = c
        cut = lines[i].rfind(" ", len(prefix) + 1, MAX_COLS + 1)
        if cut <= len(prefix):
            problems.append(f"{where}: line {i + 1} has no place to wrap")
            return
        head, tail = lines[i][:cut].rstrip(), lines[i][cut + 1 :].strip()
        lines[i] = head
        nxt = split_comment(lines[i + 1]) if i + 1 < len(lines) else None
        if nxt and nxt[0] == key and not starts_item(nxt[2]):
            lines[i + 1] = nxt[1] + tail + " " + nxt[2]
        else:
            cont = prefix
            item = re.match(r"^([-*] |\d+\. )", c[2])
            if item:
                cont = prefix + " " * len(item.group(1))
            lines.insert(i + 1, cont + tail)
        i += 1


BOX = re.compile(r"^/\* (.*?)( +)\*/$")


def fix_box(old, new):
    """Keeps a padded C box comment (`/* text   */`) at its old width."""
    mo, mn = BOX.match(old), BOX.match(new)
    if not mo or not mn:
        return new
    text = mn.group(1).rstrip()
    pad = len(old) - len("/* ") - len(text) - len("*/")
    return "/* " + text + " " * max(pad, 1) + "*/"


def process(path, text, problems):
    new = text
    for old, rep in OVERRIDES:
        new = new.replace(old, rep)
    lines = new.split("\n")
    old_lines = text.split("\n")
    for i, line in enumerate(lines):
        lines[i] = generic(path, line, problems, f"{path}:{i + 1}")
    # Box comments keep their width; changed comment lines over the limit are re-wrapped.
    changed = set(range(len(lines))) - set(
        j for tag, a1, a2, b1, b2 in difflib.SequenceMatcher(None, old_lines, lines).get_opcodes()
        if tag == "equal" for j in range(b1, b2)
    )
    for i in sorted(changed):
        if i < len(old_lines) and BOX.match(old_lines[i]):
            lines[i] = fix_box(old_lines[i], lines[i])
    i = 0
    while i < len(lines):
        if i in changed and len(lines[i]) > MAX_COLS:
            before = len(lines)
            rewrap(lines, i, problems, path)
            grown = len(lines) - before
            if grown:
                changed = {j if j <= i else j + grown for j in changed}
                changed |= set(range(i, i + grown + 2))
        i += 1
    new = "\n".join(lines)
    for n, line in enumerate(lines, 1):
        for pat in LEFTOVER:
            if pat.search(line):
                problems.append(f"{path}:{n}: unmapped citation: {line.strip()}")
                break
    return new


def files():
    for root in ROOTS:
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if x not in ("target", ".git", "__pycache__")]
            for n in sorted(names):
                p = os.path.join(d, n)
                if n.endswith(EXTS) and os.path.normpath(p) != SELF:
                    yield p


def main():
    check = "--check" in sys.argv[1:]
    if not os.path.isdir("src") or not os.path.isfile("Cargo.toml"):
        print("memo_citations: run from the repository root", file=sys.stderr)
        return 2
    problems, changes = [], 0
    for path in sorted(files()):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if not any(p.search(text) for p in LEFTOVER) and not any(o in text for o, _ in OVERRIDES):
            continue
        new = process(path, text, problems)
        if new == text:
            continue
        a, b = text.split("\n"), new.split("\n")
        for tag, a1, a2, b1, b2 in difflib.SequenceMatcher(None, a, b).get_opcodes():
            if tag == "equal":
                continue
            old = " / ".join(x.strip() for x in a[a1:a2])
            rep = " / ".join(x.strip() for x in b[b1:b2])
            print(f"{path}:{a1 + 1}: {old} -> {rep}")
            changes += 1
        if not check:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
    print(f"memo_citations: {changes} change(s){' (not written: --check)' if check else ''}")
    if problems:
        print(f"memo_citations: {len(problems)} citation(s) not mapped:", file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
