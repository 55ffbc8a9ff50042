"""firebase-admin messaging.send_each_async against the fake FCM: 500 messages per call (its limit), in a loop.

Pointing it at the fake:
  * firebase_admin.messaging._MessagingService.FCM_URL (class attribute, formatted with the project ID when
    the messaging service is first built) -> <endpoint>/v1/projects/{0}/messages:send;
  * the service-account JSON's token_uri is <endpoint>/token, so google-auth asks the fake for access tokens;
  * the test CA: send_each_async uses httpx (HTTP/2), which reads SSL_CERT_FILE; google-auth's requests
    transport reads REQUESTS_CA_BUNDLE. Both are set by the caller.
  * --token-transport h2 (default): firebase-admin refreshes the OAuth token through google-auth's
    *requests* transport (HTTP/1.1 only), and the fake closes TLS connections that do not negotiate h2, so
    google.auth.transport.requests.Request is replaced by a small httpx HTTP/2 transport with the same
    interface (only the token request goes through it; the JWT grant itself is still google-auth's).
    --token-transport requests leaves firebase-admin untouched.
"""
import argparse
import asyncio
import os
import sys
import time
import uuid
import warnings

from common import BODY, TITLE, cpu_seconds, finish


def install_h2_token_transport(ca_file: str) -> None:
    import httpx
    import google.auth.transport
    import google.auth.transport.requests as google_requests

    class _Response(google.auth.transport.Response):
        def __init__(self, response: "httpx.Response") -> None:
            self._response = response

        @property
        def status(self):
            return self._response.status_code

        @property
        def headers(self):
            return self._response.headers

        @property
        def data(self):
            return self._response.content

    class H2Request(google.auth.transport.Request):
        _client = None

        def __init__(self, session=None) -> None:
            pass

        def __call__(self, url, method="GET", body=None, headers=None, timeout=None, **kwargs):
            if H2Request._client is None:
                H2Request._client = httpx.Client(http2=True, verify=ca_file_context(ca_file))
            try:
                response = H2Request._client.request(method, url, content=body, headers=headers, timeout=timeout or 60)
            except httpx.HTTPError as error:
                import google.auth.exceptions
                raise google.auth.exceptions.TransportError(error) from error
            return _Response(response)

    google_requests.Request = H2Request


def ca_file_context(ca_file: str):
    import ssl
    return ssl.create_default_context(cafile=ca_file)


async def run(args) -> int:
    import firebase_admin
    from firebase_admin import credentials, messaging

    messaging._MessagingService.FCM_URL = args.endpoint + "/v1/projects/{0}/messages:send"
    app = firebase_admin.initialize_app(credentials.Certificate(args.service_account_file), name="bench")

    def message(i: int):
        return messaging.Message(
            token=f"bench{i}:APA91b" + "x" * 134,
            notification=messaging.Notification(title=TITLE, body=BODY),
            data={"notification_id": str(uuid.uuid4()), "category": "inactivity", "route": "/activities/new"},
            android=messaging.AndroidConfig(
                priority="high", ttl=86_400, collapse_key="inactivity",
                notification=messaging.AndroidNotification(channel_id="inactivity", notification_count=1, tag="inactivity")))

    ok = failed = 0
    first_failure = None
    cpu_before = cpu_seconds()
    started = time.monotonic()
    for chunk_start in range(0, args.count, 500):
        batch = [message(i) for i in range(chunk_start, min(args.count, chunk_start + 500))]
        response = await messaging.send_each_async(batch, dry_run=False, app=app)
        ok += response.success_count
        failed += response.failure_count
        if first_failure is None and response.failure_count:
            first_failure = next(repr(r.exception) for r in response.responses if not r.success)
        if ok == 0 and failed >= 1500:
            sys.stderr.write("firebase-admin: every push failed so far; stopping early\n")
            break
    seconds = time.monotonic() - started
    cpu = cpu_seconds() - cpu_before
    return finish("firebase-admin", "fcm", ok, failed, seconds, cpu,
                  f"send_each_async x500 token-over-{args.token_transport}", first_failure)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--ca-file", required=True)
    parser.add_argument("--service-account-file", required=True)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--token-transport", choices=["h2", "requests"], default="h2")
    args = parser.parse_args()
    # firebase-admin 7.x deprecates Message.token in favour of Message.fid; FCM v1 still takes "token".
    warnings.filterwarnings("ignore", category=DeprecationWarning, module="firebase_admin")
    warnings.filterwarnings("ignore", message="Message.token is deprecated")
    os.environ["SSL_CERT_FILE"] = args.ca_file
    os.environ["REQUESTS_CA_BUNDLE"] = args.ca_file
    if args.token_transport == "h2":
        install_h2_token_transport(args.ca_file)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
