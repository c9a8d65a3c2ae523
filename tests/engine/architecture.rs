//! The shape of `src/` (ARCHITECTURE "Rooms"): the files of one directory
//! form a tree, with no circle of references among them, and the `llm` room
//! uses no tool code.
//!
//! The checker reads every `.rs` file under `src/` at run time and builds
//! the graph "file X refers to file Y". What counts as a reference:
//! - every `use` item (including `use` inside function bodies), and every
//!   inline path written in code that starts with `crate::`, `super::`,
//!   `self::`, a module imported by `use` (`use super::entry::{self, …}` then
//!   `entry::parse_ts(…)`), or, in a `mod.rs`/`lib.rs`, one of its own child
//!   modules (`clean::sanitize(…)`);
//! - comments, string and character literals, and every item under
//!   `#[cfg(test)]` (the `mod tests` blocks, and test-only module files such
//!   as `#[cfg(test)] mod props;`) are left out; `main.rs` is the binary's
//!   crate and is left out too.
//!
//! Where a reference lands, and how `mod.rs` is treated:
//! - A path is walked down the module tree as far as it names modules; a
//!   path that ends on a module (`use super::frontmatter;`) is an edge to that
//!   module's file (`frontmatter.rs`, or a directory's `mod.rs`).
//! - A path that names an item is an edge to the file that defines the item.
//!   A name that the module's file re-exports with `pub use`/`pub(crate) use`
//!   is followed to where it comes from: `super::MemoryError` (defined in
//!   `memory/mod.rs`) is an edge to `mod.rs`, while `super::MemoryStore`
//!   (only re-exported there from `store`) is an edge to `store.rs`. So
//!   moving an item and leaving a re-export behind cannot hide a circle.
//! - A directory's `mod.rs` (the crate's `lib.rs`) is the module the other
//!   files of the directory are parts of: the top of its tree. Its parts may
//!   use what it defines itself (the room's error type, `super::exit`), and
//!   it may use its parts (its `mod` declarations, re-exports, and code such
//!   as `cli/mod.rs` dispatching to `run::run`); its references down to its
//!   own children are therefore not edges. A circle is looked for among the
//!   files of one directory; references between directories are checked
//!   only by the `llm` rule. What this does not see: a file that uses an item
//!   of `mod.rs` that in turn uses a sibling of that file.
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};

/// One token of Rust code, with comments and literals already dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// Tokenizes Rust source, dropping comments, string/char/number literals
/// and lifetimes; what remains is enough to find paths.
fn tokenize(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let is_start = |ch: char| ch.is_alphabetic() || ch == '_';
    let is_cont = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == '"' {
            i = skip_string(&c, i + 1);
        } else if ch == '\'' {
            if next == Some('\\') {
                // An escaped char literal: up to the closing quote.
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                // A lifetime or label: skip its name.
                i += 1;
                while i < c.len() && is_cont(c[i]) {
                    i += 1;
                }
            }
        } else if ch.is_ascii_digit() {
            while i < c.len() && (is_cont(c[i]) || c[i] == '.') {
                i += 1;
            }
        } else if is_start(ch) {
            let start = i;
            while i < c.len() && is_cont(c[i]) {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let at = c.get(i).copied();
            if matches!(word.as_str(), "r" | "br" | "cr") && matches!(at, Some('"' | '#')) {
                // A raw string (`r#"…"#`) or a raw identifier (`r#type`).
                let mut hashes = 0;
                while c.get(i) == Some(&'#') {
                    hashes += 1;
                    i += 1;
                }
                if c.get(i) == Some(&'"') {
                    i = skip_raw_string(&c, i + 1, hashes);
                } else {
                    let s = i;
                    while i < c.len() && is_cont(c[i]) {
                        i += 1;
                    }
                    out.push(Tok::Ident(c[s..i].iter().collect()));
                }
            } else if matches!(word.as_str(), "b" | "c") && at == Some('"') {
                i = skip_string(&c, i + 1);
            } else if word == "b" && at == Some('\'') {
                i += 1;
                while i < c.len() && c[i] != '\'' {
                    i += if c[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
            } else {
                out.push(Tok::Ident(word));
            }
        } else if ch == ':' && next == Some(':') {
            out.push(Tok::PathSep);
            i += 2;
        } else {
            if !ch.is_whitespace() {
                out.push(Tok::Punct(ch));
            }
            i += 1;
        }
    }
    out
}

/// Index just past the closing quote of a string whose body starts at `i`.
fn skip_string(c: &[char], mut i: usize) -> usize {
    while i < c.len() && c[i] != '"' {
        i += if c[i] == '\\' { 2 } else { 1 };
    }
    i + 1
}

fn skip_raw_string(c: &[char], mut i: usize, hashes: usize) -> usize {
    while i < c.len() {
        if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        i += 1;
    }
    i
}

fn ident(t: &Tok) -> Option<&str> {
    match t {
        Tok::Ident(s) => Some(s),
        _ => None,
    }
}

/// Index just past the bracket that closes the one opened at `open`.
fn skip_group(toks: &[Tok], open: usize) -> usize {
    let mut depth = 0i32;
    let mut i = open;
    while i < toks.len() {
        match toks[i] {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// Removes every item under `#[cfg(test)]`; returns what is left and the
/// names of out-of-line test-only modules (`#[cfg(test)] mod props;`).
fn strip_test_items(toks: Vec<Tok>) -> (Vec<Tok>, Vec<String>) {
    let cfg_test = [
        Tok::Punct('#'),
        Tok::Punct('['),
        Tok::Ident("cfg".into()),
        Tok::Punct('('),
        Tok::Ident("test".into()),
        Tok::Punct(')'),
        Tok::Punct(']'),
    ];
    let mut out = Vec::with_capacity(toks.len());
    let mut test_mods = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if !toks[i..].starts_with(&cfg_test) {
            out.push(toks[i].clone());
            i += 1;
            continue;
        }
        i += cfg_test.len();
        // Further attributes of the same item.
        while toks.get(i) == Some(&Tok::Punct('#')) && toks.get(i + 1) == Some(&Tok::Punct('[')) {
            i = skip_group(&toks, i + 1);
        }
        let item_start = i;
        while i < toks.len() {
            match toks[i] {
                Tok::Punct(';') => {
                    let words: Vec<&str> = toks[item_start..i].iter().filter_map(ident).collect();
                    if let Some(pos) = words.iter().position(|w| *w == "mod")
                        && let Some(name) = words.get(pos + 1)
                    {
                        test_mods.push((*name).to_string());
                    }
                    i += 1;
                    break;
                }
                Tok::Punct('{') => {
                    i = skip_group(&toks, i);
                    break;
                }
                Tok::Punct('(' | '[') => i = skip_group(&toks, i),
                _ => i += 1,
            }
        }
    }
    (out, test_mods)
}

/// One name bound by a `use` item: the full path written, and the name it
/// binds (`None` for a glob).
#[derive(Debug, Clone)]
struct UseLeaf {
    path: Vec<String>,
    binds: Option<String>,
    reexport: bool,
}

/// Expands a use tree starting at `i` (after `use`) into its leaves; returns
/// the index of the terminating `;`.
fn parse_use_tree(
    toks: &[Tok],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    let mut path = prefix.to_vec();
    if toks.get(i) == Some(&Tok::PathSep) {
        i += 1;
        path.push("::".into());
    }
    loop {
        match toks.get(i) {
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                i += 1;
                if toks.get(i) == Some(&Tok::PathSep) {
                    i += 1;
                    continue;
                }
                let mut binds = path.last().cloned();
                if toks.get(i).and_then(ident) == Some("as") {
                    binds = toks.get(i + 1).and_then(ident).map(str::to_string);
                    i += 2;
                }
                if path.last().map(String::as_str) == Some("self") {
                    path.pop();
                    if binds.as_deref() == Some("self") {
                        binds = path.last().cloned();
                    }
                }
                out.push((path, binds));
                return i;
            }
            Some(Tok::Punct('*')) => {
                path.push("*".into());
                out.push((path, None));
                return i + 1;
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                loop {
                    match toks.get(i) {
                        Some(Tok::Punct('}')) => return i + 1,
                        Some(Tok::Punct(',')) => i += 1,
                        None => return i,
                        _ => i = parse_use_tree(toks, i, &path, out),
                    }
                }
            }
            _ => return i,
        }
    }
}

/// A `.rs` file under `src/` as the checker sees it.
struct SrcFile {
    /// Relative to `src/`, with `/` separators.
    rel: String,
    /// Module path from the crate root (`["research", "data", "local"]`).
    module: Vec<String>,
    /// `lib.rs` or a `mod.rs`: the file of a directory's module.
    facade: bool,
    uses: Vec<UseLeaf>,
    /// Inline paths written in code (at least two segments).
    paths: Vec<Vec<String>>,
    test_mods: Vec<String>,
}

fn parse_file(rel: &str, text: &str) -> SrcFile {
    let facade = rel == "lib.rs" || rel.ends_with("/mod.rs") || rel == "mod.rs";
    let mut module: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if facade {
        module.pop();
    }
    let (toks, test_mods) = strip_test_items(tokenize(text));
    let mut uses = Vec::new();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if ident(&toks[i]) == Some("use") {
            // `pub use`, `pub(crate) use`, `pub(super) use` re-export.
            let mut j = i;
            if j > 0 && toks[j - 1] == Tok::Punct(')') {
                while j > 0 && toks[j - 1] != Tok::Punct('(') {
                    j -= 1;
                }
                j = j.saturating_sub(1);
            }
            let reexport = j > 0 && ident(&toks[j - 1]) == Some("pub");
            let mut leaves = Vec::new();
            i = parse_use_tree(&toks, i + 1, &[], &mut leaves);
            uses.extend(leaves.into_iter().map(|(path, binds)| UseLeaf {
                path,
                binds,
                reexport,
            }));
            continue;
        }
        let starts_path = matches!(toks[i], Tok::Ident(_))
            && toks.get(i + 1) == Some(&Tok::PathSep)
            && (i == 0 || toks[i - 1] != Tok::PathSep);
        if !starts_path {
            i += 1;
            continue;
        }
        let mut path = Vec::new();
        while let Some(Tok::Ident(s)) = toks.get(i) {
            path.push(s.clone());
            i += 1;
            if toks.get(i) == Some(&Tok::PathSep) && matches!(toks.get(i + 1), Some(Tok::Ident(_)))
            {
                i += 1;
            } else {
                break;
            }
        }
        paths.push(path);
    }
    SrcFile {
        rel: rel.to_string(),
        module,
        facade,
        uses,
        paths,
        test_mods,
    }
}

/// The reference graph over all files.
struct Graph {
    files: Vec<SrcFile>,
    by_module: HashMap<Vec<String>, usize>,
    /// `edges[x][y]` = one path written in `x` that lands in `y`.
    edges: Vec<BTreeMap<usize, String>>,
    /// Inline or `use` paths of a file that name the `tools` module tree.
    tool_refs: Vec<Vec<String>>,
}

/// Where a path lands: the module it walked to, and the file that defines
/// what it names (after following re-exports).
struct Landing {
    module: Vec<String>,
    file: usize,
}

impl Graph {
    fn build(sources: &[(String, String)]) -> Graph {
        let mut files: Vec<SrcFile> = sources
            .iter()
            .map(|(rel, text)| parse_file(rel, text))
            .collect();
        // Test-only module files are no part of the library.
        let test_only: BTreeSet<Vec<String>> = files
            .iter()
            .flat_map(|f| {
                f.test_mods
                    .iter()
                    .map(|m| [f.module.clone(), vec![m.clone()]].concat())
            })
            .collect();
        files.retain(|f| !test_only.contains(&f.module));
        let by_module = files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.module.clone(), i))
            .collect();
        let mut g = Graph {
            edges: vec![BTreeMap::new(); files.len()],
            tool_refs: vec![Vec::new(); files.len()],
            files,
            by_module,
        };
        for x in 0..g.files.len() {
            let aliases = g.module_aliases(x);
            let mut written: Vec<Vec<String>> = Vec::new();
            for u in &g.files[x].uses {
                // A directory's own re-exports are its table of contents.
                if !(g.files[x].facade && u.reexport) {
                    written.push(u.path.clone());
                }
            }
            written.extend(g.files[x].paths.iter().cloned());
            for path in written {
                let Some(landing) = g.resolve(x, &path, &aliases, 0) else {
                    continue;
                };
                let shown = path.join("::");
                if landing.module.first().map(String::as_str) == Some("tools")
                    || g.files[landing.file].rel.starts_with("tools/")
                {
                    g.tool_refs[x].push(shown.clone());
                }
                let target = &g.files[landing.file].module;
                let own_child = g.files[x].facade
                    && target.len() > g.files[x].module.len()
                    && target.starts_with(&g.files[x].module);
                if landing.file != x && !own_child {
                    g.edges[x].entry(landing.file).or_insert(shown);
                }
            }
        }
        g
    }

    fn module_exists(&self, m: &[String]) -> bool {
        self.by_module.contains_key(m)
    }

    /// Names a file binds to whole modules with `use` (`use super::entry;`,
    /// `use crate::research::data::{self, …}`).
    fn module_aliases(&self, x: usize) -> HashMap<String, Vec<String>> {
        let mut out = HashMap::new();
        for u in &self.files[x].uses {
            let Some(name) = &u.binds else { continue };
            if let Some(m) = self.walk_modules(x, &u.path, &HashMap::new())
                && m.1 == u.path.len()
            {
                out.insert(name.clone(), m.0);
            }
        }
        out
    }

    /// Walks `path` down the module tree as far as it names modules; returns
    /// the module reached and how many segments were used, or `None` when the
    /// path does not start inside this crate.
    fn walk_modules(
        &self,
        x: usize,
        path: &[String],
        aliases: &HashMap<String, Vec<String>>,
    ) -> Option<(Vec<String>, usize)> {
        let f = &self.files[x];
        let first = path.first()?;
        let (mut cur, mut used) = match first.as_str() {
            "crate" => (Vec::new(), 1),
            "self" => (f.module.clone(), 1),
            "super" => {
                let mut m = f.module.clone();
                let mut n = 0;
                while path.get(n).map(String::as_str) == Some("super") {
                    m.pop();
                    n += 1;
                }
                (m, n)
            }
            name => {
                let child = [f.module.clone(), vec![name.to_string()]].concat();
                if let Some(m) = aliases.get(name) {
                    (m.clone(), 1)
                } else if f.facade && self.module_exists(&child) {
                    (child, 1)
                } else {
                    return None;
                }
            }
        };
        while let Some(seg) = path.get(used) {
            let next = [cur.clone(), vec![seg.clone()]].concat();
            if !self.module_exists(&next) {
                break;
            }
            cur = next;
            used += 1;
        }
        Some((cur, used))
    }

    fn resolve(
        &self,
        x: usize,
        path: &[String],
        aliases: &HashMap<String, Vec<String>>,
        depth: usize,
    ) -> Option<Landing> {
        let (module, used) = self.walk_modules(x, path, aliases)?;
        let owner = *self.by_module.get(&module)?;
        let item = path.get(used).filter(|s| *s != "*");
        if let Some(item) = item
            && depth < 8
        {
            // Follow a re-export of `item` in the module's file to its source.
            let reexport = self.files[owner]
                .uses
                .iter()
                .find(|u| u.reexport && u.binds.as_deref() == Some(item.as_str()));
            if let Some(u) = reexport
                && let Some(inner) =
                    self.resolve(owner, &u.path, &self.module_aliases(owner), depth + 1)
            {
                return Some(Landing {
                    module,
                    file: inner.file,
                });
            }
        }
        Some(Landing {
            module,
            file: owner,
        })
    }

    fn dir_of(&self, i: usize) -> &str {
        let rel = &self.files[i].rel;
        rel.rfind('/').map_or("", |p| &rel[..p])
    }

    /// Every circle among the files of one directory, each as a readable
    /// chain `a.rs -(path)-> b.rs -(path)-> a.rs`.
    fn circles(&self) -> Vec<String> {
        let mut dirs: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for i in 0..self.files.len() {
            dirs.entry(self.dir_of(i)).or_default().push(i);
        }
        let mut found = Vec::new();
        for (dir, members) in dirs {
            let inside: BTreeSet<usize> = members.iter().copied().collect();
            let succ = |n: usize| {
                self.edges[n]
                    .keys()
                    .copied()
                    .filter(|m| inside.contains(m))
                    .collect::<Vec<_>>()
            };
            let mut reported: BTreeSet<BTreeSet<usize>> = BTreeSet::new();
            for &start in &members {
                let Some(cycle) = shortest_cycle(start, &succ) else {
                    continue;
                };
                let key: BTreeSet<usize> = cycle.iter().copied().collect();
                if !reported.insert(key) {
                    continue;
                }
                let shown_dir = if dir.is_empty() {
                    String::new()
                } else {
                    format!("{dir}/")
                };
                let mut text = format!("src/{shown_dir}: {}", self.name(cycle[0]));
                for w in cycle
                    .windows(2)
                    .chain(std::iter::once(&[cycle[cycle.len() - 1], cycle[0]][..]))
                {
                    text.push_str(&format!(
                        " -({})-> {}",
                        self.edges[w[0]][&w[1]],
                        self.name(w[1])
                    ));
                }
                found.push(text);
            }
        }
        found
    }

    fn name(&self, i: usize) -> &str {
        let rel = &self.files[i].rel;
        rel.rfind('/').map_or(rel.as_str(), |p| &rel[p + 1..])
    }
}

/// The shortest path from `start` back to itself, as the nodes visited.
fn shortest_cycle(start: usize, succ: &dyn Fn(usize) -> Vec<usize>) -> Option<Vec<usize>> {
    let mut prev: HashMap<usize, usize> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        for m in succ(n) {
            if m == start {
                let mut path = vec![n];
                while let Some(&p) = prev.get(path.last()?) {
                    path.push(p);
                }
                path.reverse();
                return Some(path);
            }
            if m != start && !prev.contains_key(&m) {
                prev.insert(m, n);
                queue.push_back(m);
            }
        }
    }
    None
}

fn read_sources(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            read_sources(&p, root, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if rel != "main.rs" {
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
}

fn crate_graph() -> Graph {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources = Vec::new();
    read_sources(&root, &root, &mut sources);
    Graph::build(&sources)
}

#[test]
fn the_files_of_each_directory_form_a_tree() {
    let g = crate_graph();
    assert!(
        g.files.len() > 100,
        "read only {} files under src/",
        g.files.len()
    );
    let circles = g.circles();
    assert!(
        circles.is_empty(),
        "files that refer to one another in a circle:\n{}",
        circles.join("\n")
    );
}

#[test]
fn llm_uses_no_tool_code() {
    let g = crate_graph();
    let mut found = Vec::new();
    for (i, refs) in g.tool_refs.iter().enumerate() {
        if g.files[i].rel.starts_with("llm/") {
            found.extend(refs.iter().map(|r| format!("src/{}: {r}", g.files[i].rel)));
        }
    }
    assert!(
        found.is_empty(),
        "the llm room refers to tool code:\n{}",
        found.join("\n")
    );
}

/// The checker itself, on a small planted tree: it finds a circle made by an
/// inline path, attributes re-exported names to their source, and ignores
/// comments, strings and tests.
#[test]
fn the_checker_sees_a_planted_circle_and_follows_reexports() {
    let src = |files: &[(&str, &str)]| {
        files
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect::<Vec<_>>()
    };
    let planted = src(&[
        ("lib.rs", "pub mod room; pub mod tools;"),
        ("tools/mod.rs", "pub fn preview() {}"),
        (
            "room/mod.rs",
            "mod a; mod b; mod c; pub use a::Thing; pub struct Error; fn go() { b::helper() } #[cfg(test)] mod props;",
        ),
        ("room/props.rs", "use super::c::x;"),
        ("room/a.rs", "use super::b::helper; pub struct Thing;"),
        (
            "room/b.rs",
            "pub fn helper() { let _ = super::a::Thing; let _ = super::Error; }",
        ),
        (
            "room/c.rs",
            "use super::{Thing, Error}; // super::b::helper\n fn f() { let _ = \"super::b::helper\"; crate::tools::preview() }\n#[cfg(test)] mod tests { use super::super::b::helper; }",
        ),
    ]);
    let g = Graph::build(&planted);
    let idx = |rel: &str| g.files.iter().position(|f| f.rel == rel).unwrap();
    let circles = g.circles();
    assert_eq!(
        circles,
        vec!["src/room/: a.rs -(super::b::helper)-> b.rs -(super::a::Thing)-> a.rs"]
    );
    // `Thing` is only re-exported by mod.rs: the edge goes to a.rs.
    let c_targets: BTreeSet<&str> = g.edges[idx("room/c.rs")]
        .keys()
        .map(|&t| g.files[t].rel.as_str())
        .collect();
    assert_eq!(
        c_targets,
        BTreeSet::from(["room/a.rs", "room/mod.rs", "tools/mod.rs"])
    );
    assert_eq!(g.tool_refs[idx("room/c.rs")], vec!["crate::tools::preview"]);
    // mod.rs's declarations, re-exports and code reaching down to its own
    // parts are not edges; a test-only file is not read.
    assert!(g.edges[idx("room/mod.rs")].is_empty());
    assert!(!g.files.iter().any(|f| f.rel == "room/props.rs"));
}
