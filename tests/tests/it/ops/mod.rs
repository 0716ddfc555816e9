//! What operators run and watch: migrations, `/readyz`, metrics, the dashboard, clean-up after a
//! sale, the capacity plan, TLS services.

mod cleanup_after_sale;
mod grafana_dashboard;
mod metrics_scrape;
mod migrations_pooler;
mod plan_cli;
mod readyz;
mod tls_services;
