//! Draw campaigns: entries, the published draw, the buying window, a manager's changes to a
//! draw, and the draw's routes through the edge.

mod changes;
mod edge;
mod origin;
mod reveal;
mod window;
