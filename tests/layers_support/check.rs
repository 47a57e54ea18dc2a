//! The layer check over a source tree: the layer table parsed from `src/lib.rs`'s module doc,
//! every file's unit (its top-level folder, or `folder::child` for the children the table names),
//! every import edge between units with its file and line, the edges against the order, import
//! cycles between units, and units above the `unsafe` layer without `#![forbid(unsafe_code)]`.
//!
//! Not guaranteed: paths are read lexically (see `scan`); a glob re-export that hides where an
//! item lives is attributed to the module the path names.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::scan::{code_only, line_of, paths, test_items};

/// One numbered entry of the layer list.
#[derive(Debug, Clone)]
pub struct Layer {
    pub units: Vec<String>,
    /// The entry's text says `unsafe` may appear there (the only such layer).
    pub unsafe_allowed: bool,
}

/// The numbered list in `lib.rs`'s module doc: `//! N. `a`, `b`: text`, N counting from 0.
pub fn parse_layers(lib_rs: &str) -> Result<Vec<Layer>, String> {
    let mut layers: Vec<Layer> = Vec::new();
    let mut in_entry = false;
    for line in lib_rs.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            in_entry = false;
            continue;
        };
        // A continuation line of the entry above (indented under its text).
        if in_entry && doc.starts_with("    ") {
            if let Some(l) = layers.last_mut() {
                l.unsafe_allowed |= doc.contains("`unsafe`");
            }
            continue;
        }
        in_entry = false;
        let doc = doc.trim_start();
        let Some((num, rest)) = doc.split_once(". ") else {
            continue;
        };
        let Ok(n) = num.parse::<usize>() else {
            continue;
        };
        if n != layers.len() {
            return Err(format!(
                "lib.rs layer list: entry {n} where {} was due",
                layers.len()
            ));
        }
        // The first `:` outside backticks ends the names.
        let mut ticks = 0;
        let colon = rest.char_indices().find(|&(_, c)| {
            ticks += usize::from(c == '`');
            c == ':' && ticks % 2 == 0
        });
        let Some((names, text)) = colon.map(|(k, _)| (&rest[..k], &rest[k + 1..])) else {
            return Err(format!("lib.rs layer {n}: no `:` after the module names"));
        };
        let units: Vec<String> = names
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        if units.is_empty() {
            return Err(format!(
                "lib.rs layer {n}: no module names in backticks before the `:`"
            ));
        }
        layers.push(Layer {
            units,
            unsafe_allowed: text.contains("`unsafe`"),
        });
        in_entry = true;
    }
    if layers.len() < 2 {
        return Err("lib.rs: no numbered layer list in the module doc".into());
    }
    Ok(layers)
}

/// One `.rs` file under `src/`.
pub struct SourceFile {
    /// Relative to the crate root (`src/runtime/amd/device.rs`).
    pub rel: String,
    pub code: String,
    pub module: Vec<String>,
    /// Compiled only for tests (declared under `#[cfg(test)]`, or inside such a module).
    pub test_file: bool,
    pub test_ranges: Vec<(usize, usize)>,
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module path a file has by its place in the tree (`src/a/b.rs`, `src/a/b/mod.rs`: `a::b`).
pub fn module_of(rel: &str) -> Vec<String> {
    let mut segs: Vec<String> = rel
        .trim_start_matches("src/")
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if matches!(segs.last().map(String::as_str), Some("mod" | "lib")) {
        segs.pop();
    }
    segs
}

/// Every file under `root/src`, with the test-only files and ranges marked.
pub fn read_tree(root: &Path) -> Vec<SourceFile> {
    let mut files = Vec::new();
    rs_files(&root.join("src"), &mut files);
    let mut out: Vec<SourceFile> = Vec::new();
    let mut test_prefixes: Vec<String> = Vec::new();
    for p in files {
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        let rel = p
            .strip_prefix(root)
            .unwrap_or(&p)
            .to_string_lossy()
            .replace('\\', "/");
        let code = code_only(&text);
        let (test_ranges, test_mods) = test_items(&code, &text);
        let dir = rel.rsplit_once('/').map_or("", |d| d.0).to_string();
        let own = if rel.ends_with("/mod.rs") || rel.ends_with("/lib.rs") {
            dir.clone()
        } else {
            rel.trim_end_matches(".rs").to_string()
        };
        for (name, path) in test_mods {
            match path {
                Some(p) => {
                    let f = format!("{dir}/{p}");
                    test_prefixes.push(
                        f.trim_end_matches("mod.rs")
                            .trim_end_matches(".rs")
                            .to_string(),
                    );
                }
                None => test_prefixes.push(format!("{own}/{name}")),
            }
        }
        out.push(SourceFile {
            module: module_of(&rel),
            rel,
            code,
            test_file: false,
            test_ranges,
        });
    }
    for f in &mut out {
        let stem = f.rel.trim_end_matches(".rs").trim_end_matches("/mod");
        f.test_file = test_prefixes.iter().any(|t| {
            let t = t.trim_end_matches('/');
            stem == t || stem.starts_with(&format!("{t}/"))
        });
    }
    out
}

/// One import of one unit by another.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub file: String,
    pub line: usize,
    pub test: bool,
}

impl std::fmt::Display for Edge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = if self.test { " (test code)" } else { "" };
        write!(
            f,
            "{}:{}: {} -> {}{t}",
            self.file, self.line, self.from, self.to
        )
    }
}

/// How paths map to units.
pub struct Units {
    /// The `folder::child` units the table names: each is a unit of its own; the rest of the
    /// folder stays the unit `folder`.
    split: BTreeSet<String>,
    modules: BTreeMap<String, BTreeSet<String>>,
    /// Root-level names (`crate::Result`, `crate::bail!`) and the module they come from.
    root_names: HashMap<String, Vec<String>>,
}

impl Units {
    pub fn new(layers: &[Layer], files: &[SourceFile]) -> Units {
        let split = layers
            .iter()
            .flat_map(|l| &l.units)
            .filter(|u| u.contains("::"))
            .cloned()
            .collect();
        let mut modules: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut root_names = HashMap::new();
        for f in files {
            if let Some(first) = f.module.first() {
                modules
                    .entry(first.clone())
                    .or_default()
                    .extend(f.module.get(1).cloned());
            }
            collect_root_names(f, &mut root_names);
        }
        Units {
            split,
            modules,
            root_names,
        }
    }

    /// The unit a module path belongs to (`None`: the crate root).
    pub fn unit(&self, module: &[String]) -> Option<String> {
        let first = module.first()?;
        match module.get(1) {
            Some(second) if self.split.contains(&format!("{first}::{second}")) => {
                if self.modules.get(first).is_some_and(|m| m.contains(second)) {
                    Some(format!("{first}::{second}"))
                } else {
                    Some(first.clone())
                }
            }
            _ => Some(first.clone()),
        }
    }

    /// The unit an absolute path (segments after `crate::`) points into.
    pub fn target(&self, segs: &[String]) -> Result<Option<String>, String> {
        let Some(first) = segs.first() else {
            return Ok(None);
        };
        if self.modules.contains_key(first) {
            return Ok(self.unit(segs));
        }
        match self.root_names.get(first) {
            Some(m) => {
                let mut full = m.clone();
                full.extend(segs[1..].iter().cloned());
                Ok(self.unit(&full))
            }
            None => Err(format!(
                "crate::{} names no module and no root re-export",
                segs.join("::")
            )),
        }
    }
}

/// `pub use a::b::{C, D};` in lib.rs and `#[macro_export]` macros anywhere.
fn collect_root_names(f: &SourceFile, out: &mut HashMap<String, Vec<String>>) {
    if f.module.is_empty() {
        for stmt in f.code.split(';') {
            let s = stmt.trim();
            let Some(rest) = s.strip_prefix("pub use ") else {
                continue;
            };
            let segs: Vec<String> = rest.split("::").map(|x| x.trim().to_string()).collect();
            let modpath = segs[..segs.len() - 1].to_vec();
            let last = segs.last().cloned().unwrap_or_default();
            for name in last.trim_matches(|c| c == '{' || c == '}').split(',') {
                let name = name.split(" as ").last().unwrap_or("").trim();
                if !name.is_empty() {
                    out.insert(name.to_string(), modpath.clone());
                }
            }
        }
    }
    let mut rest = f.code.as_str();
    while let Some(p) = rest.find("#[macro_export]") {
        rest = &rest[p + 15..];
        if let Some(name) = rest.trim_start().strip_prefix("macro_rules!") {
            let name: String = name
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.insert(name, f.module.clone());
        }
    }
}

/// Every cross-unit edge in the tree, and the paths that could not be resolved.
pub fn edges(files: &[SourceFile], units: &Units) -> (Vec<Edge>, Vec<String>) {
    let (mut out, mut problems) = (Vec::new(), Vec::new());
    for f in files {
        let Some(from) = units.unit(&f.module) else {
            continue;
        };
        for p in paths(&f.code, &f.module) {
            let line = line_of(&f.code, p.at);
            match units.target(&p.segments) {
                Ok(Some(to)) if to != from => {
                    let test =
                        f.test_file || f.test_ranges.iter().any(|r| r.0 <= p.at && p.at <= r.1);
                    out.push(Edge {
                        from: from.clone(),
                        to,
                        file: f.rel.clone(),
                        line,
                        test,
                    });
                }
                Ok(_) => {}
                Err(e) => problems.push(format!("{}:{line}: {e}", f.rel)),
            }
        }
    }
    out.sort();
    out.dedup();
    (out, problems)
}

/// A permitted edge against the order, with its reason.
pub struct Exception {
    /// Only from test code (`#[cfg(test)]` modules and items).
    pub test_code_only: bool,
    /// The importing unit, or `*` for any.
    pub from: &'static str,
    pub to: &'static str,
    pub reason: &'static str,
}

/// The layer of each unit.
pub fn layer_of(layers: &[Layer]) -> HashMap<String, usize> {
    layers
        .iter()
        .enumerate()
        .flat_map(|(n, l)| l.units.iter().map(move |u| (u.clone(), n)))
        .collect()
}

/// A downward (or same-layer) edge the order would allow but the design does not.
pub struct Forbidden {
    pub from: &'static [&'static str],
    pub to: &'static str,
    pub reason: &'static str,
}

/// The edges pointing up the order that no exception permits, and the non-test edges a
/// [`Forbidden`] rule names (edges of units the table does not name are left to [`findings`],
/// which reports those units).
pub fn violations(
    layers: &[Layer],
    edges: &[Edge],
    exceptions: &[Exception],
    forbidden: &[Forbidden],
) -> Vec<Edge> {
    let layer = layer_of(layers);
    let permitted = |e: &Edge| {
        exceptions.iter().any(|x| {
            (x.from == "*" || x.from == e.from) && x.to == e.to && (e.test || !x.test_code_only)
        })
    };
    let banned = |e: &Edge| {
        !e.test
            && forbidden
                .iter()
                .any(|f| f.to == e.to && f.from.contains(&e.from.as_str()))
    };
    edges
        .iter()
        .filter(|e| match (layer.get(&e.from), layer.get(&e.to)) {
            (Some(lf), Some(lt)) => (lt > lf && !permitted(e)) || banned(e),
            _ => false,
        })
        .cloned()
        .collect()
}

/// Import cycles between units over the non-test edges: each strongly connected set of two or more
/// units, with the edges inside it (one example file:line per unit pair).
pub fn cycles<'a>(edges: &'a [Edge]) -> Vec<(Vec<String>, Vec<Edge>)> {
    let mut graph: BTreeMap<&'a str, BTreeSet<&'a str>> = BTreeMap::new();
    for e in edges.iter().filter(|e| !e.test) {
        graph.entry(&e.from).or_default().insert(&e.to);
        graph.entry(&e.to).or_default();
    }
    let nodes: Vec<&str> = graph.keys().copied().collect();
    let reach = |start: &'a str| -> BTreeSet<&'a str> {
        let mut seen = BTreeSet::from([start]);
        let mut stack = vec![start];
        while let Some(n) = stack.pop() {
            for &m in &graph[n] {
                if seen.insert(m) {
                    stack.push(m);
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&str, BTreeSet<&str>> = nodes.iter().map(|&n| (n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for &n in &nodes {
        if done.contains(n) {
            continue;
        }
        let scc: Vec<String> = nodes
            .iter()
            .filter(|&&m| reaches[n].contains(m) && reaches[m].contains(n))
            .map(|m| m.to_string())
            .collect();
        done.extend(scc.iter().map(|s| s.to_string()));
        if scc.len() > 1 {
            let mut seen = BTreeSet::new();
            let inner: Vec<Edge> = edges
                .iter()
                .filter(|e| !e.test && scc.contains(&e.from) && scc.contains(&e.to))
                .filter(|e| seen.insert((e.from.clone(), e.to.clone())))
                .cloned()
                .collect();
            out.push((scc, inner));
        }
    }
    out
}

/// Units in layers without `unsafe` whose root module (or an enclosing one) lacks
/// `#![forbid(unsafe_code)]`.
pub fn missing_forbid(layers: &[Layer], files: &[SourceFile], units: &Units) -> Vec<String> {
    let forbids: BTreeSet<Vec<String>> = files
        .iter()
        .filter(|f| {
            f.code
                .split_whitespace()
                .collect::<String>()
                .contains("#![forbid(unsafe_code)]")
        })
        .map(|f| f.module.clone())
        .collect();
    let mut out = Vec::new();
    for unit in layers
        .iter()
        .filter(|l| !l.unsafe_allowed)
        .flat_map(|l| &l.units)
    {
        let path: Vec<String> = unit.split("::").map(str::to_string).collect();
        let present = files
            .iter()
            .any(|f| units.unit(&f.module).as_ref() == Some(unit));
        let covered = (1..=path.len()).any(|k| forbids.contains(&path[..k]));
        if present && !covered {
            out.push(format!(
                "{unit}: no #![forbid(unsafe_code)] in its root module (src/{}.rs or mod.rs)",
                path.join("/")
            ));
        }
    }
    out
}

/// What the checker finds in the crate at `root`.
pub struct Findings {
    pub violations: Vec<Edge>,
    pub cycles: Vec<(Vec<String>, Vec<Edge>)>,
    pub problems: Vec<String>,
    pub missing_forbid: Vec<String>,
}

pub fn findings(root: &Path, exceptions: &[Exception], forbidden: &[Forbidden]) -> Findings {
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap_or_default();
    let layers = match parse_layers(&lib) {
        Ok(l) => l,
        Err(e) => {
            return Findings {
                violations: vec![],
                cycles: vec![],
                problems: vec![e],
                missing_forbid: vec![],
            }
        }
    };
    let files = read_tree(root);
    let units = Units::new(&layers, &files);
    let (all, mut problems) = edges(&files, &units);
    let layer = layer_of(&layers);
    let mut unknown = BTreeSet::new();
    for f in &files {
        match units.unit(&f.module) {
            Some(u) if !layer.contains_key(&u) && unknown.insert(u.clone()) => {
                problems.push(format!(
                    "unit `{u}` ({}) is in no layer of lib.rs's list",
                    f.rel
                ));
            }
            _ => {}
        }
    }
    let violations = violations(&layers, &all, exceptions, forbidden);
    Findings {
        violations,
        cycles: cycles(&all),
        problems,
        missing_forbid: missing_forbid(&layers, &files, &units),
    }
}

pub fn grouped(edges: &[Edge]) -> String {
    let mut by: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for e in edges {
        let at = format!(
            "{}:{}{}",
            e.file,
            e.line,
            if e.test { " (test)" } else { "" }
        );
        by.entry((e.from.clone(), e.to.clone()))
            .or_default()
            .push(at);
    }
    by.iter()
        .map(|((f, t), at)| format!("  {f} -> {t} ({}): {}\n", at.len(), at.join(", ")))
        .collect()
}
