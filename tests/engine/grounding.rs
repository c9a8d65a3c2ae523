//! The answer check's false alarms (docs §1.6, issue 36 item 4): every
//! example request the planner's help gives runs through the real binary
//! offline, and none of its answers may have a figure flagged unverified —
//! a warning users learn to ignore is no check.

use vibedesk::planner::HELP;

use crate::planner::run_with;

/// The figures the run flagged (its `unverified_numbers` events) and its
/// answer.
async fn flagged(prompt: &str) -> (Vec<String>, String) {
    let home = tempfile::tempdir().unwrap();
    let run = run_with(home.path(), prompt, &[]).await;
    let numbers = run
        .events
        .iter()
        .filter(|e| e["type"] == "unverified_numbers")
        .flat_map(|e| e["numbers"].as_array().cloned().unwrap_or_default())
        .map(|n| n.as_str().unwrap_or_default().to_string())
        .collect();
    (numbers, run.answer)
}

#[tokio::test]
async fn no_help_example_has_a_figure_flagged() {
    let examples: Vec<&str> = HELP
        .iter()
        .flat_map(|l| l.examples.iter().copied())
        .collect();
    assert!(examples.len() >= 10, "the help lists its examples");
    let mut alarms: Vec<String> = Vec::new();
    let mut count = 0;
    for prompt in &examples {
        let (numbers, answer) = flagged(prompt).await;
        assert!(
            !answer.contains("no language model is connected"),
            "the planner serves its own example {prompt:?}: {answer}"
        );
        if !numbers.is_empty() {
            count += numbers.len();
            alarms.push(format!("{prompt}: {}\n{answer}", numbers.join(", ")));
        }
    }
    println!(
        "grounding false alarms: {count} figure(s) flagged over {} help examples",
        examples.len()
    );
    assert_eq!(count, 0, "false alarms:\n{}", alarms.join("\n\n"));
}
