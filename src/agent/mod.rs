//! One research run: the ReAct loop, its events, the context it sends and the
//! compaction hook.

pub mod events;
