//! Purged k-fold and CPCV against a reference written from de Prado's
//! definitions (docs §18.9): tests/golden/validation/splits.json, made by
//! `make_goldens.py` there with numpy and pandas at pinned versions on
//! seeded label ends. Index sets and paths must be identical; PBO's logits
//! and Sharpe ratios agree to 1e-12. A property check then asks, over many
//! seeded shapes, that no training index's label touches a test label or
//! starts within the embargo after a test group.

use std::path::PathBuf;

use serde_json::Value;
use vibedesk::research::seeded::SplitMix64;
use vibedesk::research::validation::{Embargo, Splits, cpcv, label_ends, pbo_cpcv, purged_kfold};

fn golden() -> Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/validation/splits.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn idx(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn embargo(v: &Value) -> Embargo {
    match v.get("fraction") {
        Some(f) => Embargo::Fraction(f.as_f64().unwrap()),
        None => Embargo::Observations(v["observations"].as_u64().unwrap() as usize),
    }
}

fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-12 * b.abs().max(1.0),
        "{what}: {a} vs {b}"
    );
}

#[test]
fn splits_and_paths_equal_the_reference() {
    let g = golden();
    let cases = g["cases"].as_array().unwrap();
    assert!(cases.len() >= 12);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let ends = idx(&c["label_end"]);
        let (n_groups, k) = (
            c["groups"].as_u64().unwrap() as usize,
            c["test_groups"].as_u64().unwrap() as usize,
        );
        let s = cpcv(&ends, n_groups, k, embargo(&c["embargo"])).unwrap();
        let want = c["splits"].as_array().unwrap();
        assert_eq!(s.splits.len(), want.len(), "{name}: split count");
        for (i, (got, w)) in s.splits.iter().zip(want).enumerate() {
            assert_eq!(got.test_groups, idx(&w["test_groups"]), "{name} split {i}");
            assert_eq!(got.test, idx(&w["test"]), "{name} split {i}: test");
            assert_eq!(got.train, idx(&w["train"]), "{name} split {i}: train");
        }
        let paths: Vec<Vec<usize>> = c["paths"].as_array().unwrap().iter().map(idx).collect();
        assert_eq!(s.paths, paths, "{name}: paths");
        if k == 1 {
            let kf = purged_kfold(&ends, n_groups, embargo(&c["embargo"])).unwrap();
            assert_eq!(kf, s.splits, "{name}: purged k-fold is CPCV(K, 1)");
        }
        if let Some(p) = c.get("pbo") {
            check_pbo(name, c, p, &s);
        }
    }
}

fn check_pbo(name: &str, c: &Value, p: &Value, s: &Splits) {
    let cols: Vec<Vec<f64>> = c["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(floats)
        .collect();
    let r = pbo_cpcv(&cols, s).unwrap();
    assert_eq!(r.pbo.winners, idx(&p["winners"]), "{name}: winners");
    for (a, b) in r.pbo.logits.iter().zip(floats(&p["logits"])) {
        close(*a, b, &format!("{name}: logit"));
    }
    close(
        r.pbo.pbo,
        p["pbo"].as_f64().unwrap(),
        &format!("{name}: pbo"),
    );
    for (a, b) in r.mean_oos_sharpe.iter().zip(floats(&p["mean_oos_sharpe"])) {
        close(*a, b, &format!("{name}: mean OOS Sharpe"));
    }
    let sel = floats(&p["selected_path_sharpe"]);
    assert_eq!(r.selected_path_sharpe.len(), sel.len());
    for (a, b) in r.selected_path_sharpe.iter().zip(sel) {
        close(*a, b, &format!("{name}: selected path Sharpe"));
    }
}

/// No training index's label [i, e_i] meets a test group's span [first
/// test index, last label end + embargo]; every index not excluded so is
/// in training; test and train are disjoint and the tests are the groups.
#[test]
fn no_training_index_within_a_test_label_or_its_embargo() {
    let mut rng = SplitMix64::new(41);
    let mut checked = 0;
    for _ in 0..200 {
        let n = 20 + (rng.next_u64() % 300) as usize;
        let groups = 2 + (rng.next_u64() % 8) as usize;
        let k = 1 + (rng.next_u64() % (groups as u64 - 1)) as usize;
        let step = (rng.next_u64() % 8) as usize;
        let hmax = rng.next_u64() % 12;
        let ends: Vec<usize> = (0..n)
            .map(|i| (i + (rng.next_u64() % (hmax + 1)) as usize).min(n - 1))
            .collect();
        let Ok(s) = cpcv(&ends, groups, k, Embargo::Observations(step)) else {
            continue;
        };
        checked += 1;
        for sp in &s.splits {
            let spans: Vec<(usize, usize)> = sp
                .test_groups
                .iter()
                .map(|&g| {
                    let r = s.groups[g].clone();
                    let last = ends[r.clone()].iter().max().copied().unwrap();
                    (r.start, (last + step).min(n - 1))
                })
                .collect();
            let excluded = |i: usize| spans.iter().any(|&(a, b)| i <= b && ends[i] >= a);
            for &i in &sp.train {
                assert!(!excluded(i), "train {i} inside a test span {spans:?}");
                assert!(!sp.test.contains(&i));
                // Within its own label: no test index lies in [i, e_i].
                assert!(!sp.test.iter().any(|&t| t >= i && t <= ends[i]));
            }
            let kept = (0..n)
                .filter(|&i| !sp.test.contains(&i) && !excluded(i))
                .count();
            assert_eq!(
                kept,
                sp.train.len(),
                "only the purge and the embargo remove"
            );
        }
        let phi = s.paths.len();
        for g in 0..groups {
            let tested = s
                .splits
                .iter()
                .filter(|sp| sp.test_groups.contains(&g))
                .count();
            assert_eq!(tested, phi, "each group tested φ times");
        }
    }
    assert!(checked > 150, "{checked} shapes checked");
    assert_eq!(label_ends(5, 2), vec![2, 3, 4, 4, 4]);
}
