//! The HTTP server (placeholder until the suite lands in this commit series).
