//! The parsed form of a factor expression and its canonical text: every
//! binary operation parenthesised and every literal with a decimal point or
//! exponent, so `parse(&e.to_string()) == e` (an integer literal in the
//! second argument of `min`/`max` would otherwise turn them into windows).

use std::fmt;

/// A price column, or a quantity derived from them (docs §17.7.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Input {
    Open,
    High,
    Low,
    Close,
    Volume,
    /// `close / delay(close, 1) − 1`.
    Returns,
    /// `(high + low + close) / 3` on daily bars.
    Vwap,
    /// `ts_mean(close × volume, d)`: average daily dollar volume.
    Adv(usize),
}

/// Elementwise binary operators, and `min`/`max` of two expressions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
    Min,
    Max,
}

/// Elementwise functions of one argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryFn {
    Abs,
    Log,
    Sign,
}

/// Time-series functions of one series over the past `d` rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TsFn {
    Delay,
    Delta,
    Sum,
    Product,
    Min,
    Max,
    ArgMin,
    ArgMax,
    Rank,
    StdDev,
    DecayLinear,
    Mean,
}

/// Time-series functions of two series over the past `d` rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PairFn {
    Corr,
    Cov,
}

/// A factor expression (docs §17.7.1). Windows are whole days ≥ 1 (the
/// parser floors the paper's fractional ones).
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Num(f64),
    Input(Input),
    Neg(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `c ? a : b`.
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    Unary(UnaryFn, Box<Expr>),
    /// `signedpower(x, a)` = sign(x) · |x|^a.
    SignedPower(Box<Expr>, Box<Expr>),
    /// Cross-sectional rank in (0, 1].
    Rank(Box<Expr>),
    /// Cross-sectional `x · a / Σ|x|`.
    Scale(Box<Expr>, f64),
    /// `x` minus its group's mean on the date; the string is the level the
    /// source named (e.g. `indclass.industry`), lower-cased.
    IndNeutralize(Box<Expr>, String),
    Ts(TsFn, Box<Expr>, usize),
    Pair(PairFn, Box<Expr>, Box<Expr>, usize),
}

impl Input {
    pub fn name(self) -> String {
        match self {
            Input::Open => "open".into(),
            Input::High => "high".into(),
            Input::Low => "low".into(),
            Input::Close => "close".into(),
            Input::Volume => "volume".into(),
            Input::Returns => "returns".into(),
            Input::Vwap => "vwap".into(),
            Input::Adv(d) => format!("adv{d}"),
        }
    }
}

impl BinOp {
    /// The operator's symbol, or the function name of `min`/`max`.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Pow => "^",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "&&",
            BinOp::Or => "||",
            BinOp::Min => "min",
            BinOp::Max => "max",
        }
    }
}

impl UnaryFn {
    pub fn name(self) -> &'static str {
        match self {
            UnaryFn::Abs => "abs",
            UnaryFn::Log => "log",
            UnaryFn::Sign => "sign",
        }
    }
}

impl TsFn {
    /// The canonical (issue's) name; the paper's aliases parse to the same.
    pub fn name(self) -> &'static str {
        match self {
            TsFn::Delay => "delay",
            TsFn::Delta => "delta",
            TsFn::Sum => "ts_sum",
            TsFn::Product => "ts_product",
            TsFn::Min => "ts_min",
            TsFn::Max => "ts_max",
            TsFn::ArgMin => "ts_argmin",
            TsFn::ArgMax => "ts_argmax",
            TsFn::Rank => "ts_rank",
            TsFn::StdDev => "ts_stddev",
            TsFn::DecayLinear => "decay_linear",
            TsFn::Mean => "ts_mean",
        }
    }
}

impl PairFn {
    pub fn name(self) -> &'static str {
        match self {
            PairFn::Corr => "ts_corr",
            PairFn::Cov => "ts_cov",
        }
    }
}

impl Expr {
    /// Rows of history the value on a date reads before that date (0 for
    /// an expression of today's prices): the warm-up a caller loads.
    pub fn lookback(&self) -> usize {
        match self {
            Expr::Num(_) => 0,
            Expr::Input(Input::Returns) => 1,
            Expr::Input(Input::Adv(d)) => d.saturating_sub(1),
            Expr::Input(_) => 0,
            Expr::Neg(x)
            | Expr::Unary(_, x)
            | Expr::Rank(x)
            | Expr::Scale(x, _)
            | Expr::IndNeutralize(x, _) => x.lookback(),
            Expr::Binary(_, a, b) | Expr::SignedPower(a, b) => a.lookback().max(b.lookback()),
            Expr::Cond(c, a, b) => c.lookback().max(a.lookback()).max(b.lookback()),
            Expr::Ts(f, x, d) => {
                let own = match f {
                    TsFn::Delay | TsFn::Delta => *d,
                    _ => d.saturating_sub(1),
                };
                x.lookback().saturating_add(own)
            }
            Expr::Pair(_, a, b, d) => a
                .lookback()
                .max(b.lookback())
                .saturating_add(d.saturating_sub(1)),
        }
    }

    /// Whether evaluating it needs [`super::Groups`].
    pub fn needs_groups(&self) -> bool {
        match self {
            Expr::Num(_) | Expr::Input(_) => false,
            Expr::IndNeutralize(..) => true,
            Expr::Neg(x) | Expr::Unary(_, x) | Expr::Rank(x) | Expr::Scale(x, _) => {
                x.needs_groups()
            }
            Expr::Ts(_, x, _) => x.needs_groups(),
            Expr::Binary(_, a, b) | Expr::SignedPower(a, b) | Expr::Pair(_, a, b, _) => {
                a.needs_groups() || b.needs_groups()
            }
            Expr::Cond(c, a, b) => c.needs_groups() || a.needs_groups() || b.needs_groups(),
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // Debug keeps a decimal point (`3.0`) and round-trips exactly.
            Expr::Num(v) => write!(f, "{v:?}"),
            Expr::Input(i) => f.write_str(&i.name()),
            Expr::Neg(x) => write!(f, "(-{x})"),
            Expr::Binary(op @ (BinOp::Min | BinOp::Max), a, b) => {
                write!(f, "{}({a}, {b})", op.symbol())
            }
            Expr::Binary(op, a, b) => write!(f, "({a} {} {b})", op.symbol()),
            Expr::Cond(c, a, b) => write!(f, "({c} ? {a} : {b})"),
            Expr::Unary(u, x) => write!(f, "{}({x})", u.name()),
            Expr::SignedPower(x, a) => write!(f, "signedpower({x}, {a})"),
            Expr::Rank(x) => write!(f, "rank({x})"),
            Expr::Scale(x, a) => write!(f, "scale({x}, {a:?})"),
            Expr::IndNeutralize(x, g) => write!(f, "indneutralize({x}, {g})"),
            Expr::Ts(t, x, d) => write!(f, "{}({x}, {d})", t.name()),
            Expr::Pair(p, a, b, d) => write!(f, "{}({a}, {b}, {d})", p.name()),
        }
    }
}
