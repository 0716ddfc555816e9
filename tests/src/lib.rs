//! Test support shared by the integration tests, the chaos tools (`check_history`,
//! `fault_proxy`) and flashgate-bench (the stampede records its `history`; the benches run the
//! origin in-process with `support`).
pub mod fuzz;
pub mod gifts;
pub mod history;
pub mod idp;
pub mod support;
pub mod webhooks;
