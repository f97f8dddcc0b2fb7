"""The socket `boundmem serve` and `boundmem proxy` listen on: connections accepted on it send without Nagle's
algorithm, else a response written as headers then body stalls ~40 ms on the client's delayed ACK."""
from __future__ import annotations

import asyncio
import socket

from boundmem.cli.serve import _listen


def test_accepted_connections_have_nagle_off():
    sock = _listen("127.0.0.1", 0)

    async def accepted_nodelay() -> int:
        got: asyncio.Future = asyncio.get_running_loop().create_future()

        def on_connect(reader, writer) -> None:
            got.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=sock)
        _, w = await asyncio.open_connection(*sock.getsockname())
        try:
            return await asyncio.wait_for(got, 10)
        finally:
            w.close()
            server.close()
            await server.wait_closed()

    assert asyncio.run(accepted_nodelay()) != 0
