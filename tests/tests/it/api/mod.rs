//! The public API's answers to what a client may send: bad input, odd fields, retries, slow
//! clients, customer tokens, caching, and the OpenAPI document.

mod bad_input;
mod customer_tokens;
mod fuzz_fields;
mod idempotent_retries;
mod openapi;
mod private_answers;
mod slow_clients;
