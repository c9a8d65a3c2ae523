//! House rules checked on the source itself (issue 36): errors are typed
//! rather than `Result<_, String>`, and no function runs over 150 lines.
//! The scan blanks comments, strings and character literals first, so a
//! brace or a `Result<…, String>` inside them is not read as code.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::docs::{root, rust_files};

/// The most `Result<…, String>` library code may keep, each with a comment
/// saying why a string is right there.
const MAX_STRING_ERRORS: usize = 5;
/// The longest a function may be, from its `fn` line to its closing brace.
const MAX_FN_LINES: usize = 150;
/// Functions over the limit that another change is splitting; this list
/// only shrinks. Each entry is (file, function name).
const LONG_FN_ALLOWED: &[(&str, &str)] = &[];

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `src` with comments, string and character literals replaced by spaces
/// (newlines kept, so positions and line numbers still match).
fn blank(src: &str) -> Vec<char> {
    let s: Vec<char> = src.chars().collect();
    let mut out = s.clone();
    let wipe = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in out.iter_mut().take(to.min(s.len())).skip(from) {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let at = |i: usize| s.get(i).copied().unwrap_or('\0');
    let mut i = 0;
    while i < s.len() {
        let prev_ident = i > 0 && is_ident(s[i - 1]);
        if at(i) == '/' && at(i + 1) == '/' {
            let end = (i..s.len()).find(|&j| s[j] == '\n').unwrap_or(s.len());
            wipe(&mut out, i, end);
            i = end;
        } else if at(i) == '/' && at(i + 1) == '*' {
            let (mut depth, mut j) = (1, i + 2);
            while j < s.len() && depth > 0 {
                if at(j) == '/' && at(j + 1) == '*' {
                    depth += 1;
                    j += 2;
                } else if at(j) == '*' && at(j + 1) == '/' {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            wipe(&mut out, i, j);
            i = j;
        } else if !prev_ident && (at(i) == 'r' || (at(i) == 'b' && at(i + 1) == 'r')) && {
            let r = if at(i) == 'b' { i + 1 } else { i };
            let hashes = (r + 1..s.len()).take_while(|&j| s[j] == '#').count();
            at(r + 1 + hashes) == '"'
        } {
            let r = if at(i) == 'b' { i + 1 } else { i };
            let hashes = (r + 1..s.len()).take_while(|&j| s[j] == '#').count();
            let mut j = r + 2 + hashes;
            while j < s.len() {
                if s[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#') {
                    break;
                }
                j += 1;
            }
            let end = j + 1 + hashes;
            wipe(&mut out, i, end);
            i = end;
        } else if at(i) == '"' {
            let mut j = i + 1;
            while j < s.len() && s[j] != '"' {
                j += if s[j] == '\\' { 2 } else { 1 };
            }
            wipe(&mut out, i, j + 1);
            i = j + 1;
        } else if at(i) == '\'' && at(i + 1) == '\\' {
            // An escaped character literal: '\n', '\'', '\u{1F600}'.
            let end = (i + 2..s.len()).find(|&j| s[j] == '\'' && j > i + 2);
            let end = end.map_or(s.len(), |j| j + 1);
            wipe(&mut out, i, end);
            i = end;
        } else if at(i) == '\'' && at(i + 2) == '\'' {
            wipe(&mut out, i, i + 3);
            i += 3;
        } else {
            // A lifetime (`'a`) or anything else stays.
            i += 1;
        }
    }
    out
}

/// The index of the brace that closes the one at `open`.
fn closing_brace(code: &[char], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, c) in code.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// From `from`, the first `{` or `;` outside parentheses and brackets.
fn item_end_or_body(code: &[char], from: usize) -> Option<(usize, char)> {
    let mut depth = 0i32;
    for (j, &c) in code.iter().enumerate().skip(from) {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '{' | ';' if depth == 0 => return Some((j, c)),
            _ => {}
        }
    }
    None
}

fn line_of(code: &[char], at: usize) -> usize {
    code.iter().take(at).filter(|c| **c == '\n').count() + 1
}

fn text(code: &[char]) -> String {
    code.iter().collect()
}

/// One source file, blanked, with its `#[cfg(test)]` items' spans and the
/// test-only modules it declares out of line (`#[cfg(test)] mod x;`).
struct Source {
    path: PathBuf,
    code: Vec<char>,
    test_spans: Vec<(usize, usize)>,
    test_modules: Vec<String>,
}

fn read_source(path: &Path) -> Source {
    let code = blank(&std::fs::read_to_string(path).unwrap());
    let flat = text(&code);
    let mut test_spans = Vec::new();
    let mut test_modules = Vec::new();
    let needle = "#[cfg(test)]";
    let mut search = 0;
    while let Some(found) = flat[search..].find(needle) {
        // Byte offsets equal char offsets only for ASCII; map through
        // the char count of the prefix.
        let start = flat[..search + found].chars().count();
        search += found + needle.len();
        let mut j = start + needle.chars().count();
        // Further attributes on the same item.
        loop {
            while code.get(j).is_some_and(|c| c.is_whitespace()) {
                j += 1;
            }
            if code.get(j) == Some(&'#') {
                let close = (j..code.len())
                    .find(|&k| code[k] == ']')
                    .unwrap_or(code.len());
                j = close + 1;
            } else {
                break;
            }
        }
        let Some((end, c)) = item_end_or_body(&code, j) else {
            continue;
        };
        let head = text(&code[j..end]);
        let words: Vec<&str> = head.split_whitespace().collect();
        if c == ';' {
            if let Some(p) = words.iter().position(|w| *w == "mod")
                && let Some(name) = words.get(p + 1)
            {
                test_modules.push(name.to_string());
            }
            test_spans.push((start, end));
        } else {
            test_spans.push((start, closing_brace(&code, end)));
        }
    }
    Source {
        path: path.to_path_buf(),
        code,
        test_spans,
        test_modules,
    }
}

/// Where the submodules of the module in `file` live.
fn submodule_dir(file: &Path) -> PathBuf {
    let dir = file.parent().unwrap().to_path_buf();
    match file.file_stem().and_then(|s| s.to_str()) {
        Some("mod" | "lib" | "main") => dir,
        Some(stem) => dir.join(stem),
        None => dir,
    }
}

/// The files whose module is declared `#[cfg(test)]`, and their
/// submodules' folders.
fn test_only_roots(sources: &[Source]) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    for s in sources {
        let dir = submodule_dir(&s.path);
        for m in &s.test_modules {
            let file = dir.join(format!("{m}.rs"));
            roots.push(submodule_dir(&file));
            roots.push(file);
            roots.push(dir.join(m));
        }
    }
    roots
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Each `Result<…, String>` in `code` outside `skip`: its line.
fn string_results(code: &[char], skip: &[(usize, usize)]) -> Vec<usize> {
    let flat = text(code);
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = flat.char_indices().collect();
    for (ci, &(bi, _)) in chars.iter().enumerate() {
        if !flat[bi..].starts_with("Result<") || (ci > 0 && is_ident(chars[ci - 1].1)) {
            continue;
        }
        if skip.iter().any(|(a, b)| (*a..=*b).contains(&ci)) {
            continue;
        }
        // The generic arguments, split at top-level commas.
        let mut depth = 0i32;
        let mut args = vec![String::new()];
        let mut j = ci + "Result<".len();
        while let Some(&c) = code.get(j) {
            let arrow = c == '>' && j > 0 && code[j - 1] == '-';
            match c {
                '<' | '(' | '[' => depth += 1,
                '>' if arrow => {}
                '>' if depth == 0 => break,
                '>' | ')' | ']' => depth -= 1,
                ',' if depth == 0 => {
                    args.push(String::new());
                    j += 1;
                    continue;
                }
                _ => {}
            }
            if let Some(last) = args.last_mut() {
                last.push(c);
            }
            j += 1;
        }
        let err = args
            .last()
            .map(|a| a.trim().to_string())
            .unwrap_or_default();
        if args.len() == 2 && (err == "String" || err == "std::string::String") {
            out.push(line_of(code, ci));
        }
    }
    out
}

/// Each function in `code`: its name, first line and length in lines.
fn functions(code: &[char]) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 2 < code.len() {
        let is_fn = code[i] == 'f'
            && code[i + 1] == 'n'
            && code[i + 2].is_whitespace()
            && (i == 0 || !is_ident(code[i - 1]));
        if !is_fn {
            i += 1;
            continue;
        }
        let mut j = i + 2;
        while code.get(j).is_some_and(|c| c.is_whitespace()) {
            j += 1;
        }
        let name: String = code[j..].iter().take_while(|c| is_ident(**c)).collect();
        if name.is_empty() {
            i += 2;
            continue;
        }
        if let Some((open, '{')) = item_end_or_body(code, j) {
            let close = closing_brace(code, open);
            let first = line_of(code, i);
            out.push((name, first, line_of(code, close) - first + 1));
        }
        i = j;
    }
    out
}

fn library_sources() -> Vec<Source> {
    let files = rust_files(&root().join("src"));
    assert!(files.len() > 100, "only {} files under src/", files.len());
    files.iter().map(|f| read_source(f)).collect()
}

#[test]
fn the_scanner_reads_code_not_comments_or_strings() {
    let src = "// fn a() -> Result<(), String> {\nfn b() -> Result<u8, String> {\n    let s = \"}{\";\n    let c = '{';\n    let r = r#\"Result<(), String>\"#;\n    x::<'a>()\n}\nfn c() -> Result<BTreeMap<String, String>, E> { }\n#[cfg(test)]\nmod tests {\n    fn d() -> Result<(), String> {}\n}\n#[cfg(test)]\nmod probe;\n";
    let s = Source {
        path: PathBuf::from("x.rs"),
        code: blank(src),
        test_spans: Vec::new(),
        test_modules: Vec::new(),
    };
    let fns = functions(&s.code);
    let names: Vec<&str> = fns.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, ["b", "c", "d"]);
    assert_eq!((fns[0].1, fns[0].2), (2, 6), "b spans lines 2 to 7");
    assert_eq!(string_results(&s.code, &[]), [2, 11]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lib.rs");
    std::fs::write(&file, src).unwrap();
    let read = read_source(&file);
    assert_eq!(string_results(&read.code, &read.test_spans), [2]);
    assert_eq!(read.test_modules, ["probe"]);
}

/// Errors are typed (house rules): at most [`MAX_STRING_ERRORS`]
/// `Result<…, String>` outside test code, each explained where it stands.
#[test]
fn library_code_keeps_at_most_five_string_errors() {
    let sources = library_sources();
    let test_only = test_only_roots(&sources);
    let mut found = Vec::new();
    for s in &sources {
        if test_only.iter().any(|r| s.path.starts_with(r)) {
            continue;
        }
        for line in string_results(&s.code, &s.test_spans) {
            found.push(format!("{}:{line}", relative(&s.path)));
        }
    }
    assert!(
        found.len() <= MAX_STRING_ERRORS,
        "{} Result<_, String> outside tests (at most {MAX_STRING_ERRORS}); use a thiserror type:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// No function over [`MAX_FN_LINES`] lines (house rules), tests included.
#[test]
fn no_function_runs_over_150_lines() {
    let mut long = Vec::new();
    let mut allowed_seen = BTreeSet::new();
    for s in library_sources() {
        let file = relative(&s.path);
        for (name, line, len) in functions(&s.code) {
            if len <= MAX_FN_LINES {
                continue;
            }
            if LONG_FN_ALLOWED.contains(&(file.as_str(), name.as_str())) {
                allowed_seen.insert((file.clone(), name));
                continue;
            }
            long.push(format!("{file}:{line} {name}: {len} lines"));
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines; split them:\n{}",
        long.join("\n")
    );
    // An allowance no longer needed is removed, so the list only shrinks.
    for (file, name) in LONG_FN_ALLOWED {
        assert!(
            allowed_seen.contains(&(file.to_string(), name.to_string())),
            "{file} {name} is no longer over {MAX_FN_LINES} lines: drop it from LONG_FN_ALLOWED"
        );
    }
}
