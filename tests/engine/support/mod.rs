pub mod harness;
pub mod server;
