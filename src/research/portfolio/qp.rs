//! A dense convex quadratic program solver: Goldfarb and Idnani's dual
//! active-set method (1983), as in Gaspero's QuadProg++ and R's quadprog.
//!
//! ```text
//! minimise ½·xᵀGx + g0ᵀx  subject to  CEᵀx + ce0 = 0,  CIᵀx + ci0 ≥ 0
//! ```
//!
//! `G` must be positive definite (a covariance matrix with more days than
//! assets is). The method starts from the unconstrained minimum and adds
//! the most violated constraint until none is, each step exact, so it ends
//! in finitely many steps on the exact optimum (to rounding) rather than on
//! an interior-point tolerance. The portfolio problems here are small and
//! dense (a few hundred variables at most), where this is the right tool.

// The method is written over indices into J, R and the active set, as in
// the paper; iterators would hide which column a step touches.
#![allow(clippy::needless_range_loop)]

/// What went wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum QpError {
    #[error("the matrix is not positive definite (pivot {index})")]
    NotPositiveDefinite { index: usize },
    #[error("the equality constraints are linearly dependent")]
    DependentEqualities,
    #[error("the constraints cannot all hold")]
    Infeasible,
    #[error("no optimum after {0} steps")]
    TooManySteps(usize),
    #[error(transparent)]
    Interrupted(#[from] crate::research::Interrupted),
}

/// Constraints as normal vectors (each of length n) and offsets.
#[derive(Clone, Debug, Default)]
pub(crate) struct Constraints {
    pub normals: Vec<Vec<f64>>,
    pub offsets: Vec<f64>,
}

impl Constraints {
    /// Adds `normal · x + offset (= or ≥) 0`.
    pub(crate) fn push(&mut self, normal: Vec<f64>, offset: f64) {
        self.normals.push(normal);
        self.offsets.push(offset);
    }

    fn len(&self) -> usize {
        self.normals.len()
    }
}

/// The minimiser `x`.
pub(crate) fn solve(
    n: usize,
    g: &[f64],
    g0: &[f64],
    eq: &Constraints,
    ineq: &Constraints,
) -> Result<Vec<f64>, QpError> {
    let mut s = Solver::new(n, g, g0)?;
    for i in 0..eq.len() {
        s.add_equality(i, &eq.normals[i], eq.offsets[i])?;
    }
    s.run(ineq)?;
    Ok(s.x)
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The solver's state; matrices are n×n, row-major.
struct Solver {
    n: usize,
    /// J = L⁻ᵀ rotated as constraints come and go (QᵀL⁻ᵀ of the paper).
    j: Vec<f64>,
    /// The upper-triangular R of the active constraints' factorisation.
    r: Vec<f64>,
    r_norm: f64,
    x: Vec<f64>,
    /// Active constraints: equalities as −(i+1), inequalities by index.
    active: Vec<isize>,
    /// Their multipliers.
    u: Vec<f64>,
    iq: usize,
    c1c2: f64,
}

impl Solver {
    /// Factorises G and starts from the unconstrained minimum −G⁻¹g0.
    fn new(n: usize, g: &[f64], g0: &[f64]) -> Result<Self, QpError> {
        let l = cholesky(n, g)?;
        let c1: f64 = (0..n).map(|i| g[i * n + i]).sum();
        // J = L⁻ᵀ: row i of J is L⁻¹eᵢ.
        let mut j = vec![0.0; n * n];
        let mut c2 = 0.0;
        for i in 0..n {
            let mut e = vec![0.0; n];
            e[i] = 1.0;
            let z = forward(n, &l, &e);
            c2 += z[i];
            j[i * n..(i + 1) * n].copy_from_slice(&z);
        }
        let y = forward(n, &l, g0);
        let x: Vec<f64> = backward(n, &l, &y).iter().map(|v| -v).collect();
        Ok(Solver {
            n,
            j,
            r: vec![0.0; n * n],
            r_norm: 1.0,
            x,
            active: Vec::new(),
            u: Vec::new(),
            iq: 0,
            c1c2: c1 * c2,
        })
    }

    /// d = Jᵀ·np.
    fn compute_d(&self, np: &[f64]) -> Vec<f64> {
        let n = self.n;
        let mut d = vec![0.0; n];
        for (k, npk) in np.iter().enumerate() {
            if *npk == 0.0 {
                continue;
            }
            let row = &self.j[k * n..(k + 1) * n];
            for (di, jk) in d.iter_mut().zip(row) {
                *di += jk * npk;
            }
        }
        d
    }

    /// z = J[:, iq..]·d[iq..]: the primal step direction.
    fn update_z(&self, d: &[f64]) -> Vec<f64> {
        let n = self.n;
        (0..n)
            .map(|i| dot(&self.j[i * n + self.iq..(i + 1) * n], &d[self.iq..]))
            .collect()
    }

    /// r = R⁻¹·d[..iq]: the dual step direction.
    fn update_r(&self, d: &[f64]) -> Vec<f64> {
        let n = self.n;
        let mut r = vec![0.0; self.iq];
        for i in (0..self.iq).rev() {
            let sum: f64 = (i + 1..self.iq).map(|k| self.r[i * n + k] * r[k]).sum();
            r[i] = (d[i] - sum) / self.r[i * n + i];
        }
        r
    }

    fn add_equality(&mut self, i: usize, np: &[f64], offset: f64) -> Result<(), QpError> {
        let mut d = self.compute_d(np);
        let z = self.update_z(&d);
        let r = self.update_r(&d);
        let zn = dot(&z, np);
        let t2 = if dot(&z, &z).abs() > f64::EPSILON {
            (-dot(np, &self.x) - offset) / zn
        } else {
            0.0
        };
        for (x, zi) in self.x.iter_mut().zip(&z) {
            *x += t2 * zi;
        }
        for (k, rk) in r.iter().enumerate() {
            self.u[k] -= t2 * rk;
        }
        self.u.push(t2);
        self.active.push(-(i as isize) - 1);
        if !self.add_constraint(&mut d) {
            return Err(QpError::DependentEqualities);
        }
        Ok(())
    }

    /// Givens rotations zero d[iq+1..]; d[..=iq] becomes R's new column.
    fn add_constraint(&mut self, d: &mut [f64]) -> bool {
        let n = self.n;
        for jj in (self.iq + 1..n).rev() {
            let (mut cc, mut ss) = (d[jj - 1], d[jj]);
            let h = cc.hypot(ss);
            if h == 0.0 {
                continue;
            }
            d[jj] = 0.0;
            ss /= h;
            cc /= h;
            if cc < 0.0 {
                cc = -cc;
                ss = -ss;
                d[jj - 1] = -h;
            } else {
                d[jj - 1] = h;
            }
            let xny = ss / (1.0 + cc);
            for k in 0..n {
                let t1 = self.j[k * n + jj - 1];
                let t2 = self.j[k * n + jj];
                let a = t1 * cc + t2 * ss;
                self.j[k * n + jj - 1] = a;
                self.j[k * n + jj] = xny * (t1 + a) - t2;
            }
        }
        self.iq += 1;
        for i in 0..self.iq {
            self.r[i * n + self.iq - 1] = d[i];
        }
        let last = d[self.iq - 1].abs();
        if last <= f64::EPSILON * self.r_norm {
            return false;
        }
        self.r_norm = self.r_norm.max(last);
        true
    }

    /// Drops active constraint `l` (an inequality index) and restores R's
    /// triangle with Givens rotations.
    fn delete_constraint(&mut self, p: usize, l: isize) {
        let n = self.n;
        let Some(qq) = (p..self.iq).find(|&i| self.active[i] == l) else {
            return;
        };
        for i in qq..self.iq - 1 {
            self.active[i] = self.active[i + 1];
            self.u[i] = self.u[i + 1];
            for k in 0..n {
                self.r[k * n + i] = self.r[k * n + i + 1];
            }
        }
        // The slot past the active set holds the constraint being added.
        self.active[self.iq - 1] = self.active[self.iq];
        self.u[self.iq - 1] = self.u[self.iq];
        self.active[self.iq] = 0;
        self.u[self.iq] = 0.0;
        for k in 0..self.iq {
            self.r[k * n + self.iq - 1] = 0.0;
        }
        self.iq -= 1;
        if self.iq == 0 {
            return;
        }
        for jj in qq..self.iq {
            let (mut cc, mut ss) = (self.r[jj * n + jj], self.r[(jj + 1) * n + jj]);
            let h = cc.hypot(ss);
            if h == 0.0 {
                continue;
            }
            cc /= h;
            ss /= h;
            self.r[(jj + 1) * n + jj] = 0.0;
            if cc < 0.0 {
                self.r[jj * n + jj] = -h;
                cc = -cc;
                ss = -ss;
            } else {
                self.r[jj * n + jj] = h;
            }
            let xny = ss / (1.0 + cc);
            for k in jj + 1..self.iq {
                let t1 = self.r[jj * n + k];
                let t2 = self.r[(jj + 1) * n + k];
                let a = t1 * cc + t2 * ss;
                self.r[jj * n + k] = a;
                self.r[(jj + 1) * n + k] = xny * (t1 + a) - t2;
            }
            for k in 0..n {
                let t1 = self.j[k * n + jj];
                let t2 = self.j[k * n + jj + 1];
                let a = t1 * cc + t2 * ss;
                self.j[k * n + jj] = a;
                self.j[k * n + jj + 1] = xny * (a + t1) - t2;
            }
        }
    }

    /// The dual loop over the inequalities (steps 1 and 2 of the paper).
    fn run(&mut self, ci: &Constraints) -> Result<(), QpError> {
        let (p, m) = (self.iq, ci.len());
        let max_steps = 50 * (self.n + m) + 100;
        let mut steps = 0;
        // Slack of each inequality at x, refreshed at each step 1.
        let mut s = vec![0.0; m];
        // Excluded for this round (a degenerate add).
        let mut excluded = vec![false; m];
        let mut snapshot = Snapshot::default();
        'step1: loop {
            excluded.iter_mut().for_each(|e| *e = false);
            let mut psi = 0.0;
            for i in 0..m {
                s[i] = dot(&ci.normals[i], &self.x) + ci.offsets[i];
                psi += s[i].min(0.0);
            }
            if psi.abs() <= m as f64 * f64::EPSILON * self.c1c2 * 100.0 {
                return Ok(());
            }
            snapshot.take(self);
            'step2: loop {
                // A step is O(n²) (docs §2.4).
                crate::research::checkpoint()?;
                steps += 1;
                if steps > max_steps {
                    return Err(QpError::TooManySteps(max_steps));
                }
                let is_active = |i: usize, me: &Solver| me.active[p..me.iq].contains(&(i as isize));
                let mut worst = 0.0;
                let mut ip = usize::MAX;
                for i in 0..m {
                    if s[i] < worst && !excluded[i] && !is_active(i, self) {
                        worst = s[i];
                        ip = i;
                    }
                }
                if ip == usize::MAX {
                    return Ok(());
                }
                let np = &ci.normals[ip];
                self.u.truncate(self.iq);
                self.u.push(0.0);
                self.active.truncate(self.iq);
                self.active.push(ip as isize);
                loop {
                    // Step 2a: the directions.
                    let mut d = self.compute_d(np);
                    let z = self.update_z(&d);
                    let r = self.update_r(&d);
                    // Step 2b: the partial (dual) and full (primal) steps.
                    let mut t1 = f64::INFINITY;
                    let mut l = 0isize;
                    for k in p..self.iq {
                        if r[k] > 0.0 && self.u[k] / r[k] < t1 {
                            t1 = self.u[k] / r[k];
                            l = self.active[k];
                        }
                    }
                    let zn = dot(&z, np);
                    let t2 = if dot(&z, &z).abs() > f64::EPSILON {
                        -s[ip] / zn
                    } else {
                        f64::INFINITY
                    };
                    let t = t1.min(t2);
                    if t.is_infinite() {
                        return Err(QpError::Infeasible);
                    }
                    for k in 0..self.iq {
                        self.u[k] -= t * r[k];
                    }
                    self.u[self.iq] += t;
                    if t2.is_infinite() {
                        // A step in the dual space only.
                        self.delete_constraint(p, l);
                        continue;
                    }
                    for (x, zi) in self.x.iter_mut().zip(&z) {
                        *x += t * zi;
                    }
                    if t2 <= t1 {
                        // The full step: ip joins the active set.
                        if self.add_constraint(&mut d) {
                            continue 'step1;
                        }
                        // Degenerate: back to this round's start, and
                        // try another constraint.
                        excluded[ip] = true;
                        snapshot.restore(self);
                        for i in 0..m {
                            s[i] = dot(&ci.normals[i], &self.x) + ci.offsets[i];
                        }
                        continue 'step2;
                    }
                    // A partial step: drop l and keep going towards ip.
                    self.delete_constraint(p, l);
                    s[ip] = dot(np, &self.x) + ci.offsets[ip];
                }
            }
        }
    }
}

/// The state at a round's start, for undoing a degenerate add (QuadProg++
/// restores the active set but not J and R; this restores all of it).
#[derive(Default)]
struct Snapshot {
    x: Vec<f64>,
    u: Vec<f64>,
    active: Vec<isize>,
    iq: usize,
    j: Vec<f64>,
    r: Vec<f64>,
    r_norm: f64,
}

impl Snapshot {
    fn take(&mut self, s: &Solver) {
        self.x.clone_from(&s.x);
        self.u.clone_from(&s.u);
        self.active.clone_from(&s.active);
        self.iq = s.iq;
        self.j.clone_from(&s.j);
        self.r.clone_from(&s.r);
        self.r_norm = s.r_norm;
    }

    fn restore(&self, s: &mut Solver) {
        s.x.clone_from(&self.x);
        s.u.clone_from(&self.u);
        s.active.clone_from(&self.active);
        s.iq = self.iq;
        s.j.clone_from(&self.j);
        s.r.clone_from(&self.r);
        s.r_norm = self.r_norm;
    }
}

/// The lower Cholesky factor of the n×n matrix `a` (row-major).
pub(crate) fn cholesky(n: usize, a: &[f64]) -> Result<Vec<f64>, QpError> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for k in 0..=i {
            let sum = a[i * n + k] - dot(&l[i * n..i * n + k], &l[k * n..k * n + k]);
            if i == k {
                if sum.is_nan() || sum <= 0.0 {
                    return Err(QpError::NotPositiveDefinite { index: i });
                }
                l[i * n + i] = sum.sqrt();
            } else {
                l[i * n + k] = sum / l[k * n + k];
            }
        }
    }
    Ok(l)
}

/// Solves L·y = b.
pub(crate) fn forward(n: usize, l: &[f64], b: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; n];
    for i in 0..n {
        y[i] = (b[i] - dot(&l[i * n..i * n + i], &y[..i])) / l[i * n + i];
    }
    y
}

/// Solves Lᵀ·x = y.
pub(crate) fn backward(n: usize, l: &[f64], y: &[f64]) -> Vec<f64> {
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let sum: f64 = (i + 1..n).map(|k| l[k * n + i] * x[k]).sum();
        x[i] = (y[i] - sum) / l[i * n + i];
    }
    x
}
