//! The end-of-run lookups of a recorded stampede: customers who tried but never got a 201 ask
//! `GET /api/v1/campaigns/{id}/claims/mine`, and every answer goes into the history, so the
//! checker can tell a claim its customer can find from an acknowledged-but-lost winner.

use std::collections::HashSet;
use std::time::Duration;

use futures::stream::{self, StreamExt};

use super::record::OpKind;
use super::writer::{Answer, Recorder};

/// Attempts per lookup: a 503, 502/504 or transport error is retried after [`PAUSE`].
pub const ATTEMPTS: u32 = 5;
/// Pause between two attempts of one lookup.
pub const PAUSE: Duration = Duration::from_millis(300);

/// Who is looked up: `tried` (customer ids that sent a claim) minus `won` (those answered 201);
/// when `with_claims` is given (the PostgreSQL read-back ran), only those who have a claim
/// there (anyone else has none to find, and a 404 would prove nothing). Sorted.
pub fn who(
    tried: &HashSet<String>,
    won: &HashSet<String>,
    with_claims: Option<&HashSet<String>>,
) -> Vec<String> {
    let mut list: Vec<String> = tried
        .iter()
        .filter(|c| !won.contains(*c))
        .filter(|c| with_claims.is_none_or(|w| w.contains(*c)))
        .cloned()
        .collect();
    list.sort_unstable();
    list
}

/// Looks up every customer of `customers` (`auth(c)`: her `Authorization` value) at `target`,
/// `concurrency` at a time, recording each attempt. Returns the number of lookups.
pub async fn record_all(
    http: &reqwest::Client,
    target: &str,
    recorder: &Recorder,
    customers: &[String],
    auth: impl Fn(&str) -> Option<String>,
    concurrency: usize,
) -> u64 {
    let url = format!(
        "{}/api/v1/campaigns/{}/claims/mine",
        target.trim_end_matches('/'),
        recorder.campaign()
    );
    let jobs: Vec<(String, String)> = customers
        .iter()
        .filter_map(|c| auth(c).map(|a| (c.clone(), a)))
        .collect();
    let n = jobs.len() as u64;
    stream::iter(jobs)
        .for_each_concurrent(concurrency.max(1), |(customer, token)| {
            let url = url.clone();
            async move { lookup(http, &url, recorder, &customer, &token).await }
        })
        .await;
    n
}

async fn lookup(http: &reqwest::Client, url: &str, rec: &Recorder, customer: &str, token: &str) {
    claims_mine(http, url, token, Some((rec, customer))).await;
}

/// `GET url` (a campaign's `/claims/mine`) as the bearer of `token`, [`ATTEMPTS`] times at
/// most: a 503, 502/504 or transport error is retried after [`PAUSE`]. With `record`, every
/// attempt is written to the history as a `lookup` of that customer. Returns the last answer.
pub async fn claims_mine(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    record: Option<(&Recorder, &str)>,
) -> Answer {
    let mut attempt = 1;
    loop {
        let sent_at = chrono::Utc::now();
        let resp = http
            .get(url)
            .header(reqwest::header::AUTHORIZATION, token)
            .send()
            .await;
        let answer = match resp {
            Ok(r) => {
                let mut a = Answer::from_headers(&r);
                match r.bytes().await {
                    Ok(b) => {
                        a.body = b.to_vec();
                        a
                    }
                    Err(e) => Answer::failed(format!("reading the body: {e}")),
                }
            }
            Err(e) => Answer::failed(e),
        };
        let again = matches!(answer.status, None | Some(502..=504));
        if let Some((rec, customer)) = record {
            rec.record(OpKind::Lookup, customer, None, sent_at, answer.clone());
        }
        if !again || attempt == ATTEMPTS {
            return answer;
        }
        attempt += 1;
        tokio::time::sleep(PAUSE).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(xs: &[&str]) -> HashSet<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn losers_with_claims_are_looked_up() {
        let tried = set(&["c1", "c2", "c3", "c4"]);
        let won = set(&["c1"]);
        assert_eq!(who(&tried, &won, None), ["c2", "c3", "c4"]);
        assert_eq!(who(&tried, &won, Some(&set(&["c1", "c3"]))), ["c3"]);
    }
}
