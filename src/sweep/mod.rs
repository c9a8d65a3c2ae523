//! Stub until branch sweep is merged.
pub mod ray;
