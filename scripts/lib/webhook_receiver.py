"""A webhook receiver that verifies every delivery with the reference `standardwebhooks`
library (scripts/webhook-receiver runs it in its pinned virtualenv).

Every POST to any path but /_control/* is a delivery: it is verified with each secret it
was given (each on its own, so a test sees which of two signatures verified), recorded, and
answered as the plan says (200 once the plan is spent), after the answer's `delay` seconds
when it has one (the call stays open meanwhile).

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
        verified = []
        for i, secret in enumerate(secrets):
            try:
                Webhook(secret).verify(body, headers)
                verified.append(i)
            except WebhookVerificationError:
                pass
        with LOCK:
            answer = STATE["answers"].pop(0) if STATE["answers"] else STATE["then"]
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
    a = p.parse_args()
    server = Server(("127.0.0.1", a.port), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
