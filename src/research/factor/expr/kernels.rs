//! Column kernels of the evaluator.
