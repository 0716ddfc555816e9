//! The waiting page a browser gets for `GET /api/v1/campaigns/{id}/queue?ticket=…` with
//! `Accept: text/html`: self-contained (inline CSS and JS, no external assets), it shows the
//! position, the ETA and the state, polls the JSON status honouring `Retry-After`, and falls
//! back to `<meta http-equiv="refresh">` without JavaScript. Once admitted it shows a claim
//! button that sends the claim with the admission token and the customer token taken from the
//! page's fragment (`#token=<customer token>`; a fragment never reaches any server).
//!
//! On a campaign with variants the page lists them ([`variant_choices`]), marks the sold-out
//! ones (kept up to date by the polls), lets the customer pick one, and its claim names it
//! (`{"variant":"42"}`): one admission token serves any variant.
//!
//! Without a ticket a browser gets the join page ([`render_join`]): its script joins, first
//! solving the campaign's proof of work in a Web Worker when it has one, then shows the
//! ticket's place and polls like the ticket's page. The script is `edge-worker/src/page.js`.

use crate::config::Turnstile;
use flashgate_shared::api::{CampaignState, VariantStatus};
use flashgate_shared::queue::access::{ChallengeKind, JoinAccess};
use flashgate_shared::queue::{Outlook, QueueState, StatusReply};

/// True when the client prefers HTML: an `Accept` header naming `text/html`.
pub fn wants_html(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',').any(|m| {
            m.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/html"))
        })
    })
}

/// Escapes text for HTML element content and double-quoted attributes.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn state_text(s: QueueState) -> &'static str {
    match s {
        QueueState::Waiting => "waiting",
        QueueState::Admitted => "admitted",
        QueueState::SoldOut => "sold_out",
        QueueState::Ended => "ended",
        QueueState::Paused => "paused",
        QueueState::Lapsed => "lapsed",
    }
}

/// The variant picker: one radio button per variant (id as value, name as label), a sold-out
/// one disabled and marked; empty without variants. Ids are slugs; names are escaped.
fn variant_choices(variants: &[VariantStatus]) -> String {
    if variants.is_empty() {
        return String::new();
    }
    let mut out = String::from(r#"<fieldset id="variants"><legend>Choose one</legend>"#);
    for v in variants {
        let sold = v.state == CampaignState::SoldOut || v.remaining <= 0;
        let id = esc(&v.id);
        out.push_str(&format!(
            r#"<label><input type="radio" name="variant" value="{id}"{dis}> {name} <span class="muted" data-left="{id}">{left}</span></label><br>"#,
            dis = if sold { " disabled" } else { "" },
            name = esc(&v.name),
            left = if sold { "sold out" } else { "" },
        ));
    }
    out.push_str("</fieldset>");
    out
}

/// The page's script (`edge-worker/src/page.js`); it reads its settings from the card's data
/// attributes (`#room`).
const SCRIPT: &str = include_str!("page.js");

/// The pages' style sheet (the waiting room's pages and the draw's, [`crate::page_draw`]).
pub(crate) const STYLE: &str = "\
body{font-family:system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem;color:#222}
.card{border:1px solid #ddd;border-radius:.75rem;padding:1.5rem}
.big{font-size:3rem;font-weight:700;margin:.25rem 0}
.muted{color:#666} #claim{display:none;font-size:1.2rem;padding:.6rem 1.2rem}
progress{width:10rem}
";

/// What differs between the ticket's page and the join page.
struct Shell<'a> {
    id: &'a str,
    /// `<noscript>` in the head (the ticket page's refresh).
    head: &'a str,
    /// Data attributes of the card, escaped.
    data: String,
    position: String,
    eta: String,
    state: &'a str,
    outlook: &'a str,
    note: &'a str,
    choices: String,
    admission: &'a str,
    /// Below the card's figures: the join page's check and its no-JavaScript words.
    extra: &'a str,
}

fn shell(s: &Shell<'_>) -> String {
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
{head}
<title>Waiting room · {id}</title>
<style>
{style}</style></head>
<body><div class="card" id="room"{data}>
<h1>Waiting room</h1>
<p class="muted">Campaign <b>{id}</b></p>
<p>Position</p><p class="big" id="position">{position}</p>
<p>Estimated wait: <b id="eta">{eta}</b> s</p>
<p>State: <b id="state">{state}</b> <span id="outlook" class="muted">{outlook}</span></p>
 <p id="note">{note}</p>
{extra}{choices}
<button id="claim" data-admission="{admission}">Claim</button>
<p id="result"></p>
</div>
<script>
{script}</script></body></html>
"#,
        id = s.id,
        head = s.head,
        data = s.data,
        position = s.position,
        eta = s.eta,
        state = s.state,
        outlook = s.outlook,
        note = esc(s.note),
        extra = s.extra,
        choices = s.choices,
        admission = esc(s.admission),
        style = STYLE,
        script = SCRIPT,
    )
}

/// The page for campaign `id` with the checked `ticket` and the edge's `reply`; refreshes
/// after `retry_after_s` seconds.
pub fn render(id: &str, ticket: &str, reply: &StatusReply, retry_after_s: u32) -> String {
    // A checked ticket is base64url and dots; keeping only those makes it safe inside the
    // script and the URL as well.
    let ticket: String = ticket
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    let id = esc(id);
    let self_url = format!("/api/v1/campaigns/{id}/queue?ticket={ticket}");
    let outlook = match reply.outlook {
        Some(Outlook::Unlikely) => "unlikely",
        Some(Outlook::Likely) => "likely",
        Some(Outlook::MayReturn) => "may_return",
        Some(Outlook::Final) => "final",
        None => "",
    };
    let held_until = reply
        .held_until
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default();
    let note = second_wave_note(reply.outlook, &held_until);
    // Terminal states do not refresh; a sold-out that may come back does, slowly.
    let meta = match reply.state {
        QueueState::SoldOut if reply.outlook == Some(Outlook::MayReturn) => format!(
            r#"<noscript><meta http-equiv="refresh" content="{retry_after_s};url={self_url}"></noscript>"#
        ),
        QueueState::SoldOut | QueueState::Ended | QueueState::Lapsed => {
            "<noscript></noscript>".into()
        }
        _ => format!(
            r#"<noscript><meta http-equiv="refresh" content="{retry_after_s};url={self_url}"></noscript>"#
        ),
    };
    shell(&Shell {
        id: &id,
        head: &meta,
        data: format!(
            r#" data-campaign="{id}" data-ticket="{ticket}" data-retry="{retry_after_s}" data-held-until="{held_until}" data-admitted="{}""#,
            reply.admitted
        ),
        position: reply.position.to_string(),
        eta: reply.eta_seconds.to_string(),
        state: state_text(reply.state),
        outlook,
        note: &note,
        choices: variant_choices(&reply.variants),
        admission: reply.admission_token.as_deref().unwrap_or(""),
        extra: "",
    })
}

/// The join page of campaign `id` (a browser's `GET …/queue` without a ticket): its script
/// joins with the customer token of the fragment, after solving the proof of work when
/// `access` asks for one ("Checking your browser…" with its progress), or after the Turnstile
/// widget (loaded from `turnstile`'s script URL with its site key) gave its token, then shows the
/// ticket's place and polls as the ticket's page does. Without JavaScript it says that it
/// needs it: the token in the fragment reaches no server.
pub fn render_join(
    id: &str,
    access: &JoinAccess,
    variants: &[VariantStatus],
    turnstile: &Turnstile,
) -> String {
    let id = esc(id);
    let (challenge, extra, widget) = match access.challenge {
        ChallengeKind::None => ("none", "", String::new()),
        ChallengeKind::Pow => ("pow", POW_CHECK, String::new()),
        ChallengeKind::Turnstile => (
            "turnstile",
            r#"<div id="turnstile" hidden></div>
"#,
            format!(
                r#" data-sitekey="{}" data-turnstile-script="{}""#,
                esc(turnstile.site_key.as_deref().unwrap_or("")),
                esc(&turnstile.script_url)
            ),
        ),
    };
    let extra = format!(
        "{extra}<noscript><p>Joining the line needs JavaScript: turn it on and reload this page.</p></noscript>\n"
    );
    shell(&Shell {
        id: &id,
        head: "",
        data: format!(
            r#" data-campaign="{id}" data-ticket="" data-challenge="{challenge}" data-difficulty="{}"{widget}"#,
            access.pow_difficulty
        ),
        position: "–".into(),
        eta: "–".into(),
        state: "joining",
        outlook: "",
        note: "",
        choices: variant_choices(variants),
        admission: "",
        extra: &extra,
    })
}

/// The proof of work's "Checking your browser…" line of the join page.
const POW_CHECK: &str = r#"<p id="check" hidden><span id="check-text">Checking your browser…</span> <progress id="progress" max="1" value="0"></progress> <span id="check-note" class="muted"></span></p>
"#;

/// The page's plain words on a sold-out campaign: units may come back until `held_until`
/// (`may_return`), or nothing will (`final`).
fn second_wave_note(outlook: Option<Outlook>, held_until: &str) -> String {
    match outlook {
        Some(Outlook::MayReturn) => format!(
            "Sold out for now, but units held by others may come back until {held_until}. \
             Keep this page open: it keeps checking."
        ),
        Some(Outlook::Final) => "Sold out: nothing will come back.".into(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_is_chosen_by_accept() {
        assert!(wants_html(Some("text/html,application/xhtml+xml;q=0.9")));
        assert!(wants_html(Some("application/json, TEXT/HTML; q=0.1")));
        assert!(!wants_html(Some("application/json")));
        assert!(!wants_html(None));
    }

    #[test]
    fn page_shows_the_reply_and_refreshes_itself() {
        let reply = StatusReply {
            position: 42,
            eta_seconds: 7,
            state: QueueState::Waiting,
            admitted: false,
            admission_token: None,
            outlook: Some(Outlook::Likely),
            held_until: None,
            variants: Vec::new(),
        };
        let html = render("drop", "abc.def", &reply, 3);
        assert!(html.contains(r#"<p class="big" id="position">42</p>"#));
        assert!(html.contains(r#"<b id="eta">7</b>"#));
        // The settings of the script, and no join.
        assert!(html.contains(
            r#"data-campaign="drop" data-ticket="abc.def" data-retry="3" data-held-until="" data-admitted="false""#
        ));
        assert!(!html.contains(r#"id="check""#));
        assert!(html.contains(
            r#"<meta http-equiv="refresh" content="3;url=/api/v1/campaigns/drop/queue?ticket=abc.def">"#
        ));
        assert!(
            !html.contains("src=") && !html.contains("href="),
            "no external assets"
        );
        let sold = StatusReply {
            state: QueueState::SoldOut,
            outlook: None,
            ..reply
        };
        assert!(!render("drop", "t", &sold, 30).contains("http-equiv"));
        let final_ = StatusReply {
            outlook: Some(Outlook::Final),
            ..sold.clone()
        };
        let html = render("drop", "t", &final_, 30);
        assert!(!html.contains("http-equiv") && html.contains("nothing will come back"));
        let may = StatusReply {
            outlook: Some(Outlook::MayReturn),
            held_until: Some(chrono::DateTime::UNIX_EPOCH),
            ..sold
        };
        let html = render("drop", "t", &may, 15);
        assert!(html.contains(r#"<meta http-equiv="refresh" content="15;"#));
        assert!(html.contains("may come back until 1970-01-01T00:00:00Z"));
        assert_eq!(
            esc(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert!(
            !html.contains(r#"id="variants""#),
            "no picker without variants"
        );
    }

    #[test]
    fn the_page_offers_the_variants_and_marks_the_sold_out_ones() {
        let v = |id: &str, name: &str, remaining, state| VariantStatus {
            id: id.into(),
            name: name.into(),
            stock: 5,
            remaining,
            state,
        };
        let reply = StatusReply {
            position: 0,
            eta_seconds: 0,
            state: QueueState::Admitted,
            admitted: true,
            admission_token: Some("adm".into()),
            outlook: None,
            held_until: None,
            variants: vec![
                v("41", "Size 41 <b>", 3, CampaignState::Active),
                v("42", "Size 42", 0, CampaignState::SoldOut),
            ],
        };
        let html = render("drop", "t", &reply, 3);
        assert!(html.contains(
            r#"<input type="radio" name="variant" value="41"> Size 41 &lt;b&gt; <span class="muted" data-left="41"></span>"#
        ));
        assert!(html.contains(
            r#"<input type="radio" name="variant" value="42" disabled> Size 42 <span class="muted" data-left="42">sold out</span>"#
        ));
        assert!(html.contains("JSON.stringify({ variant: picked.value })"));
    }

    #[test]
    fn the_join_page_solves_a_pow_challenge_only_where_asked() {
        let pow = JoinAccess {
            challenge: ChallengeKind::Pow,
            ..JoinAccess::default()
        };
        let ts = Turnstile {
            siteverify_url: String::new(),
            secret: None,
            timeout_ms: 1,
            site_key: Some("0xSITE\"".into()),
            script_url: "https://widget.example/api.js".into(),
        };
        let html = render_join("drop", &pow, &[], &ts);
        assert!(html.contains(
            r#"<div class="card" id="room" data-campaign="drop" data-ticket="" data-challenge="pow" data-difficulty="18">"#
        ));
        assert!(html.contains(
            r#"<p id="check" hidden><span id="check-text">Checking your browser…</span>"#
        ));
        assert!(html.contains("<noscript><p>Joining the line needs JavaScript"));
        assert!(html.contains("new Worker(") && html.contains(r#"fetch(base + "/challenge""#));
        assert!(
            !html.contains("http-equiv") && !html.contains("src=") && !html.contains("href="),
            "no refresh (nothing to refresh to), no external assets"
        );
        let open = render_join("drop", &JoinAccess::default(), &[], &ts);
        assert!(open.contains(r#"data-challenge="none""#) && !open.contains(r#"id="check""#));
        assert!(!open.contains("data-sitekey") && !html.contains("data-sitekey"));
        let widget = JoinAccess {
            challenge: ChallengeKind::Turnstile,
            ..JoinAccess::default()
        };
        let html = render_join("drop", &widget, &[], &ts);
        assert!(html.contains(
            r#"data-challenge="turnstile" data-difficulty="18" data-sitekey="0xSITE&quot;" data-turnstile-script="https://widget.example/api.js">"#
        ));
        assert!(html.contains(r#"<div id="turnstile" hidden></div>"#));
        assert!(html.contains("turnstile_token") && !html.contains("src="));
    }
}
