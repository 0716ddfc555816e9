//! A mobile-credit provider simulator speaking the provider contract of
//! [`flashgate_shared::api::gifts::provider`]:
//!
//! - `POST /v1/credits` with `Idempotency-Key` and `{msisdn, amount, currency}` → 200
//!   `{credit_id, replayed}`. Its ledger keeps one credit per key: the same key again credits
//!   nothing and answers the first receipt (`replayed: true`); the same key with another body is
//!   422. A missing key is 400, a body that is not the contract 422.
//! - `GET /v1/credits` → the ledger: every key with its credit and how many calls it got.
//!
//! Faults are injected per call at random with the configured rates ([`Faults`]), checked in
//! this order: **timeout** (nothing credited; the answer comes after `hang_ms`, a 504, long
//! after the caller gave up), **5xx** (nothing credited; 503 at once), **accept then time out**
//! (credited, then the 200 comes after `hang_ms`: the credit happened but the caller sees a
//! timeout). The rest are answered at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use flashgate_shared::api::gifts::provider::{CreditReceipt, CreditRequest, CREDITS_PATH};
use serde::Serialize;

/// Fault injection rates (each 0.0..=1.0; their sum at most 1) and the hang of a timeout.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct Faults {
    /// Share of calls that hang `hang_ms` and credit nothing.
    #[arg(long, env = "PROVIDER_SIM_TIMEOUT_RATE", default_value_t = 0.0)]
    pub timeout_rate: f64,
    /// Share of calls answered 503 at once, crediting nothing.
    #[arg(long, env = "PROVIDER_SIM_ERROR_RATE", default_value_t = 0.0)]
    pub error_rate: f64,
    /// Share of calls that credit, then hang `hang_ms` before answering.
    #[arg(
        long,
        env = "PROVIDER_SIM_ACCEPT_THEN_TIMEOUT_RATE",
        default_value_t = 0.0
    )]
    pub accept_then_timeout_rate: f64,
    /// How long a hanging call waits before answering, in milliseconds.
    #[arg(long, env = "PROVIDER_SIM_HANG_MS", default_value_t = 5_000)]
    pub hang_ms: u64,
}

impl Faults {
    /// No fault: the declared defaults (environment variables are not read).
    pub fn none() -> Self {
        flashgate_shared::settings::from_declarations(&[]).expect("the defaults parse")
    }
}

/// One credit of the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Credit {
    /// The caller's idempotency key.
    pub key: String,
    /// The simulator's reference.
    pub credit_id: String,
    /// The credited subscriber.
    pub msisdn: String,
    /// Minor units of `currency`.
    pub amount: i64,
    /// ISO 4217 code.
    pub currency: String,
    /// Calls made with this key (faulty ones included).
    pub calls: u64,
}

/// The ledger as `GET /v1/credits` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct LedgerView {
    /// Keys credited (each once).
    pub count: usize,
    /// Every credit, in key order.
    pub credits: Vec<Credit>,
    /// Every call received.
    pub calls: u64,
    /// Timeouts injected (nothing credited).
    pub timeouts: u64,
    /// 5xx answers injected (nothing credited).
    pub errors: u64,
    /// Accept-then-timeout faults injected (credited, reply late).
    pub accept_then_timeouts: u64,
}

#[derive(Default)]
struct Book {
    credits: HashMap<String, (CreditRequest, Credit)>,
    /// Calls per key, faulty or not, credited or not.
    calls: HashMap<String, u64>,
    all_calls: u64,
    timeouts: u64,
    errors: u64,
    accept_then_timeouts: u64,
}

/// The simulator: its faults and its ledger.
#[derive(Clone)]
pub struct Simulator {
    faults: Arc<Mutex<Faults>>,
    book: Arc<Mutex<Book>>,
}

enum Fault {
    None,
    Timeout,
    Error,
    AcceptThenTimeout,
}

impl Simulator {
    /// A simulator with `faults`.
    pub fn new(faults: Faults) -> Self {
        Simulator {
            faults: Arc::new(Mutex::new(faults)),
            book: Arc::default(),
        }
    }

    /// Changes the faults of the calls to come.
    pub fn set_faults(&self, faults: Faults) {
        *self.faults.lock().expect("faults lock") = faults;
    }

    fn faults(&self) -> Faults {
        *self.faults.lock().expect("faults lock")
    }

    /// Its routes.
    pub fn router(&self) -> Router {
        Router::new()
            .route(CREDITS_PATH, post(credit).get(ledger))
            .with_state(self.clone())
    }

    /// The ledger now.
    pub fn ledger(&self) -> LedgerView {
        let book = self.book.lock().expect("ledger lock");
        let mut credits: Vec<Credit> = book
            .credits
            .values()
            .map(|(_, c)| Credit {
                calls: book.calls.get(&c.key).copied().unwrap_or(0),
                ..c.clone()
            })
            .collect();
        credits.sort_by(|a, b| a.key.cmp(&b.key));
        LedgerView {
            count: credits.len(),
            credits,
            calls: book.all_calls,
            timeouts: book.timeouts,
            errors: book.errors,
            accept_then_timeouts: book.accept_then_timeouts,
        }
    }

    fn roll(&self) -> Fault {
        let r: f64 = rand::random();
        let f = &self.faults();
        if r < f.timeout_rate {
            Fault::Timeout
        } else if r < f.timeout_rate + f.error_rate {
            Fault::Error
        } else if r < f.timeout_rate + f.error_rate + f.accept_then_timeout_rate {
            Fault::AcceptThenTimeout
        } else {
            Fault::None
        }
    }

    /// Credits `req` under `key` once; `None` when the key was credited with another body.
    fn book_credit(&self, key: &str, req: &CreditRequest) -> Option<CreditReceipt> {
        let mut book = self.book.lock().expect("ledger lock");
        if let Some((first, c)) = book.credits.get(key) {
            return (first == req).then(|| CreditReceipt {
                credit_id: c.credit_id.clone(),
                replayed: true,
            });
        }
        let credit_id = format!("cr-{}", book.credits.len() + 1);
        book.credits.insert(
            key.to_string(),
            (
                req.clone(),
                Credit {
                    key: key.to_string(),
                    credit_id: credit_id.clone(),
                    msisdn: req.msisdn.clone(),
                    amount: req.amount,
                    currency: req.currency.clone(),
                    calls: 0,
                },
            ),
        );
        Some(CreditReceipt {
            credit_id,
            replayed: false,
        })
    }
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(serde_json::json!({ "message": message }))).into_response()
}

async fn credit(State(sim): State<Simulator>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(key) = headers
        .get(flashgate_shared::IDEMPOTENCY_KEY_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|k| !k.is_empty())
        .map(str::to_string)
    else {
        return error(StatusCode::BAD_REQUEST, "Idempotency-Key is required");
    };
    let Ok(req) = serde_json::from_slice::<CreditRequest>(&body) else {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "body is not a credit request",
        );
    };
    let fault = sim.roll();
    {
        let mut book = sim.book.lock().expect("ledger lock");
        book.all_calls += 1;
        *book.calls.entry(key.clone()).or_default() += 1;
        match fault {
            Fault::Timeout => book.timeouts += 1,
            Fault::Error => book.errors += 1,
            Fault::AcceptThenTimeout => book.accept_then_timeouts += 1,
            Fault::None => {}
        }
    }
    let hang = Duration::from_millis(sim.faults().hang_ms);
    match fault {
        Fault::Timeout => {
            tokio::time::sleep(hang).await;
            error(StatusCode::GATEWAY_TIMEOUT, "timed out")
        }
        Fault::Error => error(StatusCode::SERVICE_UNAVAILABLE, "try again later"),
        Fault::AcceptThenTimeout | Fault::None => {
            let Some(receipt) = sim.book_credit(&key, &req) else {
                return error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "this Idempotency-Key was used with another credit",
                );
            };
            if matches!(fault, Fault::AcceptThenTimeout) {
                tokio::time::sleep(hang).await;
            }
            Json(receipt).into_response()
        }
    }
}

async fn ledger(State(sim): State<Simulator>) -> Response {
    Json(sim.ledger()).into_response()
}

/// A simulator listening on `addr` (port 0: any), served on a task of its own.
pub struct Running {
    /// `http://host:port`.
    pub url: String,
    /// The simulator, to read its ledger.
    pub sim: Simulator,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops serving.
    pub fn stop(self) {
        self.task.abort();
    }
}

/// Starts a simulator with `faults` on `addr`. Errors: the address cannot be bound.
pub async fn spawn(addr: std::net::SocketAddr, faults: Faults) -> anyhow::Result<Running> {
    let sim = Simulator::new(faults);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let url = format!("http://{}", listener.local_addr()?);
    let app = sim.router();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(Running { url, sim, task })
}
