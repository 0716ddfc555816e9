"""schemathesis checks for the run through the edge (scripts/test-openapi, step 6).

`edge_no_server_error` replaces schemathesis's `not_a_server_error` there. It fails on every
5xx but one: the edge's own documented `503 {"result":"unavailable",...}` with `Retry-After`
and `Flashgate-Answered-By: edge`, its answer when a forwarded request got no answer from the
origin (docs/API.md; every operation documents it). A 5xx of the origin relayed by the edge,
or any other 5xx, fails as before; the origin run (step 5) keeps `not_a_server_error` whole.
Each accepted 503 is printed, so that a run shows how often the edge could not reach the origin.
"""

import sys

import schemathesis


def _edge_unavailable(response):
    headers = {k.lower(): v for k, v in response.headers.items()}

    def first(name):
        value = headers.get(name)
        return value[0] if isinstance(value, list) and value else value

    if response.status_code != 503 or first("flashgate-answered-by") != "edge":
        return False
    if not first("retry-after"):
        return False
    try:
        return response.json().get("result") == "unavailable"
    except Exception:  # not JSON: not the documented answer
        return False


@schemathesis.check
def edge_no_server_error(ctx, response, case):
    """No 5xx through the edge, but its documented 503 `unavailable` (origin not reached)."""
    if response.status_code < 500:
        return None
    if _edge_unavailable(response):
        print(
            f"[test-openapi] the edge answered 503 unavailable (origin not reached): "
            f"{case.operation.label}",
            file=sys.stderr,
        )
        return None
    raise AssertionError(
        f"{response.status_code} through the edge on {case.operation.label}: "
        f"{response.text[:200]}"
    )
