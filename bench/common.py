"""Shared by the bench clients: the APNs provider token, the push content push-bench sends, result lines.

Every client prints one line the shell script parses:
    RESULT <client> <provider> <ok> <failed> <seconds> <cpu seconds> <note>
where seconds and CPU seconds cover the sending only (like push-bench's own line), not interpreter start-up.
"""
import base64
import json
import resource
import sys
import time

TITLE = "Har du noe å registrere?"
BODY = "Hei Kari! Det er 20 dager siden du sist registrerte en aktivitet."


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def apns_jwt(p8_path: str, key_id: str, team_id: str) -> str:
    """An ES256 APNs provider token: header {alg, kid}, claims {iss, iat}, raw R||S signature."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    with open(p8_path, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    header = b64url(json.dumps({"alg": "ES256", "kid": key_id}, separators=(",", ":")).encode())
    claims = b64url(json.dumps({"iss": team_id, "iat": int(time.time())}, separators=(",", ":")).encode())
    signing_input = f"{header}.{claims}".encode()
    r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
    return f"{header}.{claims}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def apns_payload(notification_id: str) -> dict:
    """The APNs JSON push-bench sends (about 200 bytes)."""
    return {
        "aps": {
            "alert": {"title": TITLE, "body": BODY},
            "badge": 1,
            "sound": "default",
            "thread-id": "inactivity",
            "category": "inactivity",
        },
        "notification_id": notification_id,
        "route": "/activities/new",
    }


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def result_line(client: str, provider: str, ok: int, failed: int, seconds: float, cpu: float, note: str = "") -> str:
    note = note.replace(" ", ",") or "-"
    return f"RESULT {client} {provider} {ok} {failed} {seconds:.3f} {cpu:.3f} {note}"


def finish(client: str, provider: str, ok: int, failed: int, seconds: float, cpu: float, note: str,
           first_failure: str | None) -> int:
    """Reports the first failure on stderr, prints the RESULT line bench-push reads, returns the exit code."""
    if first_failure:
        sys.stderr.write(f"{client}: first failure: {first_failure[:300]}\n")
    print(result_line(client, provider, ok, failed, seconds, cpu, note))
    return 0 if failed == 0 else 1
