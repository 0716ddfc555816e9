//! Draw campaigns (`access: "draw"`): customers enter during an entry window, the origin draws
//! when it closes, and the result is published with the seed committed to at creation.
//!
//! - [`store`]: the `draws` and `draw_entries` tables (the draw's row, entries, the result);
//! - [`admit`]: the buying window: winners' admission tokens, lapsed winners' units passed
//!   to the waitlist;
//! - [`run`]: the draw itself (one transaction per campaign) and the task that runs each draw
//!   when its entry window closes.
//!
//! The rules of the draw (commitment, order, winners, digest) are the shared crate's
//! [`flashgate_shared::draw`], so that `flashgate draw verify` recomputes them exactly.

pub mod admit;
pub mod run;
pub mod store;
