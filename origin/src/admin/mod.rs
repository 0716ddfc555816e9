//! Campaign management: admin tokens with roles ([`roles`]), the toggles managers apply to a
//! running campaign (pause, resume, close, restock, set stock, move the end) each as one atomic
//! SQL statement with its audit row ([`toggles`]), the audit trail ([`audit`]) and the live
//! counts the admin API and dashboard show ([`views`]), the per-second series the
//! dashboard draws ([`series`]) and the edge's answers in it ([`edge_answers`]).

pub mod audit;
pub mod edge_answers;
pub mod roles;
pub mod series;
pub mod time;
pub mod toggles;
pub mod views;

pub use roles::{Admin, Role};
