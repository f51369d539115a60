#!/usr/bin/env python3
"""A TCP proxy that adds distance: each direction's bytes are forwarded DELAY/2 after they arrive, so a round
trip through it takes RTT more than without (for benchmarks: APNs is 20-100 ms away from most servers).

    scripts/delay-proxy.py LISTEN_PORT TARGET_PORT RTT_MS      # 127.0.0.1 only; prints "ready" when listening

Bytes keep their order and are never coalesced across their due times; the bandwidth is not limited.
"""
import asyncio
import collections
import signal
import sys


async def pump(reader, writer, one_way):
    loop = asyncio.get_running_loop()
    queue = collections.deque()
    ready = asyncio.Event()
    done = False

    async def forward():
        while True:
            while not queue:
                if done:
                    writer.close()
                    return
                ready.clear()
                await ready.wait()
            due, data = queue[0]
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            # Everything already due goes out in one write.
            chunks = []
            now = loop.time()
            while queue and queue[0][0] <= now:
                chunks.append(queue.popleft()[1])
            writer.write(b"".join(chunks))
            await writer.drain()

    sender = asyncio.create_task(forward())
    try:
        while True:
            data = await reader.read(1 << 16)
            if not data:
                break
            queue.append((loop.time() + one_way, data))
            ready.set()
    except ConnectionError:
        pass
    done = True
    ready.set()
    try:
        await sender
    except ConnectionError:
        pass


async def main():
    listen, target, rtt_ms = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    one_way = rtt_ms / 2000

    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(
            pump(client_reader, server_writer, one_way), pump(server_reader, client_writer, one_way),
            return_exceptions=True)

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    # A parent may have started us with signals blocked (Foundation's Process does): stop on SIGTERM anyway.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    asyncio.run(main())
