//! STUB: to be completed.
