//! The admin API and the `flashgate admin` CLI: roles, campaign changes, times, series, toggles at
//! the edge.

mod api;
mod campaign_times;
mod cli;
mod cli_access;
mod edge_toggles;
mod series;
