//! The edge worker in workerd in front of a real origin: what it answers itself, what it passes on,
//! and how.

mod client_ip_and_secrets;
mod clock_offset;
mod pass_through;
mod requests;
mod resend;
mod shield;
mod tokens;
mod winners_retry;
mod workerd;
