//! Campaigns with variants: admin, claims, the audit, the feed, the edge, winners' retries
//! through the edge, the waiting room, webhooks.

mod admin;
mod audit;
mod claims;
mod edge;
mod feed;
mod replays;
mod stampede;
mod waiting_room;
mod webhooks;
