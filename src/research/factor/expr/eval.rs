//! The evaluator (docs §17.7.4): every expression of one call is interned
//! into a single graph, so a sub-expression shared within or across
//! expressions (`rank(close)`, the `delay(close, 1)` inside `returns`) is one
//! node computed once. Nodes are computed in creation order (children
//! first); a panel is handed back to a buffer pool as soon as its last
//! reader is done, so memory stays near the widest layer, not the graph.
//!
//! Panels are held symbol-major inside (`j * rows + i`) so time-series
//! windows read contiguous columns; the input and output are row-major.

use std::collections::HashMap;

use super::ast::{BinOp, Expr, Input, PairFn, TsFn, UnaryFn};
use super::kernels::{self, Scratch};
use super::{ExprError, Groups, MAX_DEPTH, OhlcvPanel};

type Id = usize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Col {
    Open,
    High,
    Low,
    Close,
    Volume,
}

/// A graph node; floats are keyed by their bits.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Node {
    Col(Col),
    Num(u64),
    Neg(Id),
    Bin(BinOp, Id, Id),
    Cond(Id, Id, Id),
    Unary(UnaryFn, Id),
    SignedPower(Id, Id),
    Rank(Id),
    Scale(Id, u64),
    IndNeutralize(Id),
    Ts(TsFn, Id, usize),
    Pair(PairFn, Id, Id, usize),
}

impl Node {
    fn children(&self) -> [Option<Id>; 3] {
        match *self {
            Node::Col(_) | Node::Num(_) => [None; 3],
            Node::Neg(x)
            | Node::Unary(_, x)
            | Node::Rank(x)
            | Node::Scale(x, _)
            | Node::IndNeutralize(x)
            | Node::Ts(_, x, _) => [Some(x), None, None],
            Node::Bin(_, a, b) | Node::SignedPower(a, b) | Node::Pair(_, a, b, _) => {
                [Some(a), Some(b), None]
            }
            Node::Cond(c, a, b) => [Some(c), Some(a), Some(b)],
        }
    }
}

/// Hash-consed nodes: equal subtrees get one id.
#[derive(Default)]
struct Graph {
    nodes: Vec<Node>,
    index: HashMap<Node, Id>,
}

impl Graph {
    fn add(&mut self, node: Node) -> Id {
        // IEEE addition, multiplication, equality and min/max (NaN either
        // side → NaN) are commutative bit for bit, so one operand order is
        // enough.
        let node = match node {
            Node::Bin(
                op @ (BinOp::Add
                | BinOp::Mul
                | BinOp::Eq
                | BinOp::Ne
                | BinOp::And
                | BinOp::Or
                | BinOp::Min
                | BinOp::Max),
                a,
                b,
            ) if b < a => Node::Bin(op, b, a),
            other => other,
        };
        if let Some(id) = self.index.get(&node) {
            return *id;
        }
        let id = self.nodes.len();
        self.nodes.push(node.clone());
        self.index.insert(node, id);
        id
    }

    fn input(&mut self, input: Input) -> Id {
        let close = self.add(Node::Col(Col::Close));
        match input {
            Input::Open => self.add(Node::Col(Col::Open)),
            Input::High => self.add(Node::Col(Col::High)),
            Input::Low => self.add(Node::Col(Col::Low)),
            Input::Close => close,
            Input::Volume => self.add(Node::Col(Col::Volume)),
            Input::Returns => {
                let prev = self.add(Node::Ts(TsFn::Delay, close, 1));
                let ratio = self.add(Node::Bin(BinOp::Div, close, prev));
                let one = self.add(Node::Num(1f64.to_bits()));
                self.add(Node::Bin(BinOp::Sub, ratio, one))
            }
            Input::Vwap => {
                let high = self.add(Node::Col(Col::High));
                let low = self.add(Node::Col(Col::Low));
                let hl = self.add(Node::Bin(BinOp::Add, high, low));
                let hlc = self.add(Node::Bin(BinOp::Add, hl, close));
                let three = self.add(Node::Num(3f64.to_bits()));
                self.add(Node::Bin(BinOp::Div, hlc, three))
            }
            Input::Adv(d) => {
                let volume = self.add(Node::Col(Col::Volume));
                let dollars = self.add(Node::Bin(BinOp::Mul, close, volume));
                self.add(Node::Ts(TsFn::Mean, dollars, d))
            }
        }
    }

    fn intern(&mut self, e: &Expr, depth: usize) -> Result<Id, ExprError> {
        if depth > MAX_DEPTH {
            return Err(ExprError::TooDeep(MAX_DEPTH));
        }
        let mut sub = |x: &Expr| self.intern(x, depth + 1);
        let node = match e {
            Expr::Num(v) => Node::Num(v.to_bits()),
            Expr::Input(i) => return Ok(self.input(*i)),
            Expr::Neg(x) => Node::Neg(sub(x)?),
            Expr::Binary(op, a, b) => Node::Bin(*op, sub(a)?, sub(b)?),
            Expr::Cond(c, a, b) => Node::Cond(sub(c)?, sub(a)?, sub(b)?),
            Expr::Unary(u, x) => Node::Unary(*u, sub(x)?),
            Expr::SignedPower(x, a) => Node::SignedPower(sub(x)?, sub(a)?),
            Expr::Rank(x) => Node::Rank(sub(x)?),
            Expr::Scale(x, a) => Node::Scale(sub(x)?, a.to_bits()),
            // One groups file answers every level the paper names.
            Expr::IndNeutralize(x, _) => Node::IndNeutralize(sub(x)?),
            Expr::Ts(f, x, d) => Node::Ts(*f, sub(x)?, (*d).max(1)),
            Expr::Pair(f, a, b, d) => Node::Pair(*f, sub(a)?, sub(b)?, (*d).max(1)),
        };
        Ok(self.add(node))
    }
}

/// A node's value: a constant, or a symbol-major panel.
enum Val {
    Scalar(f64),
    Panel(Vec<f64>),
}

/// What every node computation reads besides its children.
struct Ctx<'a> {
    panel: &'a OhlcvPanel,
    rows: usize,
    cells: usize,
    /// Group id of each symbol, when groups were given.
    group_of: Option<Vec<usize>>,
    groups: usize,
}

/// Evaluates every expression on the panel (docs §17.7.4): one row-major
/// date × symbol panel per expression, in order. The value on a date reads
/// rows up to that date only. Without `groups`, any expression that
/// neutralises ([`Expr::needs_groups`]) fails the whole call: a caller
/// screening a library leaves those out first.
pub fn evaluate(
    exprs: &[Expr],
    panel: &OhlcvPanel,
    groups: Option<&Groups>,
) -> Result<Vec<Vec<f64>>, ExprError> {
    let cells = panel.check_shape()?;
    let group_of = match groups {
        Some(g) => Some(group_ids(panel, g, exprs)?),
        None if exprs.iter().any(Expr::needs_groups) => return Err(ExprError::NeedsGroups),
        None => None,
    };
    let mut graph = Graph::default();
    let roots = exprs
        .iter()
        .map(|e| graph.intern(e, 0))
        .collect::<Result<Vec<Id>, _>>()?;
    if cells == 0 {
        return Ok(vec![Vec::new(); exprs.len()]);
    }
    let ctx = Ctx {
        panel,
        rows: panel.rows(),
        cells,
        groups: groups.map_or(0, Groups::len),
        group_of,
    };
    let mut values = run(&graph, &roots, &ctx)?;
    let mut out = Vec::with_capacity(roots.len());
    for (k, id) in roots.iter().enumerate() {
        let slot = values
            .get_mut(*id)
            .ok_or(ExprError::Internal("a root is missing"))?;
        out.push(match slot {
            Some(Val::Panel(p)) => to_row_major(p, ctx.rows, panel.width()),
            Some(Val::Scalar(v)) => vec![*v; cells],
            None => return Err(ExprError::Internal("a root was not computed")),
        });
        // Free the symbol-major copy once no later root repeats it, so the
        // answer does not briefly need twice its size.
        if !roots.get(k + 1..).is_some_and(|rest| rest.contains(id)) {
            *slot = None;
        }
    }
    Ok(out)
}

/// The group id of each panel symbol; only the symbols of expressions that
/// neutralise need one, but a missing one is an error either way.
fn group_ids(panel: &OhlcvPanel, groups: &Groups, exprs: &[Expr]) -> Result<Vec<usize>, ExprError> {
    let needed = exprs.iter().any(Expr::needs_groups);
    panel
        .symbols
        .iter()
        .map(|s| match groups.group_of(s) {
            Some(g) => Ok(g),
            None if needed => Err(ExprError::NoGroup(s.clone())),
            None => Ok(usize::MAX),
        })
        .collect()
}

/// Computes the graph, freeing each panel after its last reader; the roots'
/// values stay.
fn run(graph: &Graph, roots: &[Id], ctx: &Ctx<'_>) -> Result<Vec<Option<Val>>, ExprError> {
    let mut readers = vec![0usize; graph.nodes.len()];
    for node in &graph.nodes {
        for c in node.children().into_iter().flatten() {
            if let Some(r) = readers.get_mut(c) {
                *r += 1;
            }
        }
    }
    for r in roots {
        if let Some(r) = readers.get_mut(*r) {
            // Never freed.
            *r = usize::MAX;
        }
    }
    let mut values: Vec<Option<Val>> = Vec::with_capacity(graph.nodes.len());
    let mut pool: Vec<Vec<f64>> = Vec::new();
    let mut scratch = Scratch::default();
    for node in &graph.nodes {
        crate::research::checkpoint()?;
        let v = compute(node, &values, &mut pool, &mut scratch, ctx)?;
        values.push(Some(v));
        for c in node.children().into_iter().flatten() {
            let Some(r) = readers.get_mut(c) else {
                continue;
            };
            if *r == usize::MAX {
                continue;
            }
            *r = r.saturating_sub(1);
            if *r == 0
                && let Some(Some(Val::Panel(buf))) = values.get_mut(c).map(Option::take)
            {
                pool.push(buf);
            }
        }
    }
    Ok(values)
}

/// A child's value, borrowed.
enum Arg<'a> {
    S(f64),
    P(&'a [f64]),
}

fn arg(values: &[Option<Val>], id: Id) -> Result<Arg<'_>, ExprError> {
    match values.get(id).and_then(Option::as_ref) {
        Some(Val::Scalar(v)) => Ok(Arg::S(*v)),
        Some(Val::Panel(p)) => Ok(Arg::P(p)),
        None => Err(ExprError::Internal(
            "a node was read before it was computed",
        )),
    }
}

fn take(pool: &mut Vec<Vec<f64>>, cells: usize) -> Vec<f64> {
    let mut buf = pool.pop().unwrap_or_default();
    buf.clear();
    buf.resize(cells, f64::NAN);
    buf
}

fn compute(
    node: &Node,
    values: &[Option<Val>],
    pool: &mut Vec<Vec<f64>>,
    scratch: &mut Scratch,
    ctx: &Ctx<'_>,
) -> Result<Val, ExprError> {
    let get = |id| arg(values, id);
    Ok(match *node {
        Node::Col(c) => Val::Panel(column(c, ctx, pool)),
        Node::Num(bits) => Val::Scalar(f64::from_bits(bits)),
        Node::Neg(x) => map1(get(x)?, pool, ctx.cells, |v| -v),
        Node::Unary(u, x) => unary(u, get(x)?, pool, ctx.cells),
        Node::Bin(op, a, b) => binary(op, get(a)?, get(b)?, pool, ctx.cells),
        Node::SignedPower(x, a) => map2(get(x)?, get(a)?, pool, ctx.cells, |v, p| {
            sign(v) * v.abs().powf(p)
        }),
        Node::Cond(c, a, b) => cond(get(c)?, get(a)?, get(b)?, pool, ctx.cells),
        Node::Rank(x) => {
            let x = panel(get(x)?, pool, ctx.cells);
            let mut out = take(pool, ctx.cells);
            kernels::cs_rank(x.as_ref(), ctx.rows, &mut out, scratch);
            give_back(x, pool);
            Val::Panel(out)
        }
        Node::Scale(x, a) => {
            let x = panel(get(x)?, pool, ctx.cells);
            let mut out = take(pool, ctx.cells);
            kernels::cs_scale(x.as_ref(), ctx.rows, f64::from_bits(a), &mut out);
            give_back(x, pool);
            Val::Panel(out)
        }
        Node::IndNeutralize(x) => {
            let ids = ctx.group_of.as_deref().ok_or(ExprError::NeedsGroups)?;
            let x = panel(get(x)?, pool, ctx.cells);
            let mut out = take(pool, ctx.cells);
            kernels::cs_neutralize(x.as_ref(), ctx.rows, ids, ctx.groups, &mut out, scratch);
            give_back(x, pool);
            Val::Panel(out)
        }
        Node::Ts(f, x, d) => {
            let x = panel(get(x)?, pool, ctx.cells);
            let mut out = take(pool, ctx.cells);
            for (col, o) in x
                .as_ref()
                .chunks_exact(ctx.rows)
                .zip(out.chunks_exact_mut(ctx.rows))
            {
                kernels::ts(f, col, d, o);
            }
            give_back(x, pool);
            Val::Panel(out)
        }
        Node::Pair(f, a, b, d) => {
            let a = panel(get(a)?, pool, ctx.cells);
            let b = panel(get(b)?, pool, ctx.cells);
            let mut out = take(pool, ctx.cells);
            let cols = a
                .as_ref()
                .chunks_exact(ctx.rows)
                .zip(b.as_ref().chunks_exact(ctx.rows));
            for ((ca, cb), o) in cols.zip(out.chunks_exact_mut(ctx.rows)) {
                kernels::pair(f, ca, cb, d, o);
            }
            give_back(a, pool);
            give_back(b, pool);
            Val::Panel(out)
        }
    })
}

/// A child as a panel: borrowed, or a constant spread over every cell.
enum Cells<'a> {
    Borrowed(&'a [f64]),
    Filled(Vec<f64>),
}

impl AsRef<[f64]> for Cells<'_> {
    fn as_ref(&self) -> &[f64] {
        match self {
            Cells::Borrowed(s) => s,
            Cells::Filled(v) => v,
        }
    }
}

fn panel<'a>(a: Arg<'a>, pool: &mut Vec<Vec<f64>>, cells: usize) -> Cells<'a> {
    match a {
        Arg::P(p) => Cells::Borrowed(p),
        Arg::S(v) => {
            let mut buf = take(pool, cells);
            buf.fill(v);
            Cells::Filled(buf)
        }
    }
}

fn give_back(c: Cells<'_>, pool: &mut Vec<Vec<f64>>) {
    if let Cells::Filled(buf) = c {
        pool.push(buf);
    }
}

/// An input column, transposed to symbol-major.
fn column(c: Col, ctx: &Ctx<'_>, pool: &mut Vec<Vec<f64>>) -> Vec<f64> {
    let p = ctx.panel;
    let src = match c {
        Col::Open => &p.open,
        Col::High => &p.high,
        Col::Low => &p.low,
        Col::Close => &p.close,
        Col::Volume => &p.volume,
    };
    let mut out = take(pool, ctx.cells);
    let (rows, width) = (ctx.rows, p.width());
    for (i, row) in src.chunks_exact(width).enumerate() {
        for (j, v) in row.iter().enumerate() {
            if let Some(slot) = out.get_mut(j * rows + i) {
                *slot = *v;
            }
        }
    }
    out
}

fn to_row_major(p: &[f64], rows: usize, width: usize) -> Vec<f64> {
    let mut out = vec![f64::NAN; p.len()];
    for (j, col) in p.chunks_exact(rows).enumerate() {
        for (i, v) in col.iter().enumerate() {
            if let Some(slot) = out.get_mut(i * width + j) {
                *slot = *v;
            }
        }
    }
    out
}

/// −1, 0 or 1 (NaN stays NaN; `f64::signum` would give 1 for 0).
fn sign(v: f64) -> f64 {
    if v > 0.0 {
        1.0
    } else if v < 0.0 {
        -1.0
    } else {
        v
    }
}

fn map1(a: Arg<'_>, pool: &mut Vec<Vec<f64>>, cells: usize, f: impl Fn(f64) -> f64) -> Val {
    match a {
        Arg::S(v) => Val::Scalar(f(v)),
        Arg::P(p) => {
            let mut out = take(pool, cells);
            for (o, v) in out.iter_mut().zip(p) {
                *o = f(*v);
            }
            Val::Panel(out)
        }
    }
}

fn map2(
    a: Arg<'_>,
    b: Arg<'_>,
    pool: &mut Vec<Vec<f64>>,
    cells: usize,
    f: impl Fn(f64, f64) -> f64,
) -> Val {
    let (pa, pb) = match (a, b) {
        (Arg::S(x), Arg::S(y)) => return Val::Scalar(f(x, y)),
        (Arg::P(p), Arg::S(y)) => return map1(Arg::P(p), pool, cells, |x| f(x, y)),
        (Arg::S(x), Arg::P(p)) => return map1(Arg::P(p), pool, cells, |y| f(x, y)),
        (Arg::P(pa), Arg::P(pb)) => (pa, pb),
    };
    let mut out = take(pool, cells);
    for ((o, x), y) in out.iter_mut().zip(pa).zip(pb) {
        *o = f(*x, *y);
    }
    Val::Panel(out)
}

fn unary(u: UnaryFn, a: Arg<'_>, pool: &mut Vec<Vec<f64>>, cells: usize) -> Val {
    match u {
        UnaryFn::Abs => map1(a, pool, cells, f64::abs),
        // ln(0) = −inf and ln(x<0) = NaN, as numpy.
        UnaryFn::Log => map1(a, pool, cells, f64::ln),
        UnaryFn::Sign => map1(a, pool, cells, sign),
    }
}

/// 1.0 / 0.0 from a test, NaN when either side is NaN.
fn truth(either_nan: bool, t: bool) -> f64 {
    if either_nan {
        f64::NAN
    } else if t {
        1.0
    } else {
        0.0
    }
}

fn binary(op: BinOp, a: Arg<'_>, b: Arg<'_>, pool: &mut Vec<Vec<f64>>, cells: usize) -> Val {
    let n = |x: f64, y: f64| x.is_nan() || y.is_nan();
    match op {
        BinOp::Add => map2(a, b, pool, cells, |x, y| x + y),
        BinOp::Sub => map2(a, b, pool, cells, |x, y| x - y),
        BinOp::Mul => map2(a, b, pool, cells, |x, y| x * y),
        BinOp::Div => map2(a, b, pool, cells, |x, y| x / y),
        BinOp::Pow => map2(a, b, pool, cells, f64::powf),
        BinOp::Lt => map2(a, b, pool, cells, |x, y| truth(n(x, y), x < y)),
        BinOp::Le => map2(a, b, pool, cells, |x, y| truth(n(x, y), x <= y)),
        BinOp::Gt => map2(a, b, pool, cells, |x, y| truth(n(x, y), x > y)),
        BinOp::Ge => map2(a, b, pool, cells, |x, y| truth(n(x, y), x >= y)),
        BinOp::Eq => map2(a, b, pool, cells, |x, y| truth(n(x, y), x == y)),
        BinOp::Ne => map2(a, b, pool, cells, |x, y| truth(n(x, y), x != y)),
        BinOp::And => map2(a, b, pool, cells, |x, y| {
            truth(n(x, y), x != 0.0 && y != 0.0)
        }),
        BinOp::Or => map2(a, b, pool, cells, |x, y| {
            truth(n(x, y), x != 0.0 || y != 0.0)
        }),
        BinOp::Min => map2(
            a,
            b,
            pool,
            cells,
            |x, y| if n(x, y) { f64::NAN } else { x.min(y) },
        ),
        BinOp::Max => map2(
            a,
            b,
            pool,
            cells,
            |x, y| if n(x, y) { f64::NAN } else { x.max(y) },
        ),
    }
}

fn cond(c: Arg<'_>, a: Arg<'_>, b: Arg<'_>, pool: &mut Vec<Vec<f64>>, cells: usize) -> Val {
    let pick = |c: f64, x: f64, y: f64| {
        if c.is_nan() {
            f64::NAN
        } else if c != 0.0 {
            x
        } else {
            y
        }
    };
    if let (Arg::S(c), Arg::S(x), Arg::S(y)) = (&c, &a, &b) {
        return Val::Scalar(pick(*c, *x, *y));
    }
    let at = |a: &Arg<'_>, i: usize| match a {
        Arg::S(v) => *v,
        Arg::P(p) => p.get(i).copied().unwrap_or(f64::NAN),
    };
    let mut out = take(pool, cells);
    for (i, o) in out.iter_mut().enumerate() {
        *o = pick(at(&c, i), at(&a, i), at(&b, i));
    }
    Val::Panel(out)
}
