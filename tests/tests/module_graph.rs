//! No crate's modules import one another in a circle: each module can be read, and changed,
//! knowing only the modules below it. A module's references to `crate::…` and `super::…` are
//! its imports (comments and its `#[cfg(test)]` tests aside); a module reaching into its own
//! parent (`super::`) is not a circle, since a parent declares its children. No stack needed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The source folders of the workspace's crates.
const CRATES: &[&str] = &[
    "core/src",
    "api/src",
    "scheduler/src",
    "cli/src",
    "sandbox-image/supervisor/src",
    "sandbox-image/shell/src",
    "tests/src",
];

type Module = Vec<String>;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every module of the crate whose sources are in `src`, with its file.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut modules = BTreeMap::new();
    let mut folders = vec![src.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(src).unwrap().with_extension("");
                let mut module: Module = relative
                    .iter()
                    .map(|part| part.to_string_lossy().into_owned())
                    .collect();
                if matches!(
                    module.last().map(String::as_str),
                    Some("mod" | "lib" | "main")
                ) {
                    module.pop();
                }
                modules.insert(module, path);
            }
        }
    }
    modules
}

/// The text of a module that counts: no comments, no `#[cfg(test)] mod tests`.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(tests) => &text[..tests],
        None => &text,
    };
    text.lines()
        .map(|line| line.split("//").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules of `modules` that `module`'s code names, but for its own ancestors.
fn imports(module: &Module, text: &str, modules: &BTreeMap<Module, PathBuf>) -> BTreeSet<Module> {
    let mut found = BTreeSet::new();
    let joined = without_spaces_in_use_lists(text);
    let words = joined
        .split(|c: char| !(c.is_alphanumeric() || "_:{},".contains(c)))
        .filter(|word| word.starts_with("crate::") || word.starts_with("super::"));
    for path in words.flat_map(expand) {
        let mut segments = path.split("::").filter(|s| !s.is_empty());
        let mut named: Module = match segments.next() {
            Some("crate") => Vec::new(),
            _ => module[..module.len().saturating_sub(1)].to_vec(),
        };
        for segment in segments {
            match segment {
                "super" => drop(named.pop()),
                "self" => {}
                _ => named.push(segment.to_string()),
            }
        }
        while !named.is_empty() && !modules.contains_key(&named) {
            named.pop();
        }
        let ancestor = named.len() < module.len() && module.starts_with(&named);
        if !named.is_empty() && &named != module && !ancestor {
            found.insert(named);
        }
    }
    found
}

/// `use a::{b, c::{d, e}}` written over several lines, as one word.
fn without_spaces_in_use_lists(text: &str) -> String {
    let mut joined = String::with_capacity(text.len());
    let mut lists = Vec::new();
    for c in text.chars() {
        match c {
            '{' => lists.push(joined.ends_with("::")),
            '}' => drop(lists.pop()),
            c if c.is_whitespace() && lists.last() == Some(&true) => continue,
            _ => {}
        }
        joined.push(c);
    }
    joined
}

/// `super::{a, b::{c, d}}` as `super::a`, `super::b::c` and `super::b::d`.
fn expand(word: &str) -> Vec<String> {
    let Some((head, rest)) = word.split_once("::{") else {
        return vec![word.trim_end_matches([',', '}']).to_string()];
    };
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (at, c) in rest.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&rest[start..at]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&rest[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    items
        .into_iter()
        .filter(|item| !item.is_empty())
        .flat_map(|item| expand(&format!("{head}::{}", item.trim())))
        .collect()
}

/// The circles of the graph: its strongly connected parts of more than one module (Tarjan).
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        circles: Vec<Vec<Module>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, module: &'a Module) {
            let order = self.index.len();
            self.index.insert(module, order);
            self.low.insert(module, order);
            self.stack.push(module);
            for next in &self.graph[module] {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    self.low
                        .insert(module, self.low[module].min(self.low[next]));
                } else if self.stack.contains(&next) {
                    self.low
                        .insert(module, self.low[module].min(self.index[next]));
                }
            }
            if self.low[module] == self.index[module] {
                let mut circle = Vec::new();
                while let Some(top) = self.stack.pop() {
                    circle.push(top.clone());
                    if top == module {
                        break;
                    }
                }
                if circle.len() > 1 {
                    self.circles.push(circle);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        circles: Vec::new(),
    };
    for module in graph.keys() {
        if !walk.index.contains_key(module) {
            walk.visit(module);
        }
    }
    walk.circles
}

fn graph_of(modules: &BTreeMap<Module, PathBuf>) -> BTreeMap<Module, BTreeSet<Module>> {
    modules
        .iter()
        .map(|(module, path)| (module.clone(), imports(module, &code(path), modules)))
        .collect()
}

#[test]
fn no_crate_s_modules_import_one_another_in_a_circle() {
    let mut found = Vec::new();
    for src in CRATES {
        for circle in circles(&graph_of(&modules(&workspace().join(src)))) {
            let names: Vec<String> = circle.iter().map(|m| m.join("::")).collect();
            found.push(format!("{src}: {}", names.join(" -> ")));
        }
    }
    assert!(found.is_empty(), "import circles: {found:#?}");
}

#[test]
fn a_circle_is_found_and_a_child_reaching_its_parent_is_not() {
    let modules: BTreeMap<Module, PathBuf> = [vec![], vec!["a".into()], vec!["b".into()]]
        .into_iter()
        .map(|module| (module, PathBuf::new()))
        .collect();
    let a = vec!["a".to_string()];
    let b = vec!["b".to_string()];
    assert_eq!(
        imports(
            &a,
            "use super::{\n    a,\n    b::{self, Thing},\n};\nuse crate::Context;",
            &modules
        ),
        BTreeSet::from([b.clone()])
    );
    assert_eq!(
        expand("crate::{x, y::{z, w}}"),
        ["crate::x", "crate::y::z", "crate::y::w"]
    );
    let graph = BTreeMap::from([
        (vec![], BTreeSet::from([a.clone()])),
        (a.clone(), BTreeSet::from([b.clone()])),
        (b.clone(), BTreeSet::from([a.clone()])),
    ]);
    assert_eq!(circles(&graph).len(), 1);
}
