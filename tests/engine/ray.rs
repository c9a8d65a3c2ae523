//! The Ray engine (docs §19) on a real two-node Ray cluster started on this
//! machine (`support::ray_cluster`): one cluster for the whole file, since
//! a start costs about ten seconds of two busy cores, driven step by step
//! by one test. Without Ray the test says so and passes, unless
//! `VIBEDESK_REQUIRE_RAY` is set (CI installs Ray), where it fails.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use vibedesk::sweep::ray::job::{self, JobEvent};
use vibedesk::sweep::ray::{JobStatus, JobsClient, ShardJob};

use crate::support::ray_cluster::{FORBIDDEN, RayCluster, ray_or_skip};

/// A stand-in shard binary for the generic job: records each attempt,
/// fails shard 1's first attempt, and writes `shard-<i>` atomically.
const SCRIPT: &str = r#"#!/bin/sh
spec="$2"; out="$4"; i="${spec%/*}"
echo "$$" >> "$out/attempts-$i"
if [ "$i" = 1 ] && [ "$(wc -l < "$out/attempts-$i")" -lt 2 ]; then
  echo "shard 1 fails its first attempt" >&2; exit 3
fi
printf 'shard %s\n' "$spec" > "$out/.tmp-$i" && mv "$out/.tmp-$i" "$out/shard-$i"
"#;

async fn run_job(client: &JobsClient, job: &ShardJob) -> (job::JobOutcome, Vec<JobEvent>) {
    let mut events = Vec::new();
    let outcome = job::run(
        client,
        job,
        &mut |e| events.push(e),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    (outcome, events)
}

/// Step 1: the driver runs every shard once, Ray retries a failing one,
/// and the package is the job's own.
async fn generic_shards_run_once_each_with_retries(cluster: &RayCluster, scratch: &Path) {
    let bin = scratch.join("fake-vibedesk");
    std::fs::write(&bin, SCRIPT).unwrap();
    let out = scratch.join("generic");
    std::fs::create_dir_all(&out).unwrap();
    let client = JobsClient::new(&cluster.dashboard, None).unwrap();
    assert_eq!(client.ray_version().await.unwrap(), "2.60.0");
    let argv = ["shard", "{shard}", "--out"]
        .iter()
        .map(|s| s.to_string())
        .chain([out.display().to_string()])
        .collect();
    let mut spec = ShardJob::new("test", "0123456789abcdef", bin, argv, 3);
    spec.stored = true;
    let (outcome, events) = run_job(&client, &spec).await;
    assert_eq!(outcome.status, JobStatus::Succeeded, "{events:#?}");
    let mut done = outcome.done.clone();
    done.sort_unstable();
    assert_eq!(done, vec![0, 1, 2], "{events:#?}");
    for i in 0..3 {
        assert_eq!(
            std::fs::read_to_string(out.join(format!("shard-{i}"))).unwrap(),
            format!("shard {i}/3\n")
        );
    }
    let attempts = |i: usize| {
        std::fs::read_to_string(out.join(format!("attempts-{i}")))
            .unwrap()
            .lines()
            .count()
    };
    assert_eq!((attempts(0), attempts(1), attempts(2)), (1, 2, 1));
    // A second job of the same shards: its own id and its own package.
    let (again, _) = run_job(&client, &spec).await;
    assert_eq!(again.status, JobStatus::Succeeded);
    assert_ne!(again.submission_id, outcome.submission_id);
    assert_ne!(again.package, outcome.package);
    let packaged: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, JobEvent::Packaged { .. }))
        .collect();
    assert_eq!(packaged.len(), 1);
}

/// Step 2: every port the cluster listens on is outside 10002–19999.
fn ports_stay_outside_the_forbidden_range(cluster: &RayCluster) {
    let ports = cluster.listening_ports();
    // GCS, dashboard, two node managers at least.
    assert!(ports.len() >= 4, "{ports:?}");
    assert!(ports.contains(&cluster.base) && ports.contains(&(cluster.base + 1)));
    let inside: Vec<_> = ports.iter().filter(|p| FORBIDDEN.contains(p)).collect();
    assert!(inside.is_empty(), "Ray listens on {inside:?} of {ports:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_two_node_ray_cluster_runs_shards() {
    let Some(ray) = ray_or_skip("a_real_two_node_ray_cluster_runs_shards") else {
        return;
    };
    let cluster = tokio::task::spawn_blocking(move || RayCluster::start(ray))
        .await
        .unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let _ = BTreeMap::<u8, u8>::new();
    let _ = Duration::from_secs(1);
    generic_shards_run_once_each_with_retries(&cluster, scratch.path()).await;
    ports_stay_outside_the_forbidden_range(&cluster);
}
