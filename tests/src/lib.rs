//! Test support shared by the integration tests, and the stampede load generator.
pub mod fuzz;
pub mod gifts;
pub mod history;
pub mod idp;
pub mod stampede;
pub mod support;
pub mod webhooks;
