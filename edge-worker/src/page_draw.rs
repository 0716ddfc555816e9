//! The draw's page a browser gets for `GET /api/v1/campaigns/{id}/draw` with `Accept:
//! text/html` (docs/DRAWS.md): self-contained (inline CSS and JS, no external assets). Its
//! script (`edge-worker/src/page_draw.js`) reads the draw's public status and, with the
//! customer token of the page's fragment (`#token=<customer token>`), her entry; it shows the
//! entry window, an enter button while entries are open, her entry receipt, the commitment,
//! and once drawn her outcome (won with her buying window and a claim button, waitlisted with
//! her waitlist position, lapsed, or not entered) and the reveal (seed, entry list digest).

use crate::page::{esc, STYLE};

/// The draw page's script; it reads its settings from the card's data attributes (`#draw`).
const SCRIPT: &str = include_str!("page_draw.js");

/// The draw's page of campaign `id`. Everything but the campaign id is filled in by its
/// script, which polls the draw's JSON status; without JavaScript it says that it needs it.
pub fn render_draw(id: &str) -> String {
    let id = esc(id);
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>Draw · {id}</title>
<style>
{STYLE}code{{word-break:break-all;font-size:.8rem}} dt{{margin-top:.5rem}} dd{{margin:0}}
#enter{{font-size:1.2rem;padding:.6rem 1.2rem}} .big{{font-size:1.8rem}}
</style></head>
<body><div class="card" id="draw" data-campaign="{id}" data-state="" data-outcome="">
<h1>Draw</h1>
<p class="muted">Campaign <b>{id}</b></p>
<p>State: <b id="state">loading</b></p>
<p class="big" id="headline"></p>
<p id="detail"></p>
<p id="window" class="muted"></p>
<button id="enter" hidden>Enter the draw</button>
<p id="receipt" hidden>Your entry receipt: <code id="entry-id"></code><br><span class="muted">entered at <span id="entered-at"></span></span></p>
<button id="claim" data-admission="">Claim</button>
<p id="result"></p>
<dl id="proof">
<dt>Commitment (SHA-256 of the secret seed)</dt><dd><code id="commitment">–</code></dd>
<dt>Seed</dt><dd><code id="seed">revealed at the draw</code></dd>
<dt>Entry list digest</dt><dd><code id="digest">revealed at the draw</code></dd>
<dt>Entries</dt><dd id="entries">–</dd>
</dl>
<noscript><p>This page needs JavaScript: turn it on and reload it.</p></noscript>
</div>
<script>
{SCRIPT}</script></body></html>
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_draw_page_is_self_contained_and_names_its_campaign() {
        let html = render_draw("raffle-1");
        assert!(html.contains(
            r#"<div class="card" id="draw" data-campaign="raffle-1" data-state="" data-outcome="">"#
        ));
        assert!(html.contains(r#"<code id="commitment">"#) && html.contains(r#"id="seed""#));
        assert!(html.contains(r#"json(base + "/entries", { method: "POST""#));
        assert!(html.contains("<noscript><p>This page needs JavaScript"));
        assert!(
            !html.contains("src=") && !html.contains("href=") && !html.contains("http-equiv"),
            "no external assets, no refresh"
        );
        assert!(render_draw("a\"<b").contains(r#"data-campaign="a&quot;&lt;b""#));
    }
}
