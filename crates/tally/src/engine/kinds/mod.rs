//! The kinds of value kept per slice, one module each: its math, its merge
//! rule and its pure encoding, nothing else.

pub mod sum;
