//! Settings of gift fulfilment (`flashgate serve --help` lists them with their env vars).

/// Gift fulfilment settings, part of [`crate::config::Config`].
#[derive(Debug, Clone, clap::Args)]
pub struct GiftSettings {
    /// Base URL of the mobile-credit provider (e.g. the simulator, `http://127.0.0.1:7070`).
    /// Unset: grants stay `pending` in the outbox and no relay runs on this origin.
    #[arg(long, env = "FLASHGATE_GIFT_PROVIDER_URL")]
    pub gift_provider_url: Option<String>,

    /// How long the relay waits for one provider call before counting it a timeout.
    #[arg(
        long,
        env = "FLASHGATE_GIFT_PROVIDER_TIMEOUT_MS",
        default_value_t = 2_000
    )]
    pub gift_provider_timeout_ms: u64,

    /// Provider calls per fulfilment before it is marked `failed` (a manager may retry it).
    #[arg(
        long,
        env = "FLASHGATE_GIFT_DELIVERY_MAX_ATTEMPTS",
        default_value_t = 8
    )]
    pub gift_delivery_max_attempts: i32,

    /// Delay before the first retry; each next retry waits twice as long (at most 5 minutes).
    #[arg(long, env = "FLASHGATE_GIFT_RETRY_BASE_MS", default_value_t = 500)]
    pub gift_retry_base_ms: u64,

    /// How often the outbox relay looks for due provider calls.
    #[arg(long, env = "FLASHGATE_GIFT_RELAY_INTERVAL_MS", default_value_t = 200)]
    pub gift_relay_interval_ms: u64,

    /// Most outbox rows one relay pass takes (they are called concurrently).
    #[arg(long, env = "FLASHGATE_GIFT_RELAY_BATCH", default_value_t = 64)]
    pub gift_relay_batch: i64,

    /// TEST ONLY: the campaign clock reads `gift_test_clock.now_at` of the campaign when set
    /// (tests move time without sleeping). Never turn on in production.
    #[arg(long, env = "FLASHGATE_GIFT_TEST_CLOCK", default_value_t = false)]
    pub gift_test_clock: bool,
}
