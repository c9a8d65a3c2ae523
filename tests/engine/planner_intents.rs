//! Every tool the manifest marks for the offline planner declares its
//! intent in `planner::intents`, and the planner drives nothing else
//! (`docs/extending.md`, step 4 of adding a tool).

use std::collections::BTreeSet;

use vibedesk::planner::intents::INTENTS;
use vibedesk::tools::builtin::planner_tools;

#[test]
fn each_planner_tool_has_one_intent_and_no_intent_is_orphaned() {
    let marked: BTreeSet<String> = planner_tools().into_iter().collect();
    let rows: BTreeSet<String> = INTENTS.iter().map(|i| i.tool.to_string()).collect();
    assert_eq!(rows.len(), INTENTS.len(), "a tool has two intents");
    let missing: Vec<&String> = marked.difference(&rows).collect();
    let orphaned: Vec<&String> = rows.difference(&marked).collect();
    assert!(
        missing.is_empty(),
        "planner tools without an intent in src/planner/intents.rs: {missing:?}"
    );
    assert!(
        orphaned.is_empty(),
        "intents for tools the manifest does not mark .planner(): {orphaned:?}"
    );
    assert!(marked.len() >= 15, "only {} planner tools", marked.len());
}

#[test]
fn every_intent_says_what_it_reads() {
    for row in INTENTS {
        assert!(row.reads.len() > 10, "{} says too little", row.tool);
    }
}
