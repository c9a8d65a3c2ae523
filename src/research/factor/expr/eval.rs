//! The evaluator.

use super::{Expr, ExprError, Groups, OhlcvPanel};

/// Evaluates every expression on the panel: one row-major date × symbol
/// panel per expression, in order.
pub fn evaluate(
    exprs: &[Expr],
    panel: &OhlcvPanel,
    groups: Option<&Groups>,
) -> Result<Vec<Vec<f64>>, ExprError> {
    let cells = panel.check_shape()?;
    if groups.is_none() && exprs.iter().any(Expr::needs_groups) {
        return Err(ExprError::NeedsGroups);
    }
    Ok(exprs.iter().map(|_| vec![f64::NAN; cells]).collect())
}
