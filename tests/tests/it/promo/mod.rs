//! Promo codes: the code service, its concurrency, and its admin API.

mod admin;
mod concurrency;
mod service;
