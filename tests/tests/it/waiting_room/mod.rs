//! The waiting room: joins, admission, presence, access checks, at the origin and through the edge.

mod edge;
mod join_access;
mod join_body;
mod joins;
mod one_admission;
mod origin;
mod outlook;
mod presence;
mod trip;
mod used;
