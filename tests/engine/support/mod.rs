pub mod harness;
pub mod ray_cluster;
pub mod server;
