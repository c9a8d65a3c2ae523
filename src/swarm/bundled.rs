//! The presets shipped in the binary (docs §14.1): `(name, YAML text)`, one
//! line per `assets/swarm/<name>.yaml`, embedded with `include_str!` so the
//! binary needs no asset directory. A preset of the same name in
//! `<config dir>/swarm/` wins over the one here.

pub const BUNDLED: &[(&str, &str)] = &[];
