//! Tokens of a factor expression.
