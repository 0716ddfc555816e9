//! Campaigns: the stored row, its queries, and this origin's short-lived cache of it.

pub mod cache;
pub mod store;

pub use cache::CampaignCache;
pub use store::CampaignRow;
