// A test stand-in for Cloudflare Turnstile, for scripts/test-waiting-page (the real widget
// script cannot load offline). Never part of a deployment. It serves, on 127.0.0.1:
//   GET  /turnstile/v0/api.js  a fake widget script: `turnstile.render(el, {sitekey, callback})`
//                              writes a line into `el` and calls `callback` with the token
//                              `pass` (or the page's `window.flashgateFakeTurnstileToken`);
//                              then, as the real script does, it calls the function named by
//                              its `onload` query parameter.
//   POST /siteverify           answers as Cloudflare documents: `{"success": true, …}` for the
//                              token `pass` with the secret FLASHGATE_TURNSTILE_SECRET (of its
//                              environment, the edge's), else
//                              `{"success": false, "error-codes": [...]}`.
//   GET  /calls                the siteverify calls so far: [{secret, response}].
// Usage: node fake-turnstile.mjs URL_FILE: writes its base URL (http://127.0.0.1:PORT) to
// URL_FILE once listening; runs until killed.
import { createServer } from "node:http";
import { writeFileSync, renameSync } from "node:fs";

const SECRET = process.env.FLASHGATE_TURNSTILE_SECRET;
if (!SECRET) {
  console.error("set FLASHGATE_TURNSTILE_SECRET");
  process.exit(2);
}
const calls = [];
const widget = `(() => {
  const params = new URL(document.currentScript.src).searchParams;
  window.turnstile = {
    render(el, opts) {
      const line = document.createElement("p");
      line.className = "muted";
      line.textContent = "[test stand-in for the Turnstile widget, site key " + opts.sitekey + "]";
      el.appendChild(line);
      const token = window.flashgateFakeTurnstileToken || "pass";
      setTimeout(() => opts.callback(token), 200);
      return "fake-widget";
    },
  };
  const onload = params.get("onload");
  if (onload && typeof window[onload] === "function") window[onload]();
})();
`;

const server = createServer((req, res) => {
  const send = (status, type, body) => {
    res.writeHead(status, { "content-type": type });
    res.end(body);
  };
  const path = req.url.split("?")[0];
  if (req.method === "GET" && path === "/turnstile/v0/api.js") {
    return send(200, "text/javascript", widget);
  }
  if (req.method === "GET" && path === "/calls") {
    return send(200, "application/json", JSON.stringify(calls));
  }
  if (req.method === "POST" && path === "/siteverify") {
    let text = "";
    req.on("data", (c) => { text += c; });
    req.on("end", () => {
      let v = {};
      try { v = JSON.parse(text); } catch (e) {}
      calls.push({ secret: v.secret, response: v.response });
      const ok = v.secret === SECRET && v.response === "pass";
      send(200, "application/json", JSON.stringify(ok
        ? { success: true, challenge_ts: new Date().toISOString(), hostname: "localhost", "error-codes": [] }
        : { success: false, "error-codes": [v.secret === SECRET ? "invalid-input-response" : "invalid-input-secret"] }));
    });
    return undefined;
  }
  return send(404, "text/plain", "not found");
});
server.listen(0, "127.0.0.1", () => {
  const file = process.argv[2];
  const url = `http://127.0.0.1:${server.address().port}`;
  if (file) {
    writeFileSync(file + ".tmp", url + "\n");
    renameSync(file + ".tmp", file);
  } else {
    console.log(url);
  }
});
