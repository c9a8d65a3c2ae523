//! Which of the servers' tools a request offers (docs §13.3): each tool's
//! schema checked ([`super::schema`]), an invalid one skipped with a note,
//! and all servers' tools together cut to a cap (`[mcp] max_tools`,
//! [`super::config::DEFAULT_MAX_TOOLS`] by default), since providers refuse requests with more tools
//! than they take (commonly 128) and every tool costs tokens on every
//! request: one server with 5,033 tools made each request 3 MB.
//!
//! The cap is shared fairly ([`allocate`]): a server with few tools keeps
//! them all, and the servers with more split what is left, each keeping its
//! first tools in its own order. A server whose tools were cut says which
//! were left out and how to choose (`enabled_tools`, `disabled_tools`).

use std::sync::Arc;

use super::client_link::{ServerLink, ToolSummary};
use super::config::McpServerConfig;
use super::tool::McpTool;

/// Names quoted in a note before "and N more".
const NAMED: usize = 5;

/// A server's tools as offered: those that passed the checks, and a note
/// for each kind of tool skipped.
#[derive(Clone)]
pub struct Checked {
    pub tools: Vec<Arc<McpTool>>,
    pub notes: Vec<String>,
}

/// The server's tools that `enabled_tools`/`disabled_tools` let through,
/// with their schemas checked; invalid ones are skipped with a note (at
/// most [`NAMED`] named, each with its problem).
pub fn checked_tools(
    config: &McpServerConfig,
    link: &Arc<ServerLink>,
    remote: &[rmcp::model::Tool],
) -> Checked {
    let mut tools = Vec::new();
    let mut invalid: Vec<String> = Vec::new();
    for t in remote.iter().filter(|t| config.offers(&t.name)) {
        match super::schema::check_schema(&t.input_schema) {
            Ok(()) => tools.push(Arc::new(McpTool::new(link.clone(), t, config.tool_timeout))),
            Err(e) => {
                tracing::warn!(server = %config.name, tool = %t.name, "MCP tool skipped: {e}");
                invalid.push(format!("`{}` ({e})", t.name));
            }
        }
    }
    let mut notes = Vec::new();
    if !invalid.is_empty() {
        let count = invalid.len();
        let more = count.saturating_sub(NAMED);
        invalid.truncate(NAMED);
        let mut note = format!(
            "skipped {count} tool(s) whose input schema is not valid JSON Schema (a provider would refuse every request with them): {}",
            invalid.join("; ")
        );
        if more > 0 {
            note.push_str(&format!("; and {more} more"));
        }
        notes.push(note);
    }
    Checked { tools, notes }
}

/// Shares `cap` among servers with `counts` tools: each gets all of its
/// tools or an equal share of what the smaller ones left, the remainder
/// going one each to the first servers (configuration order).
pub fn allocate(counts: &[usize], cap: usize) -> Vec<usize> {
    let mut given = vec![0usize; counts.len()];
    let mut left = cap;
    let mut open: Vec<usize> = (0..counts.len()).filter(|&i| counts[i] > 0).collect();
    while left > 0 && !open.is_empty() {
        let share = left / open.len();
        if share == 0 {
            for &i in open.iter().take(left) {
                given[i] += 1;
            }
            break;
        }
        let mut still = Vec::new();
        for &i in &open {
            let give = (counts[i] - given[i]).min(share);
            given[i] += give;
            left -= give;
            if given[i] < counts[i] {
                still.push(i);
            }
        }
        open = still;
    }
    given
}

/// What a server whose tools were cut says: how many, which (the first
/// few), and how to choose.
pub fn left_out_note(server: &str, left_out: &[ToolSummary], offered: usize, cap: usize) -> String {
    let names: Vec<&str> = left_out
        .iter()
        .take(NAMED)
        .map(|t| t.name.as_str())
        .collect();
    let more = left_out.len().saturating_sub(NAMED);
    let mut listed = names.join(", ");
    if more > 0 {
        listed.push_str(&format!(" and {more} more"));
    }
    format!(
        "offers {offered} of its {} tools: a request carries at most {cap} MCP tools, all servers together ([mcp] max_tools in config.toml); left out: {listed} (`vibedesk mcp tools {server}` lists them all); choose the ones to offer with enabled_tools or disabled_tools in [mcp_servers.{server}]",
        offered + left_out.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_shared_fairly() {
        assert_eq!(allocate(&[5033], 100), vec![100]);
        assert_eq!(allocate(&[5033, 10], 100), vec![90, 10]);
        assert_eq!(allocate(&[10, 5033, 3], 100), vec![10, 87, 3]);
        assert_eq!(allocate(&[60, 60], 100), vec![50, 50]);
        assert_eq!(allocate(&[60, 60, 60], 100), vec![34, 33, 33]);
        assert_eq!(allocate(&[2, 3], 100), vec![2, 3]);
        assert_eq!(allocate(&[5, 0, 5], 0), vec![0, 0, 0]);
        assert_eq!(allocate(&[], 100), Vec::<usize>::new());
        for counts in [vec![1, 200, 7, 50], vec![300, 300, 1]] {
            let given = allocate(&counts, 100);
            assert_eq!(given.iter().sum::<usize>(), 100, "{counts:?} {given:?}");
            assert!(given.iter().zip(&counts).all(|(g, c)| g <= c));
        }
    }

    #[test]
    fn the_note_names_a_few_and_says_how_to_choose() {
        let left: Vec<ToolSummary> = (90..5033)
            .map(|i| ToolSummary {
                name: format!("mcp__big__t{i:04}"),
                remote_name: format!("t{i:04}"),
                description: String::new(),
                readonly: true,
            })
            .collect();
        let note = left_out_note("big", &left, 90, 100);
        assert!(note.starts_with("offers 90 of its 5033 tools"), "{note}");
        assert!(note.contains("mcp__big__t0090, mcp__big__t0091"), "{note}");
        assert!(note.contains("and 4938 more"), "{note}");
        assert!(!note.contains("mcp__big__t0095"), "{note}");
        assert!(
            note.contains("enabled_tools or disabled_tools in [mcp_servers.big]"),
            "{note}"
        );
    }
}
