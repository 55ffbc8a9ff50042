"""h2load against the fake APNs with push-bench's request shape: one connection, N streams in flight.

Mints the ES256 provider token, writes a ~200-byte APNs payload, runs h2load as a child and takes its CPU
seconds from wait4 (the whole h2load process; its start-up is negligible) and its wall time and rate from
its own "finished in" line. h2load does not verify the server certificate.
"""
import argparse
import os
import re
import subprocess
import sys
import threading
import uuid

from common import apns_jwt, apns_payload, result_line
import json


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--p8", required=True)
    parser.add_argument("--key-id", required=True)
    parser.add_argument("--team-id", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()

    payload_file = os.path.join(args.workdir, "apns-payload.json")
    with open(payload_file, "w", encoding="utf-8") as f:
        json.dump(apns_payload(str(uuid.uuid4())), f, ensure_ascii=False, separators=(",", ":"))
    token = "%064x" % 1
    command = [
        "h2load", "-n", str(args.count), "-c", str(args.connections), "-t", str(args.connections), "-m", str(args.streams),
        "-H", "authorization: bearer " + apns_jwt(args.p8, args.key_id, args.team_id),
        "-H", "apns-topic: " + args.topic,
        "-H", "apns-push-type: alert",
        "-H", "apns-priority: 10",
        "-H", "content-type: application/json",
        "-d", payload_file,
        f"{args.endpoint}/3/device/{token}",
    ]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    timer = threading.Timer(args.timeout, child.kill)
    timer.start()
    output_holder = []
    reader = threading.Thread(target=lambda: output_holder.append(child.stdout.read()))
    reader.start()
    _, status, usage = os.wait4(child.pid, 0)
    timer.cancel()
    reader.join()
    child.returncode = os.waitstatus_to_exitcode(status)
    output = output_holder[0] if output_holder else ""
    cpu = usage.ru_utime + usage.ru_stime

    finished = re.search(r"finished in ([0-9.]+)(m?s), ([0-9.]+) req/s", output)
    requests = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", output)
    codes = re.search(r"status codes: (\d+) 2xx", output)
    if not finished or not requests or not codes:
        sys.stderr.write(f"h2load: unexpected output (exit {child.returncode}):\n{output}\n")
        return 1
    seconds = float(finished.group(1)) / (1000 if finished.group(2) == "ms" else 1)
    ok = int(codes.group(1))
    failed = args.count - ok
    for line in output.splitlines():
        if line.startswith(("finished in", "requests:", "status codes:")):
            sys.stderr.write("h2load " + line.strip() + "\n")
    name = "h2load" if args.connections == 1 else f"h2load-x{args.connections}"
    print(result_line(name, "apns", ok, failed, seconds, cpu, f"-c {args.connections} -m {args.streams}"))
    return 0 if child.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
