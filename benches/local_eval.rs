//! A small local model answering research questions end to end (issue 25):
//! five prompts through `vibedesk run --json` against a real `llama-server`
//! (or Ollama), each answer scored against the tools' own numbers, which
//! this script gets by calling the same tools in-process with the right
//! arguments.
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
//! `ollama`), `VIBEDESK_EVAL_ONLY=1,3` runs some prompts only. Target: at
//! least 4 of 5 correct with Qwen2.5-Coder-1.5B, each under 3 minutes on 2
//! cores.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use vibedesk::research::data::DataConfig;
use vibedesk::sandbox::RunnerConfig;
use vibedesk::tools::builtin::backtest::{BacktestToolConfig, register_backtest_tools};
use vibedesk::tools::builtin::market::register_market_tools_with;
use vibedesk::tools::{BackgroundQueue, Registry, ToolContext};

const BIN: &str = env!("CARGO_BIN_EXE_vibedesk");
/// Issue 25's budget per prompt.
const PER_PROMPT: Duration = Duration::from_secs(180);

/// One prompt: what is asked, the memory it needs, and how it is scored.
struct Case {
    id: usize,
    prompt: &'static str,
    /// A memory saved before the run (title, body).
    memory: Option<(&'static str, &'static str)>,
}

const CASES: [Case; 5] = [
    Case {
        id: 1,
        prompt: "What was AAPL's RSI(14) on 2008-01-25?",
        memory: None,
    },
    Case {
        id: 2,
        prompt: "Backtest a 20/50-day SMA crossover on MSFT from 2005-01-01 to 2010-12-31. What were the Sharpe ratio and the maximum drawdown?",
        memory: None,
    },
    Case {
        id: 3,
        prompt: "What were the total returns of AAPL and of MSFT over 2008 (from the first to the last trading day of the year)?",
        memory: None,
    },
    Case {
        id: 4,
        prompt: "Backtest a 10/30-day SMA crossover on IBM from 2006-01-01 to 2008-12-31 with my usual trading costs. What was the total return?",
        memory: Some((
            "my trading costs",
            "My usual trading costs for backtests: commission_rate 0.001 (10 bp) and slippage 0.0005 (5 bp).",
        )),
    },
    Case {
        id: 5,
        prompt: "Which of AAPL, MSFT and IBM had the highest 20-day volatility on 2010-12-31? Then backtest a 20/50-day SMA crossover on that one from 2009-01-01 to 2010-12-31 and give its total return.",
        memory: None,
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

fn main() {
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
    let truth_dir = tempfile::tempdir().unwrap();
    let tools = truth_tools();
    let mut correct = 0;
    let mut rows = Vec::new();
    for case in CASES
        .iter()
        .filter(|c| only.is_empty() || only.contains(&c.id))
    {
        let home = tempfile::tempdir().unwrap();
        if let Some((title, body)) = case.memory {
            remember(home.path(), title, body);
        }
        let run = run_prompt(home.path(), &provider, &base_url, &model, case.prompt);
        let (ok, why) = runtime.block_on(score(case.id, &run, &tools, truth_dir.path()));
        let ok = ok && run.seconds <= PER_PROMPT.as_secs_f64();
        correct += usize::from(ok);
        println!(
            "\n#{} {}\n  answer: {}\n  status {} ({}), {} iteration(s), {:.0} s, first request {} prompt tokens, {} text-form call(s)\n  calls: {}\n  unverified: {:?}\n  score: {} — {why}",
            case.id,
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
        rows.push((case.id, ok, run.seconds));
    }
    println!(
        "\nlocal_eval: {correct} of {} correct ({}); target 4 of 5, each under {} s",
        rows.len(),
        rows.iter()
            .map(|(id, ok, s)| format!("#{id} {} {:.0}s", if *ok { "✓" } else { "✗" }, s))
            .collect::<Vec<_>>()
            .join(", "),
        PER_PROMPT.as_secs()
    );
    drop(started);
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
        let child = Command::new(binary)
            .args(["-m"])
            .arg(gguf)
            .args(["--jinja", "-c", &ctx, "--host", "127.0.0.1", "--port"])
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
    register_market_tools_with(&mut r, DataConfig::offline()).unwrap();
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
                ok &= states(a, r, 0.11);
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
        _ => (false, "no such case".into()),
    }
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
