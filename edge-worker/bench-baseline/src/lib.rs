//! Baseline worker of scripts/bench-edge: every request gets 409 `{"result":"sold_out"}` with
//! the same headers as the edge's own answers. It reads a request body and drops it (a worker
//! that answers without reading the body makes workerd reset the client's connection), and
//! looks at nothing else. The edge worker's sold-out and cached-status throughput is reported
//! relative to this.

#[cfg(target_arch = "wasm32")]
mod glue {
    use worker::{event, Context, Env, Headers, Method, Request, Response, Result};

    #[event(fetch)]
    async fn fetch(mut req: Request, _env: Env, _ctx: Context) -> Result<Response> {
        if req.method() == Method::Post {
            let _ = req.bytes().await;
        }
        let headers = Headers::new();
        headers.set("content-type", "application/json")?;
        headers.set("flashgate-answered-by", "edge")?;
        headers.set("cache-control", "no-store")?;
        Ok(Response::from_bytes(br#"{"result":"sold_out"}"#.to_vec())?
            .with_status(409)
            .with_headers(headers))
    }
}
