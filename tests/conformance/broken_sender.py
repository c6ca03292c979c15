"""A small webhook sender of its own (standard library only, nothing of hookproof), seeded bugs.

Run as a ``check-sender`` trigger: it sends one event to ``$HOOKPROOF_TARGET_URL``, signed the
Standard Webhooks way with ``$HOOKPROOF_SECRET``, and retries it on a fixed schedule with the
strict classification (2xx delivered; 429, 5xx, timeouts and connection errors retried, honouring
``Retry-After`` on 429; everything else stops). ``$BROKEN_SENDER_BUGS`` is a JSON object mapping a
scenario id (``$HOOKPROOF_SCENARIO``) to the one bug to commit in it; without an entry it behaves.

    python broken_sender.py --delays 0,1,1.5 --max-attempts 3 --timeout 1
"""

from __future__ import annotations

import argparse
import base64
import email.utils
import hashlib
import hmac
import http.client
import json
import os
import threading
import time
import urllib.parse
import uuid

BUGS = {
    "reused-timestamp",
    "new-id-per-retry",
    "reserialised-body",
    "wrong-signature-on-retries",
    "no-retry-503",
    "no-retry-reset",
    "retry-after-410",
    "retry-after-2xx",
    "ignore-retry-after",
    "too-many-attempts",
    "no-timeout",
    "no-timeout-on-retries",
    "fast-retries",
    "overlapping-retries",
    "hedged-retries",
    "follows-redirects",
    "text-plain",
    "upper-hex",
    "counts-only-5xx",
}


def sign(key: bytes, event_id: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(key, f"{event_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def stripe_signature(secret: str, timestamp: int, body: bytes, *, upper: bool) -> str:
    """Stripe's header: ``t=<ts>,v1=<hex HMAC of "<ts>." + body, keyed by the secret text>``."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    text = digest.hexdigest()
    return f"t={timestamp},v1={text.upper() if upper else text}"


def post(url: str, body: bytes, headers: dict[str, str], timeout: float | None) -> tuple:
    """``("status", code, retry_after, location)`` or ``("timeout"|"connection", None, None,
    None)``."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("POST", parts.path, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        return (
            "status",
            response.status,
            response.getheader("Retry-After"),
            response.getheader("Location"),
        )
    except TimeoutError:
        return "timeout", None, None, None
    except (ConnectionError, http.client.HTTPException, OSError):
        return "connection", None, None, None
    finally:
        conn.close()


def fire(
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeout: float | None,
    done: threading.Event,
    hedged: bool = False,
) -> None:
    if post(url, body, headers, timeout)[1] == 200:
        if hedged:  # the hedge won: drop every other attempt at once (the process exits)
            os._exit(0)
        done.set()


def retry_after_s(value: str | None) -> float | None:
    if value is None:
        return None
    if value.isdigit():
        return float(value)
    return email.utils.parsedate_to_datetime(value).timestamp() - time.time()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delays", default="0,1,1.5")
    parser.add_argument("--max-attempts", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--scheme", choices=("standard", "stripe"), default="standard")
    args = parser.parse_args()
    bug = json.loads(os.environ.get("BROKEN_SENDER_BUGS", "{}")).get(
        os.environ["HOOKPROOF_SCENARIO"], ""
    )
    assert not bug or bug in BUGS, bug
    url = os.environ["HOOKPROOF_TARGET_URL"]
    secret = os.environ["HOOKPROOF_SECRET"].split()[0]
    key = base64.b64decode(secret.removeprefix("whsec_"))
    delays = [float(d) for d in args.delays.split(",")]
    limit = args.max_attempts + (2 if bug == "too-many-attempts" else 0)
    if bug == "counts-only-5xx":  # timeouts and resets never use up the attempt budget
        limit += 10
    counted = 0
    hedged = bug == "hedged-retries"
    timeout = None if bug in ("no-timeout", "overlapping-retries") or hedged else args.timeout
    event_id = f"evt_{uuid.uuid4().hex}"
    event: dict[str, object] = {"type": "broken.test", "data": {"n": 1, "note": "héllo"}}
    if args.scheme == "stripe":  # a Stripe event carries its id in the body
        event = {"id": event_id, "object": "event", **event}
    body = json.dumps(event, separators=(",", ":")).encode()
    first_ts = int(time.time())
    delivered = threading.Event()
    scheduled = time.monotonic() + delays[0]
    for attempt in range(1, limit + 1):
        time.sleep(max(0.0, scheduled - time.monotonic()))  # real-time: its own schedule
        if delivered.is_set():
            return
        retry = attempt > 1
        sent_id = f"evt_{uuid.uuid4().hex}" if retry and bug == "new-id-per-retry" else event_id
        sent = (
            json.dumps(event, indent=1).encode() if retry and bug == "reserialised-body" else body
        )
        ts = first_ts if bug == "reused-timestamp" else int(time.time())
        used_key = b"wrong" + key if retry and bug == "wrong-signature-on-retries" else key
        headers = {
            "content-type": "text/plain" if bug == "text-plain" else "application/json",
            "webhook-id": sent_id,
            "webhook-timestamp": str(ts),
            "webhook-signature": sign(used_key, sent_id, ts, sent),
        }
        if args.scheme == "stripe":
            upper = bug == "upper-hex"
            headers = {
                "content-type": "application/json",
                "stripe-signature": stripe_signature(secret, ts, sent, upper=upper),
            }
        delay = delays[min(attempt, len(delays) - 1)]
        if bug == "fast-retries":  # at once: a busy machine only adds to the gap, and the
            delay = 0.0  # judge allows down to 0.25 s, so every spare millisecond is margin
        if bug == "overlapping-retries" or hedged:  # fire and move on: never waits
            threading.Thread(
                target=fire, args=(url, sent, headers, timeout, delivered, hedged), daemon=True
            ).start()
            scheduled += delay
            continue
        waits = None if retry and bug == "no-timeout-on-retries" else timeout  # set once, on
        kind, status, retry_after, location = post(url, sent, headers, waits)  # the first only
        if bug == "follows-redirects" and location:  # re-POSTs the signed body to the Location
            kind, status, retry_after, location = post(location, sent, headers, timeout)
        if kind == "status" and 200 <= status < 300:
            if bug != "retry-after-2xx" or attempt > 1:
                return
        elif kind == "status" and status == 410:
            if bug != "retry-after-410":
                return
        elif (
            (kind == "status" and status == 503 and bug == "no-retry-503")
            or (kind == "connection" and bug == "no-retry-reset")
            or (kind == "status" and status != 429 and not 500 <= status < 600)
        ):
            return
        if bug == "counts-only-5xx":
            counted += kind == "status"
            if counted >= args.max_attempts:
                return
        wait = retry_after_s(retry_after) if status == 429 else None
        if wait is not None and bug != "ignore-retry-after":
            scheduled = time.monotonic() + wait
        else:
            scheduled += delay
    for _ in range(50):  # overlapping attempts still in flight
        if delivered.wait(0.1):
            return


if __name__ == "__main__":
    main()
