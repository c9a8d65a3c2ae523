//! Compaction and token counting on a 10,000-message transcript (~28 MB):
//! the whole `vibedesk compact` process against the original's Python
//! pipeline (read, the three layers, write), the L1 + L2 + pair-repair pass,
//! chars4 and BPE counts (MB/s on one core), how far chars4 is from the BPE
//! count for English, Chinese and JSON-heavy histories, and how soon
//! `vibedesk run --session` on a 10,000-message session shows its first
//! event.
//!
//! `cargo bench --bench compaction`. Set `VIBEDESK_BENCH_DUMP=/path.jsonl`
//! to also write the transcript (one message per line) for timing other
//! implementations on the same input. When `python3` is on the PATH the
//! same transcript is timed through `benches/baseline/compaction_original.py`
//! (the original's layers as the spec gives them) and the ratios printed;
//! `VIBEDESK_BENCH_NO_PYTHON=1` skips it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use vibedesk::agent::compaction::collapse::{CollapseParams, collapse};
use vibedesk::agent::compaction::microcompact::microcompact;
use vibedesk::agent::compaction::pairs::fix_tool_pairs;
use vibedesk::llm::tokens::{BpeCounter, Encoding, estimate_chars4, python_json_string};
use vibedesk::model::{Message, ToolCall};
use vibedesk::store::StoredMessage;
use vibedesk::store::messages::{MESSAGES_FILE, now_rfc3339};

const EN: &str = "The fund's drawdown deepened after the 2008 crash; we compare AAPL, MSFT and IBM on a 20/50 SMA crossover with 10 bp fees. ";
const ZH: &str = "苹果公司在二零零八年金融危机后回撤加深，我们用二十日与五十日均线交叉策略比较三只股票，手续费万分之十。";

/// A deterministic transcript: user turns, assistant tool calls, JSON tool
/// results of a few kilobytes, and long assistant texts.
fn transcript(n: usize, flavour: &str) -> Vec<Message> {
    let mut msgs = vec![Message::system(EN.repeat(30))];
    let mut i = 0;
    while msgs.len() < n {
        let text = |k: usize| -> String {
            match flavour {
                "zh" => ZH.repeat(k),
                "mixed" if i % 3 == 2 => ZH.repeat(k),
                _ => EN.repeat(k),
            }
        };
        msgs.push(Message::user(text(2 + i % 5)));
        let id = format!("call_{i}");
        msgs.push(Message::assistant_tool_calls(
            text(1),
            vec![ToolCall::new(
                &id,
                "get_market_data",
                format!(
                    r#"{{"symbol": "AAPL", "start": "2005-01-{:02}"}}"#,
                    1 + i % 28
                ),
            )],
            None,
        ));
        let rows: String = (0..(30 + (i * 7) % 80))
            .map(|r| format!(r#"{{"date": "2010-{:02}-{:02}", "open": {:.2}, "close": {:.2}, "volume": {}}},"#, 1 + r % 12, 1 + r % 28, 30.0 + r as f64 * 0.37, 30.5 + r as f64 * 0.41, 1_000_000 + r * 977))
            .collect();
        let result = match flavour {
            "json" => format!(r#"{{"status": "ok", "rows": [{rows}], "source": "embedded"}}"#),
            _ => format!(
                r#"{{"status": "ok", "summary": "{}", "rows": [{rows}]}}"#,
                text(3)
            ),
        };
        msgs.push(Message::tool_result(&id, "get_market_data", result));
        msgs.push(Message::assistant(text(8 + i % 30)));
        i += 1;
    }
    msgs.truncate(n);
    msgs
}

/// One message per line, as Python's `json.dumps` writes it.
fn jsonl(msgs: &[Message]) -> String {
    msgs.iter().map(|m| python_json_string(m) + "\n").collect()
}

/// The Python baseline's median seconds per step on `msgs`, if `python3`
/// runs it.
fn python_baseline(msgs: &[Message]) -> Option<serde_json::Value> {
    if std::env::var_os("VIBEDESK_BENCH_NO_PYTHON").is_some() {
        return None;
    }
    let dir = tempfile::tempdir().ok()?;
    let path = dir.path().join("transcript.jsonl");
    std::fs::write(&path, jsonl(msgs)).ok()?;
    let out = Command::new("python3")
        .arg(BASELINE)
        .arg(&path)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "python baseline failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn bytes_of(msgs: &[Message]) -> usize {
    msgs.iter()
        .map(|m| {
            m.content.len()
                + m.tool_calls
                    .iter()
                    .map(|c| c.function.arguments.len())
                    .sum::<usize>()
        })
        .sum()
}

const BASELINE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/benches/baseline/compaction_original.py"
);

/// The release binary with a clean environment and its home in `home`.
fn vibedesk(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vibedesk"));
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("VIBEDESK_HOME", home);
    c
}

/// Wall seconds of one process, from spawn to exit.
fn wall(mut c: Command) -> f64 {
    let t = Instant::now();
    let out = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let s = t.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    s
}

/// The whole process both ways on the same file: `vibedesk compact` and
/// the Python pipeline, runs interleaved so that load from elsewhere falls
/// on both alike; both outputs must be the same bytes.
fn whole_process(msgs: &[Message], python: bool) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("transcript.jsonl");
    std::fs::write(&input, jsonl(msgs)).unwrap();
    let (ours_out, py_out) = (dir.path().join("ours.jsonl"), dir.path().join("py.jsonl"));
    let ours = || {
        let mut c = vibedesk(dir.path());
        c.arg("compact")
            .arg("--in")
            .arg(&input)
            .args([
                "--layer",
                "micro,collapse,pairs",
                "--estimator",
                "chars4",
                "--out",
            ])
            .arg(&ours_out);
        c
    };
    let theirs = || {
        let mut c = Command::new("python3");
        c.arg(BASELINE).arg("--whole").arg(&input).arg(&py_out);
        c
    };
    let (mut ours_s, mut py_s) = (Vec::new(), Vec::new());
    for _ in 0..11 {
        ours_s.push(wall(ours()));
        if python {
            py_s.push(wall(theirs()));
        }
    }
    let ours_med = median(ours_s);
    println!(
        "whole process, vibedesk compact --layer micro,collapse,pairs --estimator chars4 --out: {:.1} ms (median of 11)",
        ours_med * 1e3
    );
    if !python {
        return;
    }
    let py_med = median(py_s);
    let same = std::fs::read(&ours_out).unwrap() == std::fs::read(&py_out).unwrap();
    assert!(
        same,
        "vibedesk and the Python pipeline wrote different files"
    );
    // The Python pipeline alone, without the interpreter's start.
    let out = theirs().output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    println!(
        "whole process, python3 compaction_original.py --whole (json.loads, 3 layers, json.dumps): {:.1} ms (median of 11; {:.1} ms of it after the interpreter started)",
        py_med * 1e3,
        v["in_script"].as_f64().unwrap() * 1e3
    );
    println!(
        "  ratio {:.1}x (outputs identical, {} bytes)",
        py_med / ours_med,
        std::fs::metadata(&ours_out).unwrap().len()
    );
}

/// `vibedesk run --session ID --json -p hi` on a session holding `msgs`
/// (offline provider, no key): seconds from spawn to the first JSON event
/// line, median of 7 runs (each adds its own turn to the session).
fn session_startup(msgs: &[Message]) {
    let home = tempfile::tempdir().unwrap();
    let sdir = home.path().join("data/sessions/bench10k");
    std::fs::create_dir_all(&sdir).unwrap();
    let ts = now_rfc3339();
    let log: String = msgs
        .iter()
        .map(|m| {
            let s = StoredMessage {
                message: m.clone(),
                ts: ts.clone(),
                run_id: None,
                status: None,
            };
            serde_json::to_string(&s).unwrap() + "\n"
        })
        .collect();
    std::fs::write(sdir.join(MESSAGES_FILE), &log).unwrap();
    let mut firsts = Vec::new();
    let mut totals = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        let mut child = vibedesk(home.path())
            .args(["run", "--session", "bench10k", "--json", "-p", "hi"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        firsts.push(t.elapsed().as_secs_f64());
        let event: serde_json::Value = serde_json::from_str(&first).unwrap();
        assert!(event["type"].is_string(), "{first}");
        stdout.read_to_string(&mut String::new()).unwrap();
        assert!(child.wait().unwrap().success());
        totals.push(t.elapsed().as_secs_f64());
    }
    println!(
        "vibedesk run --session (10,000 messages, {:.1} MB log) --json -p hi: first event after {:.1} ms, whole turn {:.1} ms (medians of 7)",
        log.len() as f64 / 1e6,
        median(firsts) * 1e3,
        median(totals) * 1e3
    );
}

fn main() {
    let msgs = transcript(10_000, "mixed");
    let dump = python_json_string(&msgs);
    println!(
        "transcript: {} messages, {:.1} MB as JSON",
        msgs.len(),
        dump.len() as f64 / 1e6
    );
    if let Ok(path) = std::env::var("VIBEDESK_BENCH_DUMP") {
        std::fs::write(&path, jsonl(&msgs)).unwrap();
        println!("wrote {path}");
    }

    let python = std::env::var_os("VIBEDESK_BENCH_NO_PYTHON").is_none()
        && Command::new("python3")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    whole_process(&msgs, python);
    session_startup(&msgs);

    let pass = median(
        (0..7)
            .map(|_| {
                let mut m = msgs.clone();
                let t = Instant::now();
                let a = microcompact(&mut m, 3);
                let b = collapse(&mut m, CollapseParams::default());
                let r = fix_tool_pairs(&mut m);
                let s = t.elapsed().as_secs_f64();
                // The originals go to the archive, not to the allocator:
                // freeing them is outside the clock, as in the baseline
                // (whose copies share their strings with the input).
                assert!(!a.is_empty() && !b.is_empty() && r.removed == 0);
                s
            })
            .collect(),
    );
    println!(
        "L1 + L2 + pair repair over 10,000 messages: {:.2} ms (originals kept for the archive)",
        pass * 1e3
    );
    // Each layer alone (median of 7), originals dropped outside the clock.
    let mut layers = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..7 {
        let mut m = msgs.clone();
        let t = Instant::now();
        let a = microcompact(&mut m, 3);
        layers[0].push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let b = collapse(&mut m, CollapseParams::default());
        layers[1].push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let r = fix_tool_pairs(&mut m);
        layers[2].push(t.elapsed().as_secs_f64());
        assert!(!a.is_empty() && !b.is_empty() && r.removed == 0);
    }
    let [l1, l2, pairs] = layers.map(median);
    println!(
        "  of which L1 {:.2} ms, L2 {:.2} ms, pair repair {:.2} ms (without freeing the originals)",
        l1 * 1e3,
        l2 * 1e3,
        pairs * 1e3
    );

    let chars4 = median(
        (0..7)
            .map(|_| {
                let t = Instant::now();
                let n = estimate_chars4(&msgs);
                assert!(n > 0);
                t.elapsed().as_secs_f64()
            })
            .collect(),
    );
    println!(
        "chars4 count: {:.1} ms, {:.0} MB/s of JSON",
        chars4 * 1e3,
        dump.len() as f64 / chars4 / 1e6
    );
    println!(
        "pass + chars4 count: {:.1} ms (compare with the original's three layers plus estimate_tokens)",
        (pass + chars4) * 1e3
    );

    if let Some(py) = python_baseline(&msgs) {
        let secs = |k: &str| py[k].as_f64().unwrap();
        // Same layers, same result: the estimate after both passes agrees.
        let mut ours = msgs.clone();
        microcompact(&mut ours, 3);
        collapse(&mut ours, CollapseParams::default());
        fix_tool_pairs(&mut ours);
        assert_eq!(py["tokens_after"].as_u64(), Some(estimate_chars4(&ours)));
        assert_eq!(py["tokens_before"].as_u64(), Some(estimate_chars4(&msgs)));
        println!(
            "python baseline (same input, same result): pass {:.1} ms (L1 {:.1}, L2 {:.1}, pairs {:.1}), estimate_tokens {:.1} ms",
            secs("pass") * 1e3,
            secs("l1") * 1e3,
            secs("l2") * 1e3,
            secs("pairs") * 1e3,
            secs("estimate") * 1e3
        );
        println!(
            "  ratios: pass {:.1}x, count {:.1}x, pass + count {:.1}x",
            secs("pass") / pass,
            secs("estimate") / chars4,
            (secs("pass") + secs("estimate")) / (pass + chars4)
        );
    }

    let bpe = BpeCounter::shared(Encoding::O200k).unwrap();
    let content_mb = bytes_of(&msgs) as f64 / 1e6;
    let t = Instant::now();
    let cold_tokens = bpe.count_messages(&msgs);
    let cold = t.elapsed().as_secs_f64();
    let warm = median(
        (0..5)
            .map(|_| {
                let t = Instant::now();
                assert_eq!(bpe.count_messages(&msgs), cold_tokens);
                t.elapsed().as_secs_f64()
            })
            .collect(),
    );
    println!(
        "o200k count of {content_mb:.1} MB of text: first pass {:.0} ms ({:.0} MB/s), with the piece cache warm {:.0} ms ({:.0} MB/s)",
        cold * 1e3,
        content_mb / cold,
        warm * 1e3,
        content_mb / warm
    );
    let sample: String = msgs.iter().take(300).map(|m| m.content.as_str()).collect();
    let t = Instant::now();
    let reference = bpe.count_text(&sample);
    let ours = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let direct = tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(&sample)
        .len() as u64;
    let theirs = t.elapsed().as_secs_f64();
    assert_eq!(reference, direct);
    println!(
        "same text through tiktoken-rs directly: {:.1} ms vs ours {:.1} ms",
        theirs * 1e3,
        ours * 1e3
    );

    println!("chars4 against o200k (the real count):");
    for flavour in ["mixed", "en", "zh", "json"] {
        let m = transcript(2_000, flavour);
        let c4 = estimate_chars4(&m) as f64;
        let real = bpe.count_messages(&m) as f64;
        println!(
            "  {flavour:<5} chars4 {c4:>9.0}  o200k {real:>9.0}  chars4/real = {:.2}",
            c4 / real
        );
    }
}
