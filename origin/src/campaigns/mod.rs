//! Campaigns: the stored row, its queries, its variants, this origin's short-lived cache of it, and the
//! campaign index and winners filters served to the edge.

pub mod cache;
pub mod index;
pub mod store;
pub mod variants;
pub mod winners;

pub use cache::CampaignCache;
pub use store::CampaignRow;
