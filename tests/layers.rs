//! The dependency order of `src/`, as a test. The order is written once: the numbered list in
//! `src/lib.rs`'s module doc, which this test parses. Every `.rs` file under `src/` belongs to a
//! unit (its top-level module, or `runtime::<child>` / `engine::jit`: the folders the list splits); every
//! `crate::...` and `super::...` path in its code (use trees and inline paths; comments and strings
//! do not count) is an edge to the unit it names. The test fails on:
//! - an edge pointing UP the list (an edge may point down or stay within its layer), unless an
//!   entry of [`EXCEPTIONS`] names it (with its reason); and an edge a [`FORBIDDEN`] rule names
//!   (down the list, but against the design);
//! - an import cycle between units (over the non-test edges);
//! - a unit in a layer whose entry does not allow `unsafe` without `#![forbid(unsafe_code)]` in its
//!   root module (or an enclosing one);
//! - a `crate::` path that names nothing, or a unit the list does not name;
//! - a README layout section that differs from what `tools/readme_layout.sh` would write.
//!
//! Not guaranteed: see `layers_support::scan` (lexical reading; macro-built paths are not seen).

mod layers_support;

use std::path::PathBuf;

use layers_support::check::{findings, grouped, parse_layers, Edge, Exception, Forbidden};
use layers_support::readme;

/// Edges against the order that are allowed, each with its reason.
const EXCEPTIONS: &[Exception] = &[
    Exception {
        test_code_only: true,
        from: "*",
        to: "mockgpu",
        reason:
            "test modules are the harness: they run the driver and backend code on the emulator",
    },
    Exception {
        test_code_only: true,
        from: "*",
        to: "runtime::builtin",
        reason: "test modules open devices through the list of built-in families (the harness)",
    },
];

/// Edges the order alone would allow (down or within a layer) that the design rules out.
const FORBIDDEN: &[Forbidden] = &[
    Forbidden {
        from: &[
            "runtime::cpu",
            "runtime::amd",
            "runtime::nv",
            "runtime::fallback",
        ],
        to: "mockgpu",
        reason: "a backend never names the emulator: runtime::builtin hands it its driver",
    },
    Forbidden {
        from: &["codegen"],
        to: "renderer",
        reason: "codegen owns the Renderer seam; the renderers build on codegen, not the reverse",
    },
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn imports_follow_the_layer_order() {
    let f = findings(&root(), EXCEPTIONS, FORBIDDEN);
    assert!(
        f.problems.is_empty(),
        "unreadable paths or units:\n{}",
        f.problems.join("\n")
    );
    let new: &[Edge] = &f.violations;
    let mut msg = String::new();
    if !new.is_empty() {
        msg += &format!(
            "{} import(s) against the layer order of src/lib.rs (file:line: unit -> unit):\n{}",
            new.len(),
            new.iter().map(|e| format!("  {e}\n")).collect::<String>()
        );
    }
    if !msg.is_empty() {
        msg += "\nThe order: the numbered list in src/lib.rs's module doc. Rules besides it:\n";
        for x in EXCEPTIONS {
            let scope = if x.test_code_only { " (test code)" } else { "" };
            msg += &format!("  allowed: {} -> {}{scope}: {}\n", x.from, x.to, x.reason);
        }
        for x in FORBIDDEN {
            msg += &format!(
                "  forbidden: {} -> {}: {}\n",
                x.from.join("|"),
                x.to,
                x.reason
            );
        }
    }
    assert!(msg.is_empty(), "{msg}");
}

#[test]
fn no_import_cycle_between_folders() {
    let f = findings(&root(), EXCEPTIONS, FORBIDDEN);
    let mut msg = String::new();
    for (units, inner) in &f.cycles {
        msg += &format!(
            "import cycle between {}:\n{}",
            units.join(", "),
            grouped(inner)
        );
    }
    assert!(msg.is_empty(), "{msg}");
}

#[test]
fn modules_above_the_unsafe_layer_forbid_unsafe() {
    let f = findings(&root(), EXCEPTIONS, FORBIDDEN);
    assert!(
        f.missing_forbid.is_empty(),
        "{}",
        f.missing_forbid.join("\n")
    );
}

fn readme_layout() -> (String, String) {
    let root = root();
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let split: Vec<String> = parse_layers(&lib)
        .unwrap()
        .iter()
        .flat_map(|l| &l.units)
        .filter_map(|u| u.split_once("::").map(|s| s.0.to_string()))
        .collect();
    let text = std::fs::read_to_string(root.join("README.md")).unwrap();
    (text, readme::render(&root, &split))
}

#[test]
fn readme_layout_matches_the_tree() {
    let (text, layout) = readme_layout();
    let Some(want) = readme::splice(&text, &layout) else {
        panic!(
            "README.md has no {} ... {} markers",
            readme::BEGIN,
            readme::END
        );
    };
    assert!(
        want == text,
        "README.md's layout section differs from the tree; run tools/readme_layout.sh. It should be:\n{layout}"
    );
}

/// Writes the README's layout section (run by `tools/readme_layout.sh`).
#[test]
#[ignore = "writes README.md; run by tools/readme_layout.sh"]
fn regenerate_readme_layout() {
    let (text, layout) = readme_layout();
    let new = readme::splice(&text, &layout).expect("README.md has no layout markers");
    std::fs::write(root().join("README.md"), new).unwrap();
    print!("{layout}");
}

/// Prints the edges against the order grouped by edge, known ones included (for notes).
#[test]
#[ignore = "a report, not a check"]
fn print_violations() {
    let f = findings(&root(), EXCEPTIONS, FORBIDDEN);
    println!(
        "{} edge(s) against the order:\n{}",
        f.violations.len(),
        grouped(&f.violations)
    );
    for (units, inner) in &f.cycles {
        println!("cycle {}:\n{}", units.join(", "), grouped(inner));
    }
    println!(
        "missing forbid: {:?}\nproblems: {:?}",
        f.missing_forbid, f.problems
    );
}
