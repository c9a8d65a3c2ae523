//! A small local model answering research questions end to end (issues 25
//! and 40): twelve prompts across the desk through `vibedesk run --json`
//! against a real `llama-server` (or Ollama), each answer scored against
//! the tools' own numbers, which this script gets by calling the same
//! tools in-process with the right arguments. The whole set runs twice.
//!
//! Opt-in: it needs a server and skips without one.
//!
//! ```sh
//! # a running server:
//! VIBEDESK_LLAMA_SERVER=http://127.0.0.1:8080 VIBEDESK_LLAMA_MODEL=qwen2.5-coder-1.5b \
//!   cargo bench --bench local_eval
//! # or let it start llama-server (binary and GGUF file):
//! VIBEDESK_LLAMA_SERVER=/path/to/llama-server VIBEDESK_LLAMA_MODEL=/path/to/model.gguf \
//!   cargo bench --bench local_eval
//! ```
//!
//! `VIBEDESK_EVAL_PROVIDER` picks the preset (`llamacpp` by default,
//! `ollama`), `VIBEDESK_EVAL_ONLY=1,3` runs some prompts only,
//! `VIBEDESK_EVAL_RUNS` the number of runs (2), `VIBEDESK_EVAL_KEEP=1`
//! keeps each wrong run's home and prints where, `VIBEDESK_LLAMA_THREADS`
//! the server's threads when this script starts it (1). Target (issue 40):
//! at least 11 of 12 correct in each run with Qwen2.5-Coder-1.5B Q4_K_M,
//! each under 2 minutes on 2 cores, no `success` with an invented key
//! figure, and a first request of at most 2,500 tokens by the server's
//! count.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use vibedesk::research::data::DataConfig;
use vibedesk::sandbox::RunnerConfig;
use vibedesk::tools::builtin::backtest::{BacktestToolConfig, register_backtest_tools};
use vibedesk::tools::builtin::{Family, ToolEnv, register_family};
use vibedesk::tools::{BackgroundQueue, Registry, ToolContext};

const BIN: &str = env!("CARGO_BIN_EXE_vibedesk");
/// Issue 40's budget per prompt.
const PER_PROMPT: Duration = Duration::from_secs(120);
/// The issue's bound on the first request, by the server's count.
const FIRST_REQUEST_TOKENS: u64 = 2_500;

/// One prompt: what is asked, the memory it needs, and how it is scored.
struct Case {
    id: usize,
    /// What part of the desk it reaches.
    kind: &'static str,
    prompt: &'static str,
    /// A memory saved before the run (title, body).
    memory: Option<(&'static str, &'static str)>,
}

const CASES: [Case; 12] = [
    Case {
        id: 1,
        kind: "indicator on a date",
        prompt: "What was AAPL's RSI(14) on 2008-01-25?",
        memory: None,
    },
    Case {
        id: 2,
        kind: "backtest",
        prompt: "Backtest a 20/50-day SMA crossover on MSFT from 2005-01-01 to 2010-12-31. What were the Sharpe ratio and the maximum drawdown?",
        memory: None,
    },
    Case {
        id: 3,
        kind: "period returns",
        prompt: "What were the total returns of AAPL and of MSFT over 2008 (from the first to the last trading day of the year)?",
        memory: None,
    },
    Case {
        id: 4,
        kind: "remembered costs",
        prompt: "Backtest a 10/30-day SMA crossover on IBM from 2006-01-01 to 2008-12-31 with my usual trading costs. What was the total return?",
        memory: Some((
            "my trading costs",
            "My usual trading costs for backtests: commission_rate 0.001 (10 bp) and slippage 0.0005 (5 bp).",
        )),
    },
    Case {
        id: 5,
        kind: "multi-step",
        prompt: "Which of AAPL, MSFT and IBM had the highest 20-day volatility on 2010-12-31? Then backtest a 20/50-day SMA crossover on that one from 2009-01-01 to 2010-12-31 and give its total return.",
        memory: None,
    },
    Case {
        id: 6,
        kind: "period drawdown",
        prompt: "What was SPY's maximum drawdown during 2008?",
        memory: None,
    },
    Case {
        id: 7,
        kind: "period volatility",
        prompt: "What was the annualized volatility of QQQ's daily returns in 2009?",
        memory: None,
    },
    Case {
        id: 8,
        kind: "option price",
        prompt: "What is the Black-Scholes price of a European call option with spot 100, strike 105, 6 months to expiry, 20% volatility and a 3% risk-free rate, no dividends?",
        memory: None,
    },
    Case {
        id: 9,
        kind: "portfolio",
        prompt: "What are the minimum-variance portfolio weights of AAPL, MSFT and IBM, estimated from daily returns between 2010-01-01 and 2011-12-31?",
        memory: None,
    },
    Case {
        id: 10,
        kind: "cointegration",
        prompt: "Run an Engle-Granger cointegration test on KO and PEP prices from 2010-01-01 to 2014-12-31. What is the p-value?",
        memory: None,
    },
    Case {
        id: 11,
        kind: "comparison",
        prompt: "Which of XLK, XLF and XLE had the highest total return in 2009, and what was it?",
        memory: None,
    },
    Case {
        id: 12,
        kind: "remembered preference",
        prompt: "Using my preferred RSI period, what was MSFT's RSI on 2009-03-09?",
        memory: Some((
            "my RSI period",
            "My preferred RSI period is 9 days (RSI(9)), not 14.",
        )),
    },
];

/// What one run produced, read from its `--json` events.
#[derive(Default)]
struct Run {
    answer: String,
    status: String,
    reason: String,
    iterations: u64,
    calls: Vec<(String, Value, String)>,
    first_prompt_tokens: Option<u64>,
    unverified: Vec<String>,
    text_calls: usize,
    seconds: f64,
}

/// One prompt's result in one run.
struct Row {
    id: usize,
    ok: bool,
    seconds: f64,
    first_tokens: Option<u64>,
    status: String,
    /// `success` although the answer's key figure is wrong.
    false_success: bool,
}

/// The scorer's own check, before any model is asked: the measured
/// mis-paired answer fails, the same figures paired right pass.
fn check_scorer() {
    let all = ["AAPL", "MSFT", "IBM"];
    let swapped = "The weights of AAPL, MSFT and IBM between 2010-01-01 and 2011-12-31 are 0.1268, 0.5999 and 0.2732, respectively.";
    assert!(states_for(swapped, "AAPL", &all, 12.68, 0.6));
    assert!(!states_for(swapped, "MSFT", &all, 27.32, 0.6));
    let right = "AAPL 12.7%, MSFT 27.3% and IBM 60.0%.";
    assert!(
        all.iter()
            .zip([12.68, 27.32, 59.99])
            .all(|(s, w)| states_for(right, s, &all, w, 0.6))
    );
    assert!(!states_for(right, "IBM", &all, 27.32, 0.6));
    // Measured on prompt 3 (b7752c9, run 2): the returns in the table's
    // order (highest first), read in the question's.
    let two = ["AAPL", "MSFT"];
    let swapped = "The total returns of AAPL and MSFT over 2008 were -0.4480446927374302 and -0.5619013266001363, respectively.";
    assert!(!states_for(swapped, "AAPL", &two, -56.19, 0.11));
}

fn main() {
    check_scorer();
    let (Ok(server), Ok(model)) = (
        std::env::var("VIBEDESK_LLAMA_SERVER"),
        std::env::var("VIBEDESK_LLAMA_MODEL"),
    ) else {
        println!(
            "local_eval: skipped (set VIBEDESK_LLAMA_SERVER and VIBEDESK_LLAMA_MODEL; see the module docs)"
        );
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut started = None;
    let (base_url, model) = if server.starts_with("http") {
        (format!("{}/v1", server.trim_end_matches('/')), model)
    } else {
        let s = LlamaServer::start(Path::new(&server), Path::new(&model));
        let url = s.base_url();
        started = Some(s);
        (url, "local".to_string())
    };
    let provider = std::env::var("VIBEDESK_EVAL_PROVIDER").unwrap_or_else(|_| "llamacpp".into());
    let only: Vec<usize> = std::env::var("VIBEDESK_EVAL_ONLY")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_default();
    let runs: usize = std::env::var("VIBEDESK_EVAL_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let truth_dir = tempfile::tempdir().unwrap();
    let tools = truth_tools();
    let mut summaries = Vec::new();
    for n in 1..=runs {
        println!("\n=== run {n} of {runs} ===");
        let mut rows = Vec::new();
        for case in CASES
            .iter()
            .filter(|c| only.is_empty() || only.contains(&c.id))
        {
            let row = eval_case(
                case,
                &runtime,
                &tools,
                truth_dir.path(),
                (&provider, &base_url, &model),
            );
            rows.push(row);
        }
        summaries.push(summary(n, &rows));
    }
    for s in &summaries {
        println!("{s}");
    }
    drop(started);
}

/// Runs one case and prints it.
fn eval_case(
    case: &Case,
    runtime: &tokio::runtime::Runtime,
    tools: &Registry,
    truth_dir: &Path,
    (provider, base_url, model): (&str, &str, &str),
) -> Row {
    let home = tempfile::tempdir().unwrap();
    if let Some((title, body)) = case.memory {
        remember(home.path(), title, body);
    }
    let run = run_prompt(home.path(), provider, base_url, model, case.prompt);
    let (right, why) = runtime.block_on(score(case.id, &run, tools, truth_dir));
    let ok = right && run.seconds <= PER_PROMPT.as_secs_f64();
    println!(
        "\n#{} [{}] {}\n  answer: {}\n  status {} ({}), {} iteration(s), {:.0} s, first request {} prompt tokens, {} text-form call(s)\n  calls: {}\n  unverified: {:?}\n  score: {} — {why}",
        case.id,
        case.kind,
        case.prompt,
        one_line(&run.answer, 400),
        run.status,
        one_line(&run.reason, 160),
        run.iterations,
        run.seconds,
        run.first_prompt_tokens
            .map_or("?".into(), |t| t.to_string()),
        run.text_calls,
        run.calls
            .iter()
            .map(|(t, a, s)| format!("{t} {s} {}", one_line(&a.to_string(), 160)))
            .collect::<Vec<_>>()
            .join(" | "),
        run.unverified,
        if ok { "CORRECT" } else { "wrong" },
    );
    let row = Row {
        id: case.id,
        ok,
        seconds: run.seconds,
        first_tokens: run.first_prompt_tokens,
        false_success: !right && run.status == "success",
        status: run.status,
    };
    // VIBEDESK_EVAL_KEEP=1 keeps a wrong run's home (its trace and
    // messages) to read what the model wrote.
    if !ok && std::env::var_os("VIBEDESK_EVAL_KEEP").is_some() {
        println!("  kept: {}", home.keep().display());
    }
    row
}

/// One run's line: score, median and worst wall time, the largest first
/// request, and any `success` on a wrong answer.
fn summary(n: usize, rows: &[Row]) -> String {
    let correct = rows.iter().filter(|r| r.ok).count();
    let mut secs: Vec<f64> = rows.iter().map(|r| r.seconds).collect();
    secs.sort_by(f64::total_cmp);
    let median = if secs.is_empty() {
        0.0
    } else if secs.len() % 2 == 1 {
        secs[secs.len() / 2]
    } else {
        (secs[secs.len() / 2 - 1] + secs[secs.len() / 2]) / 2.0
    };
    let worst = secs.last().copied().unwrap_or(0.0);
    let first = rows.iter().filter_map(|r| r.first_tokens).max();
    let false_success: Vec<String> = rows
        .iter()
        .filter(|r| r.false_success)
        .map(|r| format!("#{}", r.id))
        .collect();
    format!(
        "local_eval run {n}: {correct} of {} correct ({}); median {median:.0} s, worst {worst:.0} s (budget {} s); largest first request {} tokens (bound {FIRST_REQUEST_TOKENS}); success on a wrong answer: {}",
        rows.len(),
        rows.iter()
            .map(|r| format!(
                "#{} {} {:.0}s {}",
                r.id,
                if r.ok { "✓" } else { "✗" },
                r.seconds,
                r.status
            ))
            .collect::<Vec<_>>()
            .join(", "),
        PER_PROMPT.as_secs(),
        first.map_or("?".into(), |t| t.to_string()),
        if false_success.is_empty() {
            "none".to_string()
        } else {
            false_success.join(" ")
        }
    )
}

/// A `llama-server` started for the evaluation, stopped on drop.
struct LlamaServer {
    child: Child,
    port: u16,
}

impl LlamaServer {
    fn start(binary: &Path, gguf: &Path) -> LlamaServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let ctx = std::env::var("VIBEDESK_LLAMA_CTX").unwrap_or_else(|_| "8192".into());
        let threads = std::env::var("VIBEDESK_LLAMA_THREADS").unwrap_or_else(|_| "2".into());
        let child = Command::new(binary)
            .args(["-m"])
            .arg(gguf)
            .args(["--jinja", "-c", &ctx, "-t", &threads])
            .args(["--host", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let s = LlamaServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(300);
        while Instant::now() < deadline {
            if health(port) {
                return s;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!("llama-server did not become healthy on port {port} within 300 s");
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET /health` answers 200 once the model is loaded.
fn health(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let req =
        format!("GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.starts_with("HTTP/1.1 200")
}

fn remember(home: &Path, title: &str, body: &str) {
    let out = Command::new(BIN)
        .args([
            "memory",
            "add",
            "--title",
            title,
            "--type",
            "user",
            "--content",
            body,
        ])
        .env("VIBEDESK_HOME", home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn run_prompt(home: &Path, provider: &str, base_url: &str, model: &str, prompt: &str) -> Run {
    let started = Instant::now();
    let out = Command::new(BIN)
        .args([
            "run",
            "--json",
            "--provider",
            provider,
            "--base-url",
            base_url,
        ])
        .args(["--model", model, "-p", prompt])
        .env("VIBEDESK_HOME", home)
        .env("VIBEDESK_LLM_TIMEOUT_SECONDS", "170")
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let mut run = Run {
        seconds: started.elapsed().as_secs_f64(),
        ..Run::default()
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(e) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match e["type"].as_str().unwrap_or("") {
            "answer" => run.answer = e["content"].as_str().unwrap_or("").to_string(),
            "run_finished" => {
                run.status = e["status"].as_str().unwrap_or("").to_string();
                run.reason = e["reason"].as_str().unwrap_or("").to_string();
                run.iterations = e["iterations"].as_u64().unwrap_or(0);
                run.unverified =
                    serde_json::from_value(e["unverified_numbers"].clone()).unwrap_or_default();
            }
            "tool_call_started" => run.calls.push((
                e["tool"].as_str().unwrap_or("").to_string(),
                e["args"].clone(),
                String::new(),
            )),
            "tool_call_finished" => {
                if let Some(c) = run.calls.iter_mut().rev().find(|c| c.2.is_empty()) {
                    c.2 = e["status"].as_str().unwrap_or("").to_string();
                }
            }
            "llm_usage" if run.first_prompt_tokens.is_none() => {
                run.first_prompt_tokens = e["input_tokens"].as_u64();
            }
            _ => {}
        }
    }
    let trace = home.join("data");
    run.text_calls = count_text_calls(&trace);
    run
}

/// `text_tool_call` records in every session's trace under `dir`.
fn count_text_calls(dir: &Path) -> usize {
    let mut n = 0;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            n += count_text_calls(&p);
        } else if p.file_name().is_some_and(|f| f == "trace.jsonl") {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            n += text.matches("\"type\":\"text_tool_call\"").count();
        }
    }
    n
}

/// The tools as the agent has them: the embedded market and the engine.
fn truth_tools() -> Registry {
    let mut r = Registry::new();
    let env = ToolEnv::new(DataConfig::offline());
    for family in [Family::Market, Family::Quant, Family::Stats] {
        register_family(&mut r, family, &env).unwrap();
    }
    let cfg = BacktestToolConfig {
        engine_program: PathBuf::from(BIN),
        runner: RunnerConfig::default(),
        offline: true,
        ..BacktestToolConfig::new(None)
    };
    register_backtest_tools(&mut r, cfg).unwrap();
    r
}

async fn call(tools: &Registry, dir: &Path, tool: &str, args: Value) -> Value {
    let n = std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
    let run_dir = dir.join(format!("run{n}"));
    std::fs::create_dir_all(&run_dir).unwrap();
    let ctx = ToolContext {
        call_id: "truth".into(),
        session_id: "eval".into(),
        run_dir: run_dir.clone(),
        workspace: run_dir,
        cancel: CancellationToken::new(),
        background: BackgroundQueue::default(),
    };
    let text = tools.get(tool).unwrap().call(args, &ctx).await.unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Every number in the answer, as written (commas dropped).
fn numbers(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() || (c == '.' && !cur.is_empty()) || (c == '-' && cur.is_empty()) {
            cur.push(c);
        } else if c == ',' && !cur.is_empty() {
            // A thousands separator: keep reading the number.
        } else {
            let t = cur.trim_end_matches('.');
            if let Ok(x) = t.parse::<f64>() {
                out.push(x);
            }
            cur.clear();
        }
    }
    out
}

/// Whether the answer states `truth` within `tol` (in the truth's unit),
/// sign aside (a drawdown of 23.4 %), or as a fraction of a percent truth.
fn states(answer: &str, truth: f64, tol: f64) -> bool {
    numbers(answer).iter().any(|x| {
        (x.abs() - truth.abs()).abs() <= tol || (x.abs() * 100.0 - truth.abs()).abs() <= tol
    })
}

/// Whether the answer gives `symbol` the figure `truth` (as [`states`]):
/// a list "A, B and C … x, y and z, respectively" pairs in order (the last
/// numbers before "respectively"); otherwise the figure must come after a
/// mention of the symbol and before the next symbol's. Measured, the 1.5B
/// model listed the weights in the question's order with the values in
/// the tool's alphabetical order, which every number merely appearing
/// somewhere would have passed.
fn states_for(answer: &str, symbol: &str, all: &[&str], truth: f64, tol: f64) -> bool {
    let near = |x: f64| {
        (x.abs() - truth.abs()).abs() <= tol || (x.abs() * 100.0 - truth.abs()).abs() <= tol
    };
    if let Some(at) = answer.find("respectively") {
        let mut order: Vec<(usize, &str)> = all
            .iter()
            .filter_map(|s| Some((answer.find(s)?, *s)))
            .collect();
        order.sort();
        let xs = numbers(&answer[..at]);
        let Some(first) = xs.len().checked_sub(order.len()) else {
            return false;
        };
        return order
            .iter()
            .position(|(_, s)| *s == symbol)
            .is_some_and(|i| near(xs[first + i]));
    }
    let mentions: Vec<(usize, &str)> = {
        let mut m: Vec<(usize, &str)> = all
            .iter()
            .flat_map(|s| answer.match_indices(s).map(|(i, _)| (i, *s)))
            .collect();
        m.sort();
        m
    };
    mentions.iter().enumerate().any(|(k, (i, s))| {
        let end = mentions.get(k + 1).map_or(answer.len(), |(j, _)| *j);
        *s == symbol && numbers(&answer[i + s.len()..end]).into_iter().any(near)
    })
}

/// The run's last successful backtest call, if it was on `symbol` with
/// the SMA windows asked.
fn backtest_call<'a>(run: &'a Run, symbol: &str, fast: u64, slow: u64) -> Option<&'a Value> {
    run.calls
        .iter()
        .rev()
        .find(|(t, _, s)| t == "backtest" && s == "ok")
        .map(|(_, a, _)| a)
        .filter(|a| {
            let p = if a["params"].is_object() {
                &a["params"]
            } else {
                &a["config"]["strategy"]["params"]
            };
            a.to_string().contains(symbol)
                && p["fast"].as_u64() == Some(fast)
                && p["slow"].as_u64() == Some(slow)
        })
}

async fn score(id: usize, run: &Run, tools: &Registry, dir: &Path) -> (bool, String) {
    let a = &run.answer;
    match id {
        1 => {
            let out = call(tools, dir, "technical_indicator", json!({"symbol": "AAPL", "indicator": "rsi", "params": {"period": 14}, "start": "2008-01-25", "end": "2008-01-25"})).await;
            let rsi = out["latest"]["rsi"].as_f64().unwrap();
            (states(a, rsi, 0.06), format!("RSI(14) = {rsi:.2}"))
        }
        2 => {
            let m = sma(tools, dir, "MSFT", 20, 50, "2005-01-01", "2010-12-31", None).await;
            let (sharpe, dd) = (
                m["sharpe"].as_f64().unwrap(),
                m["max_drawdown"].as_f64().unwrap(),
            );
            let ok = states(a, sharpe, 0.011) && states(a, dd * 100.0, 0.11);
            (
                ok,
                format!("Sharpe {sharpe:.2}, max drawdown {:.1}%", dd * 100.0),
            )
        }
        3 => {
            let mut ok = true;
            let mut why = Vec::new();
            for s in ["AAPL", "MSFT"] {
                let out = call(
                    tools,
                    dir,
                    "get_market_data",
                    json!({"symbol": s, "start": "2008-01-01", "end": "2008-12-31", "limit": 1}),
                )
                .await;
                let r = out["summary"]["total_return_pct"].as_f64().unwrap();
                ok &= states_for(a, s, &["AAPL", "MSFT"], r, 0.11);
                why.push(format!("{s} {r:.1}%"));
            }
            (ok, why.join(", "))
        }
        4 => {
            let costs = json!({"commission_rate": 0.001, "slippage": 0.0005});
            let m = sma(
                tools,
                dir,
                "IBM",
                10,
                30,
                "2006-01-01",
                "2008-12-31",
                Some(costs),
            )
            .await;
            let r = m["total_return"].as_f64().unwrap() * 100.0;
            let used = backtest_call(run, "IBM", 10, 30).is_some_and(|c| {
                let s = c.to_string();
                s.contains("0.001") && s.contains("0.0005")
            });
            (
                used && states(a, r, 0.06),
                format!("total return {r:.2}% with 10 bp + 5 bp (costs used: {used})"),
            )
        }
        5 => {
            let mut best = ("", f64::MIN);
            for s in ["AAPL", "MSFT", "IBM"] {
                let out = call(tools, dir, "technical_indicator", json!({"symbol": s, "indicator": "volatility", "params": {"window": 20}, "start": "2010-12-31", "end": "2010-12-31"})).await;
                let v = out["latest"]["volatility"].as_f64().unwrap_or(f64::MIN);
                if v > best.1 {
                    best = (s, v);
                }
            }
            let m = sma(tools, dir, best.0, 20, 50, "2009-01-01", "2010-12-31", None).await;
            let r = m["total_return"].as_f64().unwrap() * 100.0;
            let on_it = backtest_call(run, best.0, 20, 50).is_some();
            let ok = a.contains(best.0) && on_it && states(a, r, 0.06);
            (
                ok,
                format!(
                    "{} most volatile; its SMA 20/50 total return {r:.2}% (backtested it: {on_it})",
                    best.0
                ),
            )
        }
        6..=12 => score_desk(id, run, tools, dir).await,
        _ => (false, "no such case".into()),
    }
}

/// Cases 6 to 12: the rest of the desk.
async fn score_desk(id: usize, run: &Run, tools: &Registry, dir: &Path) -> (bool, String) {
    let a = &run.answer;
    match id {
        6 => {
            let out = call(tools, dir, "technical_indicator", json!({"symbol": "SPY", "indicator": "drawdown", "start": "2008-01-01", "end": "2008-12-31"})).await;
            let dd = out["period"]["max_drawdown_window"]["depth"]
                .as_f64()
                .unwrap()
                * 100.0;
            (
                states(a, dd, 0.11),
                format!("within-2008 drawdown {dd:.2}%"),
            )
        }
        7 => {
            let out = call(tools, dir, "technical_indicator", json!({"symbol": "QQQ", "indicator": "returns", "start": "2009-01-01", "end": "2009-12-31"})).await;
            let vol = out["period"]["annualized_volatility"].as_f64().unwrap() * 100.0;
            (
                states(a, vol, 0.25),
                format!("annualised volatility of 2009 {vol:.2}%"),
            )
        }
        8 => {
            let out = call(tools, dir, "option_price", json!({"kind": "call", "spot": 100, "strike": 105, "expiry_years": 0.5, "volatility": 0.2, "rate": 0.03})).await;
            let p = out["price"].as_f64().unwrap();
            (states(a, p, 0.006), format!("call price {p:.4}"))
        }
        9 => {
            let out = call(tools, dir, "portfolio_optimize", json!({"symbols": ["AAPL", "MSFT", "IBM"], "start": "2010-01-01", "end": "2011-12-31", "method": "min_variance"})).await;
            let mut ok = true;
            let mut why = Vec::new();
            let symbols = ["AAPL", "MSFT", "IBM"];
            for s in symbols {
                let w = weight_of(&out, s) * 100.0;
                ok &= w.abs() < 0.05 || states_for(a, s, &symbols, w, 0.6);
                why.push(format!("{s} {w:.1}%"));
            }
            (ok, format!("min-variance weights {}", why.join(", ")))
        }
        10 => {
            let out = call(tools, dir, "stat_test", json!({"test": "engle_granger", "symbols": ["KO", "PEP"], "start": "2010-01-01", "end": "2014-12-31"})).await;
            let p = out["p_value"].as_f64().unwrap();
            // Two significant digits of the p-value.
            let tol = (p.abs() * 0.05).max(0.0006);
            (states(a, p, tol), format!("Engle–Granger p-value {p:.4}"))
        }
        11 => {
            let mut best = ("", f64::MIN);
            for s in ["XLK", "XLF", "XLE"] {
                let out = call(
                    tools,
                    dir,
                    "get_market_data",
                    json!({"symbol": s, "start": "2009-01-01", "end": "2009-12-31", "limit": 1}),
                )
                .await;
                let r = out["summary"]["total_return_pct"].as_f64().unwrap();
                if r > best.1 {
                    best = (s, r);
                }
            }
            (
                a.contains(best.0) && states(a, best.1, 0.11),
                format!("{} highest, {:.2}%", best.0, best.1),
            )
        }
        12 => {
            let out = call(tools, dir, "technical_indicator", json!({"symbol": "MSFT", "indicator": "rsi", "params": {"period": 9}, "start": "2009-03-09", "end": "2009-03-09"})).await;
            let rsi = out["latest"]["rsi"].as_f64().unwrap();
            (states(a, rsi, 0.06), format!("RSI(9) = {rsi:.2}"))
        }
        _ => (false, "no such case".into()),
    }
}

/// A symbol's weight in `portfolio_optimize`'s answer (a map, or rows).
fn weight_of(out: &Value, symbol: &str) -> f64 {
    let w = &out["weights"];
    if let Some(x) = w[symbol].as_f64() {
        return x;
    }
    w.as_array()
        .and_then(|rows| {
            rows.iter()
                .find(|r| r["symbol"] == symbol || r["asset"] == symbol)
                .and_then(|r| r["weight"].as_f64())
        })
        .unwrap_or_else(|| panic!("no weight for {symbol} in {out}"))
}

#[allow(clippy::too_many_arguments)]
async fn sma(
    tools: &Registry,
    dir: &Path,
    symbol: &str,
    fast: u32,
    slow: u32,
    start: &str,
    end: &str,
    costs: Option<Value>,
) -> Value {
    let mut args = json!({"strategy": "sma_crossover", "params": {"fast": fast, "slow": slow},
        "symbols": [symbol], "start": start, "end": end});
    if let Some(Value::Object(c)) = costs {
        for (k, v) in c {
            args[k] = v;
        }
    }
    let out = call(tools, dir, "backtest", args).await;
    assert_eq!(out["status"], "ok", "{out}");
    out["metrics"].clone()
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    flat.chars().take(max).collect()
}
