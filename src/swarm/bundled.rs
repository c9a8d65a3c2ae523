//! The presets shipped in the binary (docs §14.1): `(name, YAML text)`, one
//! line per `assets/swarm/<name>.yaml`, embedded with `include_str!` so the
//! binary needs no asset directory. A preset of the same name in
//! `<config dir>/swarm/` wins over the one here.

pub const BUNDLED: &[(&str, &str)] = &[
    (
        "backtest_audit",
        include_str!("../../assets/swarm/backtest_audit.yaml"),
    ),
    (
        "crypto_desk",
        include_str!("../../assets/swarm/crypto_desk.yaml"),
    ),
    (
        "equity_research",
        include_str!("../../assets/swarm/equity_research.yaml"),
    ),
    (
        "factor_research",
        include_str!("../../assets/swarm/factor_research.yaml"),
    ),
    (
        "investment_committee",
        include_str!("../../assets/swarm/investment_committee.yaml"),
    ),
    (
        "macro_rates",
        include_str!("../../assets/swarm/macro_rates.yaml"),
    ),
    (
        "options_desk",
        include_str!("../../assets/swarm/options_desk.yaml"),
    ),
    (
        "pairs_stat_arb",
        include_str!("../../assets/swarm/pairs_stat_arb.yaml"),
    ),
    (
        "portfolio_review",
        include_str!("../../assets/swarm/portfolio_review.yaml"),
    ),
    (
        "quant_strategy_desk",
        include_str!("../../assets/swarm/quant_strategy_desk.yaml"),
    ),
    (
        "risk_committee",
        include_str!("../../assets/swarm/risk_committee.yaml"),
    ),
    (
        "technical_analysis_panel",
        include_str!("../../assets/swarm/technical_analysis_panel.yaml"),
    ),
];
