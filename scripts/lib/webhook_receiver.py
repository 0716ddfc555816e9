"""A webhook receiver that verifies every delivery with the reference `standardwebhooks`
library (scripts/webhook-receiver runs it in its pinned virtualenv).

Every POST to any path but /_control/* is a delivery: it is verified with each secret it
was given (each on its own, so a test sees which of two signatures verified), recorded, and
answered as the plan says (200 once the plan is spent), after the answer's `delay` seconds
when it has one (the call stays open meanwhile).

Started with --secret (docs/CHECKOUT.md), it is a shop's receiver: it verifies with those
secrets, answers 400 to a delivery none of them verifies, and prints one line per delivery:
  verified claim.paid campaign=hoodie-1 object=c_... sequence=3 status=paid webhook-id=...
  rejected webhook-id=...: <why>

Control (JSON bodies):
  POST /_control/secrets {"secrets": ["whsec_...", ...]}  the secrets to verify with
  POST /_control/plan {"answers": [{"status": 500}, {"status": 429, "retry_after": 1}],
                       "then": {"status": 200, "delay": 0.5}}
                                                           the next answers, then `then` (an
                                                           answer, or a status alone)
  GET  /_control/events                                    every delivery so far, in arrival
       order: [{"id", "timestamp", "signature", "event" (the body as JSON), "verified"
       (indices of the secrets that verified it), "answered", "at" (arrival, unix seconds)}]
  GET  /_control/open                                      {"open": deliveries not answered yet}
"""

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

LOCK = threading.Lock()
STATE = {"secrets": [], "answers": [], "then": {"status": 200}, "events": [], "open": 0}
# --secret: print each delivery, refuse (400) what no secret verifies.
STRICT = False


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self):
        n = int(self.headers.get("content-length") or 0)
        return self.rfile.read(n)

    def do_GET(self):
        if self.path == "/_control/events":
            with LOCK:
                body = json.dumps(STATE["events"]).encode()
            self._reply(200, body, [("content-type", "application/json")])
        elif self.path == "/_control/open":
            with LOCK:
                body = json.dumps({"open": STATE["open"]}).encode()
            self._reply(200, body, [("content-type", "application/json")])
        else:
            self._reply(404)

    def do_POST(self):
        at = time.time()
        body = self._body()
        if self.path == "/_control/secrets":
            with LOCK:
                STATE["secrets"] = json.loads(body)["secrets"]
            return self._reply(204)
        if self.path == "/_control/plan":
            plan = json.loads(body)
            with LOCK:
                STATE["answers"] = list(plan.get("answers", []))
                then = plan.get("then", 200)
                STATE["then"] = then if isinstance(then, dict) else {"status": then}
            return self._reply(204)
        headers = {k.lower(): v for k, v in self.headers.items()}
        with LOCK:
            secrets = list(STATE["secrets"])
        verified, why = [], "no secret"
        for i, secret in enumerate(secrets):
            try:
                Webhook(secret).verify(body, headers)
                verified.append(i)
            except WebhookVerificationError as e:
                why = str(e)
        with LOCK:
            if STRICT and not verified:
                answer = {"status": 400}
            elif STATE["answers"]:
                answer = STATE["answers"].pop(0)
            else:
                answer = STATE["then"]
            try:
                event = json.loads(body)
            except ValueError:
                event = None
            STATE["events"].append({
                "id": headers.get("webhook-id"),
                "timestamp": headers.get("webhook-timestamp"),
                "signature": headers.get("webhook-signature"),
                "event": event,
                "verified": verified,
                "answered": answer["status"],
                "at": at,
            })
            STATE["open"] += 1
            if STRICT:
                print(line(headers.get("webhook-id"), event, verified, why), flush=True)
        try:
            if answer.get("delay"):
                time.sleep(answer["delay"])
            self._answer(answer)
        finally:
            with LOCK:
                STATE["open"] -= 1

    def _answer(self, answer):
        extra = []
        if "retry_after" in answer:
            extra.append(("retry-after", str(answer["retry_after"])))
        self._reply(answer["status"], b"", extra)


def line(webhook_id, event, verified, why):
    """The printed line of one delivery (see the module's documentation)."""
    if not verified:
        return f"rejected webhook-id={webhook_id}: {why}"
    e = event if isinstance(event, dict) else {}
    data = e.get("data") if isinstance(e.get("data"), dict) else {}
    return (f"verified {e.get('type')} campaign={e.get('campaign')} object={e.get('object_id')}"
            f" sequence={e.get('sequence')} status={data.get('status')} webhook-id={webhook_id}")


class Server(ThreadingHTTPServer):
    # Tests open dozens of calls at once (slow answers); the default backlog is 5.
    request_queue_size = 128

    def handle_error(self, request, client_address):
        # A caller that went away before the answer (a killed origin) is expected.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    p.add_argument("--secret", action="append", default=[],
                   help="a whsec_ secret to verify with (repeatable): print each delivery, "
                        "answer 400 to what none verifies")
    a = p.parse_args()
    global STRICT
    STRICT = bool(a.secret)
    STATE["secrets"] = list(a.secret)
    server = Server(("127.0.0.1", a.port), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
