//! `vibedesk compact`: applies compaction layers to a message list on disk,
//! unconditionally and in the order given, to inspect them or to compare
//! with the original. Messages are kept as read (key order, unknown fields),
//! and written back the way Python's `json.dumps` writes them.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::{CliError, build_provider, load_config};
use crate::agent::compaction::archive::TranscriptArchive;
use crate::agent::compaction::auto::{AutoParams, auto_compact};
use crate::agent::compaction::chunks::summary_chunks;
use crate::agent::compaction::collapse::collapse;
use crate::agent::compaction::inplace::{LineMessage, MappedFile, read_lines};
use crate::agent::compaction::message::ChatMessage;
use crate::agent::compaction::microcompact::microcompact;
use crate::agent::compaction::pairs::fix_tool_pairs;
use crate::agent::compaction::{CompactionSettings, ProviderSummarizer};
use crate::config::Overrides;
use crate::llm::CallOptions;
use crate::llm::tokens::Estimator;
use crate::model::Message;

#[derive(clap::Args, Debug)]
pub struct CompactArgs {
    /// Messages in the OpenAI chat shape, one JSON object per line.
    #[arg(long = "in", value_name = "FILE.jsonl")]
    pub input: PathBuf,
    /// Comma-separated: micro, collapse, auto, pairs, chunks, or all (= micro,collapse,auto,pairs).
    #[arg(long, default_value = "all")]
    pub layer: String,
    /// The token threshold T, for the report (and the L3 tail cap of T/2).
    #[arg(long, default_value_t = 40_000)]
    pub threshold: u64,
    /// chars4 (the original's estimate) or bpe.
    #[arg(long, default_value = "chars4")]
    pub estimator: String,
    /// Output file (default: stdout).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Focus topic for `auto`.
    #[arg(long, default_value = "")]
    pub focus: String,
    /// Characters per summary chunk.
    #[arg(long, default_value_t = 80_000)]
    pub chunk_chars: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layer {
    Micro,
    Collapse,
    Auto,
    Pairs,
    Chunks,
}

/// A `--layer` list that cannot be used.
#[derive(Debug, thiserror::Error)]
enum LayerSpecError {
    #[error("unknown layer '{0}': use micro, collapse, auto, pairs, chunks or all")]
    Unknown(String),
    #[error("no layer given")]
    Empty,
    #[error("chunks must be the last layer: it turns the messages into summary chunks")]
    ChunksNotLast,
}

fn parse_layers(spec: &str) -> Result<Vec<Layer>, LayerSpecError> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part {
            "all" => out.extend([Layer::Micro, Layer::Collapse, Layer::Auto, Layer::Pairs]),
            "micro" | "microcompact" => out.push(Layer::Micro),
            "collapse" => out.push(Layer::Collapse),
            "auto" => out.push(Layer::Auto),
            "pairs" => out.push(Layer::Pairs),
            "chunks" => out.push(Layer::Chunks),
            other => return Err(LayerSpecError::Unknown(other.to_string())),
        }
    }
    if out.is_empty() {
        return Err(LayerSpecError::Empty);
    }
    if let Some(i) = out.iter().position(|l| *l == Layer::Chunks)
        && i != out.len() - 1
    {
        return Err(LayerSpecError::ChunksNotLast);
    }
    Ok(out)
}

/// An input file that cannot be read as one JSON message per line.
#[derive(Debug, thiserror::Error)]
enum InputError {
    #[error("cannot open {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: line {line}: {source}", path.display())]
    Read {
        path: PathBuf,
        line: usize,
        source: std::io::Error,
    },
    #[error("{}: line {line}: {source}", path.display())]
    Json {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("{}: line {line}: not a JSON object", path.display())]
    NotObject { path: PathBuf, line: usize },
}

/// The ordinary reader: every line parsed into a map. Used where the file
/// cannot be read in place, and to word the error of one that is unreadable.
fn read_messages(path: &Path) -> Result<Vec<Map<String, Value>>, InputError> {
    let file = std::fs::File::open(path).map_err(|source| InputError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let (path, line_no) = (path.to_path_buf(), n + 1);
        let line = line.map_err(|source| InputError::Read {
            path: path.clone(),
            line: line_no,
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(&line) {
            Ok(Value::Object(m)) => out.push(m),
            Ok(_) => {
                return Err(InputError::NotObject {
                    path,
                    line: line_no,
                });
            }
            Err(source) => {
                return Err(InputError::Json {
                    path,
                    line: line_no,
                    source,
                });
            }
        }
    }
    Ok(out)
}

fn count(estimator: &Estimator, msgs: &[LineMessage]) -> u64 {
    match estimator {
        // Exactly the original's len(json.dumps(list)) // 4: each message's
        // length is known from reading it, plus brackets and separators.
        Estimator::Chars4 => {
            let items: usize = msgs.iter().map(ChatMessage::python_len).sum();
            (2 + items + 2 * msgs.len().saturating_sub(1)) as u64 / 4
        }
        Estimator::Bpe(_) => {
            let typed: Vec<Message> = msgs
                .iter()
                .filter_map(|m| serde_json::from_value(Value::Object(m.to_map())).ok())
                .collect();
            estimator.count(&typed)
        }
    }
}

/// The messages one per line, or the chunks as one JSON list, through a
/// buffer of its own (messages read in place are copied once, from the
/// input's bytes into it).
fn write_body(
    out: impl Write,
    msgs: &[LineMessage],
    chunks: Option<&[String]>,
) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(1 << 20, out);
    match chunks {
        Some(c) => {
            out.write_all(crate::llm::tokens::python_json_string(c).as_bytes())?;
            out.write_all(b"\n")?;
        }
        None => {
            for m in msgs {
                m.write_python_json(&mut out)?;
                out.write_all(b"\n")?;
            }
        }
    }
    out.flush()
}

pub async fn compact(args: CompactArgs) -> Result<(), CliError> {
    let layers = parse_layers(&args.layer).map_err(CliError::usage)?;
    let Some(estimator) = Estimator::from_name(&args.estimator, "") else {
        return Err(CliError::usage(format!(
            "unknown estimator '{}': use chars4 or bpe",
            args.estimator
        )));
    };
    // Lines written the way this command writes them are kept as read, and
    // written back as their own bytes; the rest are parsed into maps.
    let mapped = MappedFile::open(&args.input);
    let read = match mapped {
        Some(_) => None,
        None => std::fs::read(&args.input).ok(),
    };
    let bytes: Option<&[u8]> = mapped.as_deref().or(read.as_deref());
    let mut msgs: Vec<LineMessage> = match bytes.map(read_lines) {
        Some(Ok(m)) => m,
        _ => read_messages(&args.input)
            .map_err(CliError::usage)?
            .into_iter()
            .map(LineMessage::Parsed)
            .collect(),
    };
    let settings = CompactionSettings::default();
    let before = count(&estimator, &msgs);
    let mut report = Vec::new();
    let mut chunks: Option<Vec<String>> = None;
    for layer in &layers {
        match layer {
            Layer::Micro => {
                let t = microcompact(&mut msgs, settings.keep_recent);
                report.push(format!("micro: {} cleared", t.len()));
            }
            Layer::Collapse => {
                let t = collapse(&mut msgs, settings.collapse);
                report.push(format!("collapse: {} collapsed", t.len()));
            }
            Layer::Pairs => {
                let r = fix_tool_pairs(&mut msgs);
                report.push(format!(
                    "pairs: {} removed, {} stubbed",
                    r.removed, r.stubbed
                ));
            }
            Layer::Chunks => {
                let c = summary_chunks(&msgs, args.chunk_chars).map_err(CliError::usage)?;
                report.push(format!("chunks: {}", c.len()));
                chunks = Some(c);
            }
            Layer::Auto => {
                let mut maps: Vec<Map<String, Value>> =
                    msgs.iter().map(LineMessage::to_map).collect();
                report.push(run_auto(&mut maps, &args, estimator).await?);
                msgs = maps.into_iter().map(LineMessage::Parsed).collect();
            }
        }
    }
    match &args.out {
        Some(path) => std::fs::File::create(path)
            .and_then(|f| write_body(f, &msgs, chunks.as_deref()))
            .map_err(|e| CliError::failed(format!("cannot write {}: {e}", path.display())))?,
        None => write_body(std::io::stdout().lock(), &msgs, chunks.as_deref())
            .map_err(CliError::failed)?,
    }
    let after = count(&estimator, &msgs);
    eprintln!(
        "{}; tokens {before} → {after} ({}, {:.0}% → {:.0}% of T={})",
        report.join("; "),
        estimator.name(),
        100.0 * before as f64 / args.threshold.max(1) as f64,
        100.0 * after as f64 / args.threshold.max(1) as f64,
        args.threshold
    );
    Ok(())
}

async fn run_auto(
    msgs: &mut Vec<Map<String, Value>>,
    args: &CompactArgs,
    estimator: Estimator,
) -> Result<String, CliError> {
    let config = load_config(&Overrides::default()).map_err(|e| {
        // The reason first, then what it stopped (exit 1: the layers ran).
        eprintln!("{e}");
        CliError::failed("cannot load the configuration")
    })?;
    let provider_config = config.provider.as_ref().ok_or_else(|| {
        CliError::failed(
            "`--layer auto` needs a model for the summary: configure one (see `vibedesk doctor`)",
        )
    })?;
    let provider = build_provider(provider_config).map_err(CliError::failed)?;
    let summarizer = ProviderSummarizer {
        provider: Arc::clone(&provider),
        options: CallOptions {
            idle_timeout: config.agent.idle_timeout,
            call_timeout: config.agent.llm_timeout,
        },
        cancel: CancellationToken::new(),
    };
    let dir = match &args.out {
        Some(p) => p.parent().map(|d| d.to_path_buf()).unwrap_or_default(),
        None => config.paths.cache_dir.join("compact-inspector"),
    };
    let archive = TranscriptArchive::new(&dir, "inspector");
    let mut write = |m: &[Map<String, Value>]| archive.write_transcript(m);
    let params = AutoParams {
        tail_token_budget: AutoParams::default().tail_token_budget,
        chunk_chars: args.chunk_chars,
    };
    let count_text = move |t: &str| estimator.count_text(t);
    let out = auto_compact(
        msgs,
        "",
        &args.focus,
        params,
        &count_text,
        &summarizer,
        &mut write,
        "",
    )
    .await
    .map_err(CliError::failed)?;
    Ok(if out.nothing_to_compress {
        "auto: nothing to compress".to_string()
    } else {
        format!(
            "auto: {} head messages summarised in {} chunk(s){}, transcript {}",
            out.head_len,
            out.chunks,
            if out.degraded { " (degraded)" } else { "" },
            out.transcript
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_lists() {
        assert_eq!(parse_layers("all").unwrap().len(), 4);
        assert_eq!(
            parse_layers("micro,pairs,chunks").unwrap(),
            vec![Layer::Micro, Layer::Pairs, Layer::Chunks]
        );
        assert!(
            parse_layers("chunks,micro")
                .unwrap_err()
                .to_string()
                .contains("last")
        );
        assert!(
            parse_layers("squash")
                .unwrap_err()
                .to_string()
                .contains("unknown layer")
        );
    }
}
