"""A webhook receiver that verifies every delivery with the reference `standardwebhooks`
library (scripts/webhook-receiver runs it in its pinned virtualenv).

Every POST to any path but /_control/* is a delivery: it is verified with each secret it
was given (each on its own, so a test sees which of two signatures verified), recorded, and
answered as the plan says (200 once the plan is spent).

Control (JSON bodies):
  POST /_control/secrets {"secrets": ["whsec_...", ...]}  the secrets to verify with
  POST /_control/plan {"answers": [{"status": 500}, {"status": 429, "retry_after": 1}],
                       "then": 200}                        the next answers, then `then`
  GET  /_control/events                                    every delivery so far: [{"id",
       "timestamp", "signature", "event" (the body as JSON), "verified" (indices of the
       secrets that verified it), "answered"}]
"""

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

LOCK = threading.Lock()
STATE = {"secrets": [], "answers": [], "then": 200, "events": []}


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
        else:
            self._reply(404)

    def do_POST(self):
        body = self._body()
        if self.path == "/_control/secrets":
            with LOCK:
                STATE["secrets"] = json.loads(body)["secrets"]
            return self._reply(204)
        if self.path == "/_control/plan":
            plan = json.loads(body)
            with LOCK:
                STATE["answers"] = list(plan.get("answers", []))
                STATE["then"] = plan.get("then", 200)
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
            answer = STATE["answers"].pop(0) if STATE["answers"] else {"status": STATE["then"]}
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
            })
        extra = []
        if "retry_after" in answer:
            extra.append(("retry-after", str(answer["retry_after"])))
        self._reply(answer["status"], b"", extra)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    a = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
