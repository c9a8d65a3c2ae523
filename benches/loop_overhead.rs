//! Placeholder until the loop-overhead benchmark lands.
fn main() {}
