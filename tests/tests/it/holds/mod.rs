//! Sale holds: pay, release, extend, expiry by the sweeper, and the second wave.

mod edge_second_wave;
mod extension;
mod lifecycle;
mod release_answers;
