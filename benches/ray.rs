//! The Ray engine's overhead (issue 29, docs §19.6): the same sweep run by
//! the real binary with the local engine (every core) and with `--engine
//! ray` on a real two-node Ray cluster on this machine (the tests' fixture,
//! one CPU per node), timed as whole commands; the two results files must
//! be byte for byte equal. The sweep is the 174-parameter-set SMA grid of
//! `benches/sweep.rs` (fast 5–50 step 5, slow 20–200 step 10, fast < slow)
//! on 100 symbols of the offline data over 2013–2017: 17,400 cells.
//!
//! `VIBEDESK_RAY_BIN=…/bin/ray cargo bench --bench ray`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../tests/engine/support/ray_cluster.rs"]
#[allow(dead_code)]
mod ray_cluster;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};
use vibedesk::research::data::embedded;

/// 100 stocks of the offline set with every bar of the window.
fn symbols() -> Vec<String> {
    let mut out = Vec::new();
    for s in embedded::symbols() {
        let b = embedded::bars(s).unwrap();
        if b.dates
            .first()
            .is_some_and(|d| d.to_string().as_str() <= "2012-01-03")
            && b.dates
                .last()
                .is_some_and(|d| d.to_string().as_str() >= "2017-11-01")
        {
            out.push(s.to_string());
        }
        if out.len() == 100 {
            break;
        }
    }
    out
}

/// Runs `vibedesk sweep run SPEC --out OUT ARGS --json`; returns the
/// seconds and the events.
fn sweep(home: &Path, spec: &Path, out: &Path, args: &[&str]) -> (f64, Vec<Value>) {
    let started = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_vibedesk"))
        .env("VIBEDESK_HOME", home)
        .args(["sweep", "run"])
        .arg(spec)
        .arg("--out")
        .arg(out)
        .args(args)
        .args(["--offline", "--json"])
        .output()
        .unwrap();
    let secs = started.elapsed().as_secs_f64();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let events = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (secs, events)
}

fn main() {
    let Ok(ray) = ray_cluster::ray_bin() else {
        eprintln!("ray bench: no `ray` (set VIBEDESK_RAY_BIN); skipped");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("grid.json");
    let universe = symbols();
    std::fs::write(
        &spec,
        json!({
            "base": {"codes": ["AAPL"], "start_date": "2013-01-01", "end_date": "2017-11-01",
                     "commission_rate": 0.001,
                     "strategy": {"name": "sma_crossover", "params": {"fast": 10, "slow": 50}}},
            "axes": {"strategy.params.fast": {"from": 5, "to": 50, "step": 5},
                     "strategy.params.slow": {"from": 20, "to": 200, "step": 10}},
            "constraint": "fast < slow",
            "universe": universe,
            "rank_by": "sharpe"
        })
        .to_string(),
    )
    .unwrap();
    let t = Instant::now();
    let cluster = ray_cluster::RayCluster::start(ray);
    println!(
        "cluster start (two nodes): {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let local = dir.path().join("local.parquet");
    let (local_s, ev) = sweep(dir.path(), &spec, &local, &[]);
    let cells = ev
        .iter()
        .find(|e| e["event"] == "sweep_started")
        .map(|e| e["total"].clone())
        .unwrap_or_default();
    println!("local engine, every core: {local_s:.2} s for {cells} cells");
    for shards in ["2", "16"] {
        let out = dir.path().join(format!("ray-{shards}.parquet"));
        let args = [
            "--engine",
            "ray",
            "--address",
            &cluster.dashboard,
            "--shards",
            shards,
        ];
        let (ray_s, ev) = sweep(dir.path(), &spec, &out, &args);
        let at = |kind: &str| ev.iter().find(|e| e["event"] == kind).cloned();
        let bytes = at("ray_packaged")
            .map(|e| e["bytes"].clone())
            .unwrap_or_default();
        let upload = at("ray_uploaded")
            .map(|e| e["seconds"].clone())
            .unwrap_or_default();
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(&local).unwrap(),
            "Ray's results differ from the local engine's"
        );
        println!(
            "ray, two nodes × 1 CPU, {shards} shards: {ray_s:.2} s ({:.1}× the local engine; package {bytes} bytes, upload {upload} s); results identical",
            ray_s / local_s
        );
    }
}
