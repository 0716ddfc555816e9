//! Campaigns with variants: admin, claims, the audit, the feed, the edge, the waiting room,
//! webhooks.

mod admin;
mod audit;
mod claims;
mod edge;
mod feed;
mod stampede;
mod waiting_room;
mod webhooks;
