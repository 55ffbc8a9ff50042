"""aioapns against the fake APNs: token auth with the same .p8, one connection, asyncio.gather in chunks.

Pointing it at the fake: aioapns 4.x connects to `protocol_class.APNS_SERVER`:`APNS_PORT` (also the `host`
header), so both are set on APNsProductionClientProtocol. It takes an `ssl_context`; ours trusts the test
CA and offers ALPN h2 (aioapns' default context, ssl.create_default_context(), offers no ALPN, and the fake
closes connections that do not negotiate h2).
"""
import argparse
import asyncio
import logging
import ssl
import sys
import time
import uuid

from common import apns_payload, cpu_seconds, finish


class FirstFew(logging.Filter):
    """Lets the first few aioapns log records through (so 100k failures do not flood the terminal)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.left = limit
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if self.left > 0:
            self.left -= 1
            return True
        self.dropped += 1
        return False


async def run(args) -> int:
    from aioapns import APNs, NotificationRequest, PushType
    from aioapns.connection import APNsProductionClientProtocol

    host, port = args.endpoint.removeprefix("https://").rsplit(":", 1)
    APNsProductionClientProtocol.APNS_SERVER = host
    APNsProductionClientProtocol.APNS_PORT = int(port)

    context = ssl.create_default_context(cafile=args.ca_file)
    if not args.no_alpn:
        context.set_alpn_protocols(["h2"])
    with open(args.p8, encoding="utf-8") as f:
        key = f.read()
    client = APNs(key=key, key_id=args.key_id, team_id=args.team_id, topic=args.topic,
                  max_connections=args.connections, use_sandbox=False, ssl_context=context)

    ok = failed = 0
    first_failure = None
    cpu_before = cpu_seconds()
    started = time.monotonic()
    for chunk_start in range(0, args.count, args.chunk):
        requests = []
        for i in range(chunk_start, min(args.count, chunk_start + args.chunk)):
            notification_id = str(uuid.uuid4())
            requests.append(NotificationRequest(
                device_token="%064x" % (i + 1), message=apns_payload(notification_id),
                notification_id=notification_id, time_to_live=86_400, priority=10,
                collapse_key="inactivity", push_type=PushType.ALERT))
        results = await asyncio.gather(*(client.send_notification(r) for r in requests), return_exceptions=True)
        for result in results:
            if not isinstance(result, BaseException) and result.is_successful:
                ok += 1
            else:
                failed += 1
                if first_failure is None:
                    first_failure = repr(result) if isinstance(result, BaseException) else f"{result.status} {result.description}"
        if failed and ok == 0 and chunk_start + args.chunk >= args.chunk * 3:
            sys.stderr.write("aioapns: every push failed so far; stopping early\n")
            break
    seconds = time.monotonic() - started
    cpu = cpu_seconds() - cpu_before
    client.pool.close()
    return finish("aioapns", "apns", ok, failed, seconds, cpu,
                  f"max_connections={args.connections} gather={args.chunk}{' no-ALPN' if args.no_alpn else ''}", first_failure)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--ca-file", required=True)
    parser.add_argument("--p8", required=True)
    parser.add_argument("--key-id", required=True)
    parser.add_argument("--team-id", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=1000, help="notifications per asyncio.gather")
    parser.add_argument("--connections", type=int, default=1, help="aioapns max_connections")
    parser.add_argument("--no-alpn", action="store_true", help="use an SSL context without ALPN, like aioapns' default")
    args = parser.parse_args()
    log_filter = FirstFew(5)
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(log_filter)
    logging.getLogger("aioapns").addHandler(handler)
    logging.getLogger("aioapns").setLevel(logging.WARNING)
    logging.getLogger("aioapns").propagate = False
    code = asyncio.run(run(args))
    if log_filter.dropped:
        sys.stderr.write(f"aioapns: {log_filter.dropped} more log records not shown\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
