//! Draw campaigns: entries, the published draw, the buying window, and the draw's routes through
//! the edge.

mod edge;
mod origin;
mod window;
