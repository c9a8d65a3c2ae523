//! The original's strategy contract (docs §7.2, issue 5c): `class
//! SignalEngine` in `code/signal_engine.py` with `generate(self, data_map)
//! -> Dict[str, pandas.Series]`, run with Python and pandas.
//!
//! The engine (already inside the sandbox) writes each symbol's bars to
//! `artifacts/ohlcv_<code>.csv`, then runs [`RUNNER`] with the interpreter:
//! it applies the §7.2 static checks with Python's own `ast` module before
//! anything is imported, loads the module, calls `generate` with DataFrames
//! (`open, high, low, close, volume`, DatetimeIndex), checks the result
//! (a dict of Series for known codes), reindexes each Series to its
//! symbol's bars and writes them as JSON to `logs/python_signals.json`.
//! Rust then clips, shifts and executes them like any other signals.
//!
//! The child's stdout and stderr are captured and passed to the engine's
//! stderr, so a strategy's prints can never corrupt the metrics JSON the
//! engine prints on stdout.
//!
//! Deliberate choices: the scrubber does not flag `.rename()` / `.replace()`
//! (pandas methods far more often than pathlib writes); other pathlib write
//! methods are refused on any object. Missing Python or pandas is a clear
//! `python_unavailable` error, never a crash.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A failure of the Python path, with a code for tool results.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PythonError {
    /// `python_unavailable`, `strategy_rejected` (static checks),
    /// `strategy_error` (it raised), `bad_signals` (wrong return value).
    pub code: &'static str,
    pub message: String,
}

impl PythonError {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        PythonError {
            code,
            message: message.into(),
        }
    }
}

/// How long the interpreter probe may take (docs §2.6: 20 s).
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

const PROBE: &str = "import sys, pandas, numpy; print(sys.executable)";

/// Runs `cmd` to completion or `timeout`, capturing both streams.
fn run_captured(
    cmd: &mut Command,
    timeout: Option<Duration>,
) -> std::io::Result<(Option<i32>, String, String, bool)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut out_pipe = child.stdout.take();
    let mut err_pipe = child.stderr.take();
    let out_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(p) = out_pipe.as_mut() {
            let _ = p.read_to_end(&mut s);
        }
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(p) = err_pipe.as_mut() {
            let _ = p.read_to_end(&mut s);
        }
        s
    });
    let started = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if timeout.is_some_and(|t| started.elapsed() > t) {
            let _ = child.kill();
            timed_out = true;
            break child.wait()?;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let out = out_t.join().unwrap_or_default();
    let err = err_t.join().unwrap_or_default();
    Ok((
        status.code(),
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
        timed_out,
    ))
}

/// Finds an interpreter that imports pandas and numpy; returns its
/// `sys.executable` (a real path: version-manager shims need a HOME the
/// sandbox does not give them).
pub fn probe(python: Option<&Path>) -> Result<PathBuf, PythonError> {
    let program = python.map_or_else(|| PathBuf::from("python3"), Path::to_path_buf);
    let shown = program.display().to_string();
    let fix = "install them (`python3 -m pip install pandas numpy`) or use a built-in strategy or rules in config.json instead of code/signal_engine.py";
    match run_captured(
        Command::new(&program).args(["-c", PROBE]),
        Some(PROBE_TIMEOUT),
    ) {
        Ok((Some(0), out, _, false)) => {
            let exe = out.lines().last().unwrap_or("").trim().to_string();
            Ok(if exe.is_empty() {
                program
            } else {
                PathBuf::from(exe)
            })
        }
        Ok((_, _, _, true)) => Err(PythonError::new(
            "python_unavailable",
            format!(
                "code/signal_engine.py needs Python with pandas, but `{shown} -c \"import pandas\"` did not answer within {}s; {fix}",
                PROBE_TIMEOUT.as_secs()
            ),
        )),
        Ok((_, _, err, _)) => {
            let last = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("it failed")
                .trim()
                .to_string();
            Err(PythonError::new(
                "python_unavailable",
                format!(
                    "code/signal_engine.py needs Python with pandas and numpy, but `{shown} -c \"import pandas\"` failed ({last}); {fix}"
                ),
            ))
        }
        Err(e) => Err(PythonError::new(
            "python_unavailable",
            format!(
                "code/signal_engine.py needs Python with pandas, but `{shown}` cannot be started ({e}); {fix}"
            ),
        )),
    }
}

/// Runs the strategy; returns one signal vector per code, as long as its
/// bars (`lens`), NaN where the Series had no value. `python` is an
/// interpreter already known to import pandas (see [`probe`]; the tool
/// probes before it starts the engine, so the child does not probe again).
pub fn signals(
    run_dir: &Path,
    python: &Path,
    codes: &[String],
    files: &[PathBuf],
    lens: &[usize],
) -> Result<Vec<Vec<f64>>, PythonError> {
    let exe = python.to_path_buf();
    let logs = run_dir.join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| {
        PythonError::new(
            "strategy_error",
            format!("cannot create {}: {e}", logs.display()),
        )
    })?;
    let manifest = logs.join("python_manifest.json");
    let out_path = logs.join("python_signals.json");
    let err_path = logs.join("python_error.json");
    for p in [&out_path, &err_path] {
        let _ = std::fs::remove_file(p);
    }
    let m = serde_json::json!({
        "code": run_dir.join(super::SIGNAL_ENGINE_FILE), "codes": codes, "files": files,
        "out": out_path, "error": err_path,
    });
    std::fs::write(&manifest, m.to_string()).map_err(|e| {
        PythonError::new(
            "strategy_error",
            format!("cannot write {}: {e}", manifest.display()),
        )
    })?;
    let mut cmd = Command::new(&exe);
    cmd.arg("-c")
        .arg(RUNNER)
        .arg(&manifest)
        .current_dir(run_dir);
    let (code, out, err, _) = run_captured(&mut cmd, None).map_err(|e| {
        PythonError::new(
            "python_unavailable",
            format!("cannot start {}: {e}", exe.display()),
        )
    })?;
    // The strategy's own output goes to our stderr (see the module docs).
    if !out.trim().is_empty() {
        eprintln!("[signal_engine.py stdout]\n{}", out.trim_end());
    }
    if !err.trim().is_empty() {
        eprintln!("[signal_engine.py stderr]\n{}", err.trim_end());
    }
    if let Ok(text) = std::fs::read_to_string(&err_path) {
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let kind = match v["code"].as_str() {
            Some("strategy_rejected") => "strategy_rejected",
            Some("bad_signals") => "bad_signals",
            _ => "strategy_error",
        };
        return Err(PythonError::new(
            kind,
            v["error"].as_str().unwrap_or(text.trim()).to_string(),
        ));
    }
    if code != Some(0) {
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no output")
            .trim()
            .to_string();
        return Err(PythonError::new(
            "strategy_error",
            format!("code/signal_engine.py failed (exit {code:?}): {last}"),
        ));
    }
    let text = std::fs::read_to_string(&out_path).map_err(|e| {
        PythonError::new(
            "bad_signals",
            format!("the strategy runner wrote no signals ({e})"),
        )
    })?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| PythonError::new("bad_signals", format!("the signals do not parse: {e}")))?;
    let mut result = Vec::with_capacity(codes.len());
    for (code, &len) in codes.iter().zip(lens) {
        let col = v["signals"][code.as_str()].as_array();
        let mut sig = vec![0.0; len];
        if let Some(col) = col {
            for (slot, x) in sig.iter_mut().zip(col) {
                *slot = x.as_f64().unwrap_or(f64::NAN);
            }
        }
        result.push(sig);
    }
    Ok(result)
}

/// The helper run with `python -c`: static checks (docs §7.2), import,
/// `generate`, validation of the result, JSON out. Exit 3 with
/// `{"code", "error"}` in the error file on any refusal.
pub(crate) const RUNNER: &str = r#"
import ast, json, sys, traceback

FORBIDDEN_MODULES = {"socket", "socketserver", "subprocess", "urllib", "urllib2", "urllib3", "http",
    "requests", "httpx", "aiohttp", "ftplib", "smtplib", "telnetlib", "multiprocessing", "ctypes",
    "importlib", "builtins", "sys", "pkgutil", "runpy", "pickle", "marshal", "shutil", "webbrowser", "gc"}
FORBIDDEN_PATHS = ("src.trading", "src.live", "agent.src.trading", "agent.src.live",
    "trading.connectors", "live.sdk_order_gate")
OS_FORBIDDEN = {"system", "fork", "forkpty", "putenv", "unsetenv", "getenv", "environ", "environb",
    "startfile", "remove", "unlink", "rmdir", "removedirs", "rename", "renames", "replace", "truncate",
    "chmod", "chown", "symlink", "link", "open"}
DUNDER = {"__class__", "__bases__", "__base__", "__mro__", "__subclasses__", "__globals__",
    "__builtins__", "__code__", "__closure__", "__func__", "__self__", "__reduce__", "__reduce_ex__",
    "__getattribute__", "__init_subclass__", "__subclasshook__"}
BUILTINS = {"eval", "exec", "compile", "__import__", "globals", "locals", "vars", "breakpoint"}
PATH_WRITES = {"write_text", "write_bytes", "touch", "unlink", "rmdir", "mkdir", "chmod",
    "symlink_to", "hardlink_to", "link_to"}

manifest = json.load(open(sys.argv[1]))

def fail(code, msg):
    with open(manifest["error"], "w") as f:
        json.dump({"code": code, "error": msg}, f)
    sys.exit(3)

def reject(node, msg):
    line = getattr(node, "lineno", "?")
    fail("strategy_rejected", "code/signal_engine.py line %s: %s (docs §7.2 static checks)" % (line, msg))

def forbidden_module(name):
    if not name:
        return False
    root = name.split(".")[0]
    return root in FORBIDDEN_MODULES or any(name == p or name.startswith(p + ".") for p in FORBIDDEN_PATHS)

def is_literal(n):
    if isinstance(n, ast.Constant):
        return True
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
        return isinstance(n.operand, ast.Constant) and isinstance(n.operand.value, (int, float, complex))
    if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
        return all(is_literal(e) for e in n.elts)
    if isinstance(n, ast.Dict):
        return all(k is not None and is_literal(k) for k in n.keys) and all(is_literal(v) for v in n.values)
    return False

def check_annotation(a):
    if a is None or isinstance(a, (ast.Name, ast.Constant)):
        return
    if isinstance(a, ast.Attribute):
        return check_annotation(a.value)
    if isinstance(a, ast.Subscript):
        check_annotation(a.value); return check_annotation(a.slice)
    if isinstance(a, ast.Tuple):
        for e in a.elts: check_annotation(e)
        return
    if isinstance(a, ast.BinOp) and isinstance(a.op, ast.BitOr):
        check_annotation(a.left); return check_annotation(a.right)
    reject(a, "annotations may only be names, attributes, subscripts or `|` unions")

def check_function(f):
    if f.decorator_list:
        reject(f, "function %s: decorators are not allowed" % f.name)
    args = f.args
    for d in list(args.defaults) + [d for d in args.kw_defaults if d is not None]:
        if not is_literal(d):
            reject(d, "function %s: default values must be literals" % f.name)
    for a in args.posonlyargs + args.args + args.kwonlyargs + [x for x in (args.vararg, args.kwarg) if x]:
        check_annotation(a.annotation)
    check_annotation(f.returns)

def literal_assign(s):
    if isinstance(s, ast.Assign):
        return all(isinstance(t, ast.Name) for t in s.targets) and is_literal(s.value)
    if isinstance(s, ast.AnnAssign):
        return isinstance(s.target, ast.Name) and (s.value is None or is_literal(s.value))
    return False

source = open(manifest["code"], encoding="utf-8").read()
try:
    tree = ast.parse(source, filename="code/signal_engine.py")
except SyntaxError as e:
    fail("strategy_rejected", "code/signal_engine.py line %s: syntax error: %s" % (e.lineno, e.msg))

aliases = {}
functions = {}
engine_cls = None
for s in tree.body:
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
        continue
    if isinstance(s, ast.Import):
        for a in s.names:
            aliases[(a.asname or a.name).split(".")[0]] = a.name
        continue
    if isinstance(s, ast.ImportFrom):
        mod = s.module or ""
        if mod == "signal_engine" or mod.startswith("signal_engine."):
            reject(s, "importing signal_engine from itself is not allowed")
        for a in s.names:
            aliases[a.asname or a.name] = mod + "." + a.name if mod else a.name
        continue
    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
        check_function(s)
        functions[s.name] = s
        continue
    if isinstance(s, ast.ClassDef):
        if s.decorator_list or s.keywords:
            reject(s, "class %s: decorators and keywords are not allowed" % s.name)
        for b in s.bases:
            if not isinstance(b, (ast.Name, ast.Attribute)):
                reject(b, "class %s: base classes must be plain names" % s.name)
        for m in s.body:
            if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                check_function(m)
            elif isinstance(m, ast.Pass) or literal_assign(m):
                pass
            elif isinstance(m, ast.Expr) and isinstance(m.value, ast.Constant) and isinstance(m.value.value, str):
                pass
            else:
                reject(m, "class %s: the body may hold only docstrings, methods, literal assignments and pass" % s.name)
        if s.name == "SignalEngine":
            engine_cls = s
        continue
    if literal_assign(s):
        continue
    reject(s, "the top level may hold only docstrings, imports, function and class definitions and literal constants")

if engine_cls is None:
    fail("strategy_rejected", "code/signal_engine.py must define `class SignalEngine` with a `generate(self, data_map)` method")

def scan(fn, queue):
    for n in ast.walk(fn):
        if isinstance(n, ast.Import):
            for a in n.names:
                if forbidden_module(a.name):
                    reject(n, "importing %s is not allowed" % a.name)
        elif isinstance(n, ast.ImportFrom):
            if forbidden_module(n.module or ""):
                reject(n, "importing from %s is not allowed" % n.module)
        elif isinstance(n, ast.Name):
            target = aliases.get(n.id)
            if target and forbidden_module(target):
                reject(n, "%s (%s) may not be used" % (n.id, target))
            if n.id in BUILTINS:
                reject(n, "%s() is not allowed" % n.id)
        elif isinstance(n, ast.Attribute):
            if n.attr in DUNDER:
                reject(n, "the attribute %s is not allowed" % n.attr)
            if isinstance(n.value, ast.Name) and aliases.get(n.value.id, n.value.id if n.value.id == "os" else None) == "os":
                if n.attr in OS_FORBIDDEN or n.attr.startswith("popen") or n.attr.startswith("spawn") or n.attr.startswith("exec"):
                    reject(n, "os.%s is not allowed" % n.attr)
            if n.attr in PATH_WRITES:
                reject(n, ".%s() writes to the file system and is not allowed" % n.attr)
        elif isinstance(n, ast.Call):
            f = n.func
            name = f.id if isinstance(f, ast.Name) else None
            if name in functions and functions[name] not in queue:
                queue.append(functions[name])
            if name in ("getattr", "setattr", "delattr") and n.args:
                t = n.args[0]
                if isinstance(t, ast.Name) and (t.id == "os" or forbidden_module(aliases.get(t.id, t.id))):
                    reject(n, "%s() on %s is not allowed" % (name, t.id))
            is_open = name == "open" or (isinstance(f, ast.Attribute) and f.attr == "open" and isinstance(f.value, ast.Name) and f.value.id in ("io", "os"))
            if is_open:
                mode = n.args[1] if len(n.args) > 1 else next((k.value for k in n.keywords if k.arg == "mode"), None)
                if mode is not None and not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)):
                    reject(n, "open() needs a literal mode")
                if mode is not None and any(c in mode.value for c in "wax+"):
                    reject(n, "open() may only read (mode %r)" % mode.value)
                path = n.args[0] if n.args else next((k.value for k in n.keywords if k.arg == "file"), None)
                if not (isinstance(path, ast.Constant) and isinstance(path.value, str)):
                    reject(n, "open() needs a literal relative path")
                if path.value.startswith(("/", "~", "\\")) or ".." in path.value.replace("\\", "/").split("/"):
                    reject(n, "open() may only read relative paths inside the run directory")

queue = [m for m in engine_cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
i = 0
while i < len(queue):
    scan(queue[i], queue)
    i += 1

import importlib.util
try:
    import pandas as pd
except Exception as e:
    fail("strategy_error", "pandas cannot be imported: %s" % e)
spec = importlib.util.spec_from_file_location("signal_engine", manifest["code"])
module = importlib.util.module_from_spec(spec)
sys.modules["signal_engine"] = module
try:
    spec.loader.exec_module(module)
    cls = getattr(module, "SignalEngine")
    try:
        engine = cls()
    except TypeError as e:
        fail("strategy_rejected", "SignalEngine must be constructible with no arguments: %s" % e)
    if not callable(getattr(engine, "generate", None)):
        fail("strategy_rejected", "SignalEngine needs a callable generate(self, data_map) method")
    data_map = {}
    for code, path in zip(manifest["codes"], manifest["files"]):
        df = pd.read_csv(path, parse_dates=["timestamp"], index_col="timestamp")
        df.index.name = None
        data_map[code] = df
    out = engine.generate(data_map)
except SystemExit:
    raise
except Exception as e:
    traceback.print_exc()
    fail("strategy_error", "SignalEngine raised %s: %s (traceback on stderr)" % (type(e).__name__, e))

if not isinstance(out, dict):
    fail("bad_signals", "generate() must return a dict {code: pandas.Series of target weights in [-1, 1]}, got %s" % type(out).__name__)
result = {}
for code, s in out.items():
    if code not in data_map:
        continue
    if not isinstance(s, pd.Series):
        fail("bad_signals", "generate()[%r] is a %s; return a pandas.Series of target weights" % (code, type(s).__name__))
    s = pd.to_numeric(s.reindex(data_map[code].index), errors="coerce").astype(float)
    result[code] = [None if v != v else float(v) for v in s.tolist()]
if not result:
    fail("bad_signals", "No valid signals generated: generate() returned no Series for any of %s (keys given: %s)" % (list(data_map), list(out)[:10]))
with open(manifest["out"], "w") as f:
    json.dump({"signals": result}, f)
"#;
