//! Gift campaigns: fulfilment exactly once, frequency caps, delivery through the provider, bad
//! input.

mod bad_input;
mod caps;
mod delivery;
mod exactly_once;
