//! Tests of the checker itself on small fake trees, so `tests/layers.rs` is known to be able to
//! fail: an upward edge, a cycle, a missing `forbid`, and paths hidden in comments and strings.

use std::path::{Path, PathBuf};

use super::check::{findings, Exception, Forbidden};
use super::scan::{code_only, paths};

const LIB: &str = "//! A fake crate.\n//!\n\
//! 0. `base`: anything may use it.\n\
//! 1. `low`: the only layer where `unsafe` may appear.\n\
//! 2. `mid`, `emu`: the middle.\n\
//! 3. `top`, `run`, `run::a`, `run::b`: the top.\n\
pub mod base;\npub mod low;\npub mod mid;\npub mod emu;\npub mod top;\npub mod run;\n\
pub use base::Thing;\n";

/// A fake crate under the temp dir with `files` (path under `src/`, text) besides lib.rs.
fn tree(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let root = std::env::temp_dir().join(format!("rawgrad-layers-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let mut all = vec![("lib.rs", LIB)];
    all.extend_from_slice(files);
    for (p, text) in all {
        let p = root.join("src").join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    root
}

const F: &str = "#![forbid(unsafe_code)]\n";

fn clean(root: &Path) {
    let _ = std::fs::remove_dir_all(root);
}

fn base_files() -> Vec<(&'static str, &'static str)> {
    vec![
        ("base.rs", "#![forbid(unsafe_code)]\npub struct Thing;\n"),
        ("low/mod.rs", "use crate::Thing;\npub fn f() {}\n"),
        ("mid.rs", "#![forbid(unsafe_code)]\nuse crate::low::f;\n"),
        (
            "emu/mod.rs",
            "#![forbid(unsafe_code)]\nuse crate::{low, mid::*};\n",
        ),
        (
            "run/mod.rs",
            "#![forbid(unsafe_code)]\npub mod a;\npub mod b;\n",
        ),
        ("run/a.rs", "use crate::mid;\n"),
        ("run/b.rs", "use super::a;\n"),
        (
            "top.rs",
            "#![forbid(unsafe_code)]\nfn g() { crate::run::b::h(); }\n",
        ),
    ]
}

#[test]
fn a_clean_tree_passes() {
    let root = tree("clean", &base_files());
    let f = findings(&root, &[], &[]);
    clean(&root);
    assert!(f.violations.is_empty(), "{:?}", f.violations);
    assert!(f.cycles.is_empty() && f.problems.is_empty() && f.missing_forbid.is_empty());
}

#[test]
fn an_upward_edge_is_caught_with_its_file_and_line() {
    let mut files = base_files();
    files[2] = (
        "mid.rs",
        "#![forbid(unsafe_code)]\n\nfn k() {\n    crate::run::a::x();\n}\n",
    );
    let root = tree("upward", &files);
    let f = findings(&root, &[], &[]);
    clean(&root);
    let got: Vec<String> = f.violations.iter().map(|e| e.to_string()).collect();
    assert_eq!(got, ["src/mid.rs:4: mid -> run::a"]);
}

#[test]
fn test_code_edges_need_an_exception_and_do_not_make_cycles() {
    let mut files = base_files();
    files[1] = (
        "low/mod.rs",
        "pub fn f() {}\n#[cfg(test)]\nmod tests;\n#[cfg(test)]\nfn t() { crate::emu::x(); }\n",
    );
    files.push(("low/tests.rs", "use crate::emu::y;\n"));
    files[0] = (
        "base.rs",
        "#![forbid(unsafe_code)]\npub struct Thing;\n#[cfg(test)]\n#[path = \"base/t.rs\"]\nmod tests;\n",
    );
    files.push(("base/t.rs", "fn f() { crate::emu::z(); }\n"));
    let root = tree("testcode", &files);
    let f = findings(&root, &[], &[]);
    let got: Vec<String> = f.violations.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        got,
        [
            "src/base/t.rs:1: base -> emu (test code)",
            "src/low/mod.rs:5: low -> emu (test code)",
            "src/low/tests.rs:1: low -> emu (test code)",
        ]
    );
    assert!(
        f.cycles.is_empty(),
        "test edges are not part of the cycle graph"
    );
    let allow = [Exception {
        test_code_only: true,
        from: "*",
        to: "emu",
        reason: "the harness",
    }];
    let f = findings(&root, &allow, &[]);
    clean(&root);
    assert!(f.violations.is_empty(), "{:?}", f.violations);
}

#[test]
fn a_cycle_inside_one_layer_is_caught() {
    let mut files = base_files();
    files[5] = ("run/a.rs", "use crate::run::b::z;\n");
    let root = tree("cycle", &files);
    let f = findings(&root, &[], &[]);
    clean(&root);
    assert!(f.violations.is_empty(), "same layer: not a violation");
    assert_eq!(f.cycles.len(), 1);
    assert_eq!(f.cycles[0].0, ["run::a", "run::b"]);
    assert_eq!(f.cycles[0].1.len(), 2);
}

#[test]
fn a_missing_forbid_and_an_unknown_path_are_caught() {
    let mut files = base_files();
    files[2] = ("mid.rs", "// #![forbid(unsafe_code)]\nuse crate::low::f;\n");
    files.push(("extra.rs", F));
    files[7] = (
        "top.rs",
        "#![forbid(unsafe_code)]\nuse crate::Nothing;\nuse crate::extra;\n",
    );
    let root = tree("forbid", &files);
    let f = findings(&root, &[], &[]);
    clean(&root);
    assert_eq!(f.missing_forbid.len(), 1);
    assert!(
        f.missing_forbid[0].starts_with("mid:"),
        "{:?}",
        f.missing_forbid
    );
    assert_eq!(f.problems.len(), 2, "{:?}", f.problems);
    assert!(f.problems[0].contains("crate::Nothing"));
    assert!(f.problems[1].contains("`extra`"));
}

#[test]
fn comments_and_strings_do_not_count_and_use_trees_expand() {
    let src = "// crate::a::b\n/* crate::c /* nested */ crate::d */\nlet s = \"crate::e\";\n\
               let r = r#\"crate::f\"#; let c = '\"'; let l: &'static str = x;\n\
               use crate::{g::{h, i as j}, k::*,\n    m};\nmod inner { use super::super::n::o; }\n\
               crate::p::q::<T>(1);\n";
    let code = code_only(src);
    assert_eq!(code.len(), src.len());
    let got: Vec<(String, usize)> = paths(&code, &["x".to_string(), "y".to_string()])
        .into_iter()
        .map(|p| (p.segments.join("::"), super::scan::line_of(&code, p.at)))
        .collect();
    let want = [
        ("g::h", 5),
        ("g::i", 5),
        ("k", 5),
        ("m", 6),
        ("x::n::o", 7),
        ("p::q", 8),
    ];
    let want: Vec<(String, usize)> = want.iter().map(|(p, l)| (p.to_string(), *l)).collect();
    assert_eq!(got, want);
}

#[test]
fn a_forbidden_downward_edge_is_caught_outside_test_code() {
    let mut files = base_files();
    files[6] = (
        "run/b.rs",
        "use super::a;\nuse crate::emu::x;\n#[cfg(test)]\nuse crate::emu::y;\n",
    );
    let root = tree("forbidden", &files);
    let rule = [Forbidden {
        from: &["run::a", "run::b"],
        to: "emu",
        reason: "a backend never names the emulator",
    }];
    let f = findings(&root, &[], &rule);
    clean(&root);
    let got: Vec<String> = f.violations.iter().map(|e| e.to_string()).collect();
    assert_eq!(got, ["src/run/b.rs:2: run::b -> emu"]);
}
