"""A first end-to-end call over a real websocket."""

from tests.support.client import RpcClient


async def test_system_info_answers(client: RpcClient) -> None:
    """system:info reports the server name, tokenizer and limits."""
    info = await client.call("system:info")
    assert info["name"] == "strata"
    assert info["tokenizer"] == {"encoding": "cl100k_base", "source": "bundled", "exact": True}
    assert info["limits"]["maxInFlight"] == 64
