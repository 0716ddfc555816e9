//! Signed webhooks: the admin API, the CLI, delivery under faults, the reference receiver, code and
//! gift events.

mod admin;
mod claims_first;
mod cli;
mod codes_gifts;
mod faults;
mod receiver;
