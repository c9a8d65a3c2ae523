//! The contract in `docs/` stays in step with the code.
//!
//! 1. Every section number the source cites (`§7.4`, `§ 12.14`, anywhere in
//!    a `.rs` file under `src/`: comments, and the few user-facing strings
//!    that cite one) has a heading in `docs/`: a markdown heading line whose
//!    text starts with that number followed by a space or by a dot and a
//!    space, e.g. `### 7.4 Execution model` or `## 7. Backtest engine`.
//!    `1.3 …` is a heading for §1.3, not for §1.
//! 2. `docs/architecture.md` holds the table of rooms. Its format, kept
//!    simple so this test can read it:
//!
//!    ```text
//!    | room | owns | may use |
//!    |---|---|---|
//!    | `agent` | the loop … | `llm`, `memory`, `model`, `store`, `tools` |
//!    | `model` | … | — |
//!    ```
//!
//!    The table starts at the header row whose first cell is `room`; each
//!    row's first cell is the room in backticks, and every backticked name
//!    in its last cell is a room it may use (anything else there, such as
//!    `—` or a `†` marking a known exception, is ignored). The table ends at
//!    the first line that is not a table row. Every top-level module of
//!    `src/lib.rs` must have a row, and every `crate::<room>` reference in
//!    `src/<room>/**.rs` or `src/<room>.rs` (doc links included) must be an
//!    edge the table allows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, sorted.
pub(crate) fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Section numbers cited in `text`: `§` (optionally one space) then
/// `N(.N)*`. A trailing dot that ends a sentence is not part of the number.
fn cited_sections(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices('§') {
        let rest = &text[i + '§'.len_utf8()..];
        let rest = rest.strip_prefix(' ').unwrap_or(rest);
        let mut number = String::new();
        let mut chars = rest.chars().peekable();
        while let Some(&c) = chars.peek() {
            if c.is_ascii_digit() {
                number.push(c);
                chars.next();
            } else if c == '.' && number.chars().last().is_some_and(|l| l.is_ascii_digit()) {
                // A dot belongs to the number only when a digit follows it.
                let mut ahead = chars.clone();
                ahead.next();
                if ahead.peek().is_some_and(|d| d.is_ascii_digit()) {
                    number.push('.');
                    chars.next();
                } else {
                    break;
                }
            } else {
                break;
            }
        }
        if !number.is_empty() {
            out.push(number);
        }
    }
    out
}

/// The section numbers that headings in `markdown` define: the text of a
/// `#`…`######` line up to the first space, with one trailing dot removed,
/// when it is made of digits and dots.
fn heading_numbers(markdown: &str) -> BTreeSet<String> {
    markdown
        .lines()
        .filter_map(|line| {
            let text = line.trim_start_matches('#');
            if text.len() == line.len() || line.len() - text.len() > 6 {
                return None;
            }
            let text = text.strip_prefix(' ')?.trim_start();
            let first = text.split_whitespace().next()?;
            let number = first.strip_suffix('.').unwrap_or(first);
            let well_formed = !number.is_empty()
                && number
                    .split('.')
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
            well_formed.then(|| number.to_string())
        })
        .collect()
}

/// Every heading number in every markdown file under `docs/`.
fn documented_sections() -> BTreeSet<String> {
    let docs = root().join("docs");
    let mut numbers = BTreeSet::new();
    for entry in
        std::fs::read_dir(&docs).unwrap_or_else(|e| panic!("{} must exist: {e}", docs.display()))
    {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            numbers.extend(heading_numbers(&std::fs::read_to_string(&path).unwrap()));
        }
    }
    numbers
}

#[test]
fn section_parsers_read_what_they_should() {
    assert_eq!(
        cited_sections("(spec §6.1–§6.3), §12.14. See § 7 and §2.8: x"),
        ["6.1", "6.3", "12.14", "7", "2.8"]
    );
    let md = "# vibedesk\n## 1 The loop\n### 1.3 One iteration\n## 7. Backtest\n#no\n####### 9 too deep\ntext 4.4 x\n### 1.x no\n";
    let got: Vec<String> = heading_numbers(md).into_iter().collect();
    assert_eq!(got, ["1", "1.3", "7"]);
}

#[test]
fn every_cited_section_has_a_heading_in_docs() {
    let documented = documented_sections();
    let mut missing: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut cited = 0;
    for file in rust_files(&root().join("src")) {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for number in cited_sections(line) {
                cited += 1;
                if !documented.contains(&number) {
                    let at = format!(
                        "{}:{}",
                        file.strip_prefix(root()).unwrap_or(&file).display(),
                        n + 1
                    );
                    missing.entry(number).or_default().push(at);
                }
            }
        }
    }
    assert!(cited > 0, "no § citations found under src/");
    let report: Vec<String> = missing
        .iter()
        .map(|(number, at)| format!("§{number} (cited at {})", at.join(", ")))
        .collect();
    assert!(
        missing.is_empty(),
        "{} cited section(s) have no heading in docs/:\n{}",
        missing.len(),
        report.join("\n")
    );
}

/// Room → the rooms it may use, from the table in `docs/architecture.md`.
fn allowed_edges(markdown: &str) -> BTreeMap<String, BTreeSet<String>> {
    let backticked = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    };
    let mut rows = BTreeMap::new();
    let mut in_table = false;
    for line in markdown.lines() {
        let line = line.trim();
        let cells: Vec<&str> = line
            .strip_prefix('|')
            .and_then(|l| l.strip_suffix('|'))
            .map(|l| l.split('|').map(str::trim).collect())
            .unwrap_or_default();
        if !in_table {
            in_table = cells.first() == Some(&"room");
            continue;
        }
        if cells.is_empty() {
            break;
        }
        if cells
            .iter()
            .all(|c| c.chars().all(|ch| ch == '-' || ch == ':'))
        {
            continue;
        }
        let (Some(room), Some(uses)) = (backticked(cells[0]).first().cloned(), cells.last()) else {
            panic!("architecture.md: a table row without a backticked room: {line}");
        };
        rows.insert(room, backticked(uses).into_iter().collect());
    }
    rows
}

/// The top-level modules declared in `src/lib.rs`.
fn rooms() -> Vec<String> {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| {
            let l = l.trim();
            let name = l
                .strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("mod "))?;
            Some(name.trim_end_matches(';').trim().to_string())
        })
        .collect()
}

/// `crate::<name>` references in `text`.
fn crate_references(text: &str) -> BTreeSet<String> {
    text.match_indices("crate::")
        .filter(|(i, _)| {
            // `vibedesk_crate::x` or similar is not a crate path.
            !text[..*i]
                .chars()
                .last()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
        .filter_map(|(i, m)| {
            let name: String = text[i + m.len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

#[test]
fn architecture_table_allows_every_dependency_in_the_code() {
    let path = root().join("docs/architecture.md");
    let markdown = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} must exist: {e}", path.display()));
    let table = allowed_edges(&markdown);
    let rooms = rooms();
    assert!(
        rooms.len() > 5,
        "src/lib.rs declares too few modules: {rooms:?}"
    );

    let unlisted: Vec<&String> = rooms.iter().filter(|r| !table.contains_key(*r)).collect();
    assert!(
        unlisted.is_empty(),
        "rooms of src/lib.rs without a row in docs/architecture.md: {unlisted:?}"
    );

    let src = root().join("src");
    let mut violations = Vec::new();
    for room in &rooms {
        let allowed = &table[room];
        let dir = src.join(room);
        let mut files = if dir.is_dir() {
            rust_files(&dir)
        } else {
            Vec::new()
        };
        let single = src.join(format!("{room}.rs"));
        if single.is_file() {
            files.push(single);
        }
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for used in crate_references(&text) {
                if &used != room && rooms.contains(&used) && !allowed.contains(&used) {
                    violations.push(format!(
                        "{}: {room} → {used}",
                        file.strip_prefix(root()).unwrap_or(&file).display()
                    ));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "dependencies that docs/architecture.md does not allow (add the edge to the table and to \"Known exceptions\", or remove it from the code):\n{}",
        violations.join("\n")
    );
}

#[test]
fn architecture_table_parser_reads_the_documented_format() {
    let md = "intro\n\n| room | owns | may use |\n|---|---|---|\n| `agent` | the loop | `llm`, `tools` † |\n| `model` | messages | — |\n\nafter\n| `x` | not | `y` |\n";
    let t = allowed_edges(md);
    assert_eq!(t.len(), 2);
    assert_eq!(
        t["agent"],
        BTreeSet::from(["llm".to_string(), "tools".to_string()])
    );
    assert!(t["model"].is_empty());
    assert_eq!(
        crate_references("use crate::store::X; [`crate::sandbox::jobs`] my_crate::no"),
        BTreeSet::from(["sandbox".to_string(), "store".to_string()])
    );
}

/// `docs/extending.md` names only files that exist, and its table lists
/// exactly the manifest's built-in tools (a tool added to the manifest
/// without a row fails here).
#[test]
fn the_extending_guide_names_real_files_and_every_built_in_tool() {
    let text = std::fs::read_to_string(root().join("docs/extending.md")).unwrap();
    let mut named = 0;
    for (i, span) in text.split('`').enumerate() {
        // Odd pieces are inside backticks; `<name>` is a placeholder.
        let rooted = ["src/", "docs/", "tests/", "assets/", "benches/"]
            .iter()
            .any(|r| span.starts_with(r));
        if i % 2 == 1 && rooted && !span.contains('<') {
            named += 1;
            assert!(
                root().join(span).exists(),
                "docs/extending.md names {span}, which does not exist"
            );
        }
    }
    assert!(
        named >= 10,
        "only {named} paths found: the check reads nothing"
    );
    let mismatches =
        vibedesk::tools::builtin::table_mismatches(vibedesk::tools::builtin::MANIFEST, &text);
    assert!(mismatches.is_empty(), "docs/extending.md: {mismatches:?}");
}

/// The rows of the markdown table in `text` whose header row starts with
/// `header`: each row's cells, trimmed. The table ends at the first line
/// that is not a row.
fn table_rows(text: &str, header: &str) -> Vec<Vec<String>> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(header));
    assert!(lines.next().is_some(), "no table headed `{header}`");
    lines
        .skip(1) // the |---| line
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// The code spans of a cell: `` `a`, `b` `` → `[a, b]`.
fn code_spans(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// The README's tool table names every built-in tool exactly once, and
/// nothing else: it is a copy of the manifest, kept by hand.
#[test]
fn the_readme_tool_table_lists_every_built_in_tool_once() {
    use vibedesk::tools::builtin::MANIFEST;
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let rows = table_rows(&text, "| tool | what it does |");
    let listed: Vec<&str> = rows
        .iter()
        .flat_map(|r| code_spans(r.first().map_or("", String::as_str)))
        .collect();
    let mut problems = Vec::new();
    for e in MANIFEST {
        match listed.iter().filter(|n| **n == e.name).count() {
            1 => {}
            0 => problems.push(format!("'{}' is not listed", e.name)),
            n => problems.push(format!("'{}' is listed {n} times", e.name)),
        }
    }
    for n in &listed {
        if !MANIFEST.iter().any(|e| e.name == *n) {
            problems.push(format!("'{n}' is not a built-in tool"));
        }
    }
    assert!(problems.is_empty(), "README.md's tool table: {problems:?}");
}

/// docs/13-mcp.md §13.4.1's table is the served tools in `mcp serve`'s
/// order, each with its built-in and the flag that offers it; the
/// README's summary names the tools served without a flag.
#[test]
fn the_mcp_docs_list_the_served_tools_as_the_manifest_serves_them() {
    use vibedesk::tools::builtin::served_entries;
    use vibedesk::tools::{Gate, Served};
    let offered = |gate: Gate| match gate {
        Gate::Always => "always",
        Gate::MemoryWrite => "with `--allow-memory-write`",
        Gate::Sessions => "with `--allow-sessions`",
    };
    let want: Vec<[String; 3]> = served_entries()
        .iter()
        .filter_map(|e| match e.caps.served {
            Served::As { name, gate } => Some([
                format!("`{name}`"),
                format!("`{}`", e.name),
                offered(gate).to_string(),
            ]),
            Served::No => None,
        })
        .collect();
    assert!(want.len() >= 10, "the manifest serves only {want:?}");
    let text = std::fs::read_to_string(root().join("docs/13-mcp.md")).unwrap();
    let got: Vec<[String; 3]> = table_rows(&text, "| served as | built-in | offered |")
        .into_iter()
        .map(|r| {
            let cell = |i: usize| r.get(i).cloned().unwrap_or_default();
            [cell(0), cell(1), cell(2)]
        })
        .collect();
    assert_eq!(got, want, "docs/13-mcp.md §13.4.1's table");

    // The README's "`vibedesk mcp serve` offers …" sentence, up to "to any
    // MCP client": the tools a client gets without a flag.
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let from = readme.find("`vibedesk mcp serve` offers").unwrap();
    let to = from + readme[from..].find("to any MCP client").unwrap();
    let mut named: Vec<&str> = code_spans(&readme[from..to])
        .into_iter()
        .filter(|s| *s != "vibedesk mcp serve")
        .collect();
    let mut always: Vec<&str> = served_entries()
        .iter()
        .filter(|e| {
            matches!(
                e.caps.served,
                Served::As {
                    gate: Gate::Always,
                    ..
                }
            )
        })
        .filter_map(|e| e.caps.served_name())
        .collect();
    named.sort_unstable();
    always.sort_unstable();
    assert_eq!(named, always, "README.md: the tools `mcp serve` offers");
}
