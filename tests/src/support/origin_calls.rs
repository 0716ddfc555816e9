//! The origin's campaign fixtures and customer calls of [`TestOrigin`]: campaigns created
//! through the admin API, claims (plain and signed as the edge forwards them), joins, and the
//! checks the tests read back (status, remaining, claim rows).

use super::*;

impl TestOrigin {
    /// Creates an active campaign (started a minute ago, ends in an hour) and returns its id.
    pub async fn campaign(&self, kind: &str, stock: i64) -> String {
        let id = unique(kind);
        let now = Utc::now();
        self.create_campaign(
            &id,
            kind,
            stock,
            now - Duration::minutes(1),
            now + Duration::hours(1),
            None,
        )
        .await;
        id
    }

    /// Creates a campaign through the admin API; panics unless 201.
    pub async fn create_campaign(
        &self,
        id: &str,
        kind: &str,
        stock: i64,
        starts_at: DateTime<Utc>,
        ends_at: DateTime<Utc>,
        hold_seconds: Option<i64>,
    ) -> Value {
        self.create(&NewCampaign {
            id: id.into(),
            name: format!("Campaign {id}"),
            kind: CampaignKind::parse(kind).expect("kind is sale or giveaway"),
            stock,
            starts_at,
            ends_at,
            hold_seconds,
            hold_extension_seconds: None,
            gate_shards: None,
            waiting_room: None,
            access: None,
            draw: None,
            variants: None,
        })
        .await
    }

    /// Creates an active sale (started a minute ago, ends in an hour) of `stock` units whose
    /// claims are holds of `hold_seconds`, and returns its id.
    pub async fn held_sale(&self, stock: i64, hold_seconds: i64) -> String {
        let id = unique("held");
        let now = Utc::now();
        self.create_campaign(
            &id,
            "sale",
            stock,
            now - Duration::minutes(1),
            now + Duration::hours(1),
            Some(hold_seconds),
        )
        .await;
        id
    }

    /// Creates an active campaign (started a minute ago, ends in an hour) whose gate has
    /// `shards` shards, and returns its id.
    pub async fn sharded_campaign(&self, kind: &str, stock: i64, shards: i64) -> String {
        let id = unique(kind);
        let now = Utc::now();
        self.create(&NewCampaign {
            id: id.clone(),
            name: format!("Campaign {id}"),
            kind: CampaignKind::parse(kind).expect("kind is sale or giveaway"),
            stock,
            starts_at: now - Duration::minutes(1),
            ends_at: now + Duration::hours(1),
            hold_seconds: None,
            hold_extension_seconds: None,
            gate_shards: Some(shards),
            waiting_room: None,
            access: None,
            draw: None,
            variants: None,
        })
        .await;
        id
    }

    /// Sends `body` to `POST /admin/v1/campaigns`; panics unless 201. Returns the reply.
    pub async fn create(&self, body: &NewCampaign) -> Value {
        let res = self
            .http
            .post(format!("{}/admin/v1/campaigns", self.url))
            .bearer_auth(self.manager_token())
            .json(body)
            .send()
            .await
            .expect("create campaign");
        let status = res.status();
        let body: Value = res.json().await.expect("json");
        assert_eq!(status, 201, "create campaign: {body}");
        body
    }

    /// Sends a claim with `{}` for `customer` with idempotency key `key`; returns status and body.
    pub async fn claim(&self, campaign: &str, customer: &str, key: &str) -> (u16, Value) {
        claim_at(&self.http, &self.url, &self.token(customer), campaign, key).await
    }

    /// POSTs `body` (JSON) to `/api/v1/claims/{id}/{action}` (`pay`, `release`, ...) with
    /// `token` as bearer; returns the status and the JSON body (`null` when none).
    pub async fn claim_action(
        &self,
        id: &str,
        action: &str,
        token: &str,
        body: &impl Serialize,
    ) -> (u16, Value) {
        let res = self
            .http
            .post(format!("{}/api/v1/claims/{id}/{action}", self.url))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .expect("request");
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// Pays hold `id` with the service token and the payment reference `order-<id>`; returns
    /// the status and the JSON body.
    pub async fn pay(&self, id: &str) -> (u16, Value) {
        let token = self.config.service_token.expose().to_string();
        let body = flashgate_shared::api::PayRequest {
            payment_ref: format!("order-{id}"),
        };
        self.claim_action(id, "pay", &token, &body).await
    }

    /// `GET /admin/v1/campaigns/{c}/reconcile` with the viewer token; panics unless 200.
    pub async fn reconcile(&self, c: &str) -> Value {
        let path = format!("/admin/v1/campaigns/{c}/reconcile");
        let (s, b) = self
            .admin(reqwest::Method::GET, &path, Some(self.viewer_token()), None)
            .await;
        assert_eq!(s, 200, "{b}");
        b
    }

    /// Every customer of `customers` claims `campaign` at once, each from her own task (key
    /// `k-<customer>`); returns status and body per customer, in order.
    pub async fn stampede(&self, campaign: &str, customers: &[String]) -> Vec<(u16, Value)> {
        futures::future::join_all(customers.iter().map(|c| {
            let token = self.token(c);
            let (http, url, campaign) = (self.http.clone(), self.url.clone(), campaign.to_string());
            let key = format!("k-{c}");
            tokio::spawn(async move { claim_at(&http, &url, &token, &campaign, &key).await })
        }))
        .await
        .into_iter()
        .map(|r| r.expect("task"))
        .collect()
    }

    /// `n` new customers (unique ids) claim `campaign` at once; panics unless every claim is
    /// a 201. Returns the `claim` objects of the replies, in order.
    pub async fn winners(&self, campaign: &str, n: usize) -> Vec<Value> {
        let run = unique("win");
        let people: Vec<String> = (0..n).map(|i| format!("{run}-{i}")).collect();
        futures::future::join_all(people.iter().map(|p| self.claim(campaign, p, "k")))
            .await
            .into_iter()
            .map(|(status, body)| {
                assert_eq!(status, 201, "{body}");
                body["claim"].clone()
            })
            .collect()
    }

    /// Joins `campaign`'s waiting room as `customer` directly at this origin, signed as the edge
    /// would when this origin has an edge secret. Returns status and JSON body.
    pub async fn join(&self, campaign: &str, customer: &str) -> (u16, Value) {
        let path = format!("/api/v1/campaigns/{campaign}/queue");
        let auth = format!("Bearer {}", self.token(customer));
        let mut headers = vec![("authorization", auth.clone())];
        if let Some(secret) = &self.config.edge_secret {
            headers.extend(edge_headers(
                secret.expose(),
                "POST",
                &path,
                b"",
                Some(&auth),
                None,
                None,
            ));
        }
        let url = format!("{}{path}", self.url);
        let r = send_raw(&self.http, reqwest::Method::POST, &url, None, &headers, "").await;
        (r.status, r.body)
    }

    /// Sends a claim directly to this origin as `customer`, signed as the edge would (this
    /// origin must have an edge secret), with an optional `Flashgate-Admission` token.
    pub async fn signed_claim(
        &self,
        campaign: &str,
        customer: &str,
        admission: Option<&str>,
    ) -> RawReply {
        self.signed_claim_with_key(campaign, customer, admission, &unique("k"))
            .await
    }

    /// [`TestOrigin::signed_claim`] with the `Idempotency-Key` `key` (a retry sends the same).
    pub async fn signed_claim_with_key(
        &self,
        campaign: &str,
        customer: &str,
        admission: Option<&str>,
        key: &str,
    ) -> RawReply {
        let secret = self.config.edge_secret.as_ref().expect("an edge secret");
        let path = format!("/api/v1/campaigns/{campaign}/claims");
        let auth = format!("Bearer {}", self.token(customer));
        let key = key.to_string();
        let mut headers = vec![
            ("authorization", auth.clone()),
            ("idempotency-key", key.clone()),
            ("content-type", "application/json".to_string()),
        ];
        headers.extend(edge_headers(
            secret.expose(),
            "POST",
            &path,
            b"{}",
            Some(&auth),
            Some(&key),
            None,
        ));
        if let Some(a) = admission {
            headers.push((flashgate_shared::queue::ADMISSION_HEADER, a.to_string()));
        }
        let url = format!("{}{path}", self.url);
        send_raw(
            &self.http,
            reqwest::Method::POST,
            &url,
            None,
            &headers,
            "{}",
        )
        .await
    }

    /// A request counter of this origin's metrics (e.g. `|m| &m.claim_requests`): what reached
    /// the origin.
    pub fn origin_count(
        &self,
        counter: impl Fn(&flashgate_origin::metrics::Metrics) -> &Counter,
    ) -> u64 {
        counter(&self.origin.state.metrics).get()
    }

    /// `GET /api/v1/campaigns/{id}` body.
    pub async fn status(&self, campaign: &str) -> Value {
        self.http
            .get(format!("{}/api/v1/campaigns/{campaign}", self.url))
            .send()
            .await
            .expect("status")
            .json()
            .await
            .expect("json")
    }

    /// `campaigns.remaining` in PostgreSQL.
    pub async fn remaining(&self, campaign: &str) -> i64 {
        sqlx::query_scalar("SELECT remaining FROM campaigns WHERE id = $1")
            .bind(campaign)
            .fetch_one(&self.db)
            .await
            .expect("remaining")
    }

    /// Number of claim rows of the campaign with one of `statuses` (all rows when empty).
    pub async fn claim_rows(&self, campaign: &str, statuses: &[&str]) -> i64 {
        let statuses: Vec<String> = statuses.iter().map(|s| s.to_string()).collect();
        sqlx::query_scalar(
            "SELECT count(*) FROM claims WHERE campaign_id = $1
               AND (cardinality($2::text[]) = 0 OR status = ANY($2))",
        )
        .bind(campaign)
        .bind(&statuses)
        .fetch_one(&self.db)
        .await
        .expect("count claims")
    }
}
