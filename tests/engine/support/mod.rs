pub mod harness;
pub mod outside;
pub mod ray_cluster;
pub mod server;
