//! Settings of the webhooks (`flashgate serve --help` lists them with their env vars).

/// Webhook settings, part of [`crate::config::Config`].
#[derive(Debug, Clone, clap::Args)]
pub struct WebhookSettings {
    /// Allow endpoints on plain `http://` and on loopback, private, link-local or metadata
    /// addresses (tests and on-premise setups). Off: only `https://` to public addresses.
    #[arg(long, env = "FLASHGATE_WEBHOOK_ALLOW_PRIVATE", default_value_t = false)]
    pub webhook_allow_private: bool,

    /// How often the webhook relay looks for due deliveries (also while calls are in flight).
    #[arg(
        long,
        env = "FLASHGATE_WEBHOOK_RELAY_INTERVAL_MS",
        default_value_t = 200
    )]
    pub webhook_relay_interval_ms: u64,

    /// Most deliveries in flight at once on this origin, all endpoints together (at most 16
    /// per endpoint).
    #[arg(long, env = "FLASHGATE_WEBHOOK_RELAY_BATCH", default_value_t = 64)]
    pub webhook_relay_batch: i64,

    /// How long the webhook relay gives way to a burst of claims on its origin, in
    /// milliseconds: while claims are in flight it starts no new call, for up to this long per
    /// busy spell (a longer spell gets it back at full pace). 0: never gives way.
    #[arg(
        long,
        env = "FLASHGATE_WEBHOOK_RELAY_YIELD_MS",
        default_value_t = 5_000
    )]
    pub webhook_relay_yield_ms: u64,

    /// How long the previous secret keeps signing after a rotation, in seconds.
    #[arg(
        long,
        env = "FLASHGATE_WEBHOOK_ROTATION_OVERLAP_SECONDS",
        default_value_t = 86_400
    )]
    pub webhook_rotation_overlap_seconds: i64,

    /// TEST ONLY: the retry schedule's delays (5 s … 24 h) are divided by this. 1 in
    /// production.
    #[arg(long, env = "FLASHGATE_WEBHOOK_RETRY_DIVISOR", default_value_t = 1)]
    pub webhook_retry_divisor: u32,
}
