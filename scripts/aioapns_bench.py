"""Reference client for scripts/bench-sender.sh: sends N pushes to the mock APNs with aioapns (PyPI).

aioapns only knows Apple's hosts, so the protocol class is pointed at the mock; the SSL context trusts the mock's
throwaway CA and offers ALPN h2 (aioapns speaks HTTP/2 directly; Apple's servers negotiate h2 the same way).
Prints one line: "aioapns connections=C pushes=N ok=K seconds=S rate=R".
"""
import asyncio
import ssl
import sys
import time

import aioapns.connection as connection
from aioapns import APNs, NotificationRequest


async def main(port: int, ca: str, key: str, key_id: str, team_id: str, tokens_file: str, connections: int, concurrency: int):
    connection.APNsDevelopmentClientProtocol.APNS_SERVER = "127.0.0.1"
    connection.APNsDevelopmentClientProtocol.APNS_PORT = port
    context = ssl.create_default_context(cafile=ca)
    context.set_alpn_protocols(["h2"])
    with open(key) as f:
        key_pem = f.read()
    tokens = [line.strip() for line in open(tokens_file) if line.strip()]
    client = APNs(key=key_pem, key_id=key_id, team_id=team_id, topic="com.example.app", use_sandbox=True,
                  max_connections=connections, ssl_context=context)
    message = {"aps": {"alert": {"title": "Nearby", "body": "bench"}, "mutable-content": 1, "category": "location",
                       "timestamp": int(time.time())}}
    semaphore = asyncio.Semaphore(concurrency)
    ok = 0

    async def one(token: str):
        nonlocal ok
        async with semaphore:
            result = await client.send_notification(NotificationRequest(device_token=token, message=message))
            if result.is_successful:
                ok += 1

    # Warm up the connections so both clients are timed without their first handshakes.
    await asyncio.gather(*(one(t) for t in tokens[:connections * 10]))
    ok = 0
    started = time.perf_counter()
    await asyncio.gather(*(one(t) for t in tokens))
    seconds = time.perf_counter() - started
    print(f"aioapns connections={connections} pushes={len(tokens)} ok={ok} seconds={seconds:.3f} rate={len(tokens) / seconds:.0f}")


if __name__ == "__main__":
    port, ca, key, key_id, team_id, tokens_file, connections, concurrency = sys.argv[1:9]
    asyncio.run(main(int(port), ca, key, key_id, team_id, tokens_file, int(connections), int(concurrency)))
