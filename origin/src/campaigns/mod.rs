//! Campaigns: the stored row, its queries, this origin's short-lived cache of it, and the
//! campaign index served to the edge.

pub mod cache;
pub mod index;
pub mod store;

pub use cache::CampaignCache;
pub use store::CampaignRow;
