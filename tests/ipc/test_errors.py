"""Every wire error has one stable number and one stable string code."""

from __future__ import annotations

from ipc.errors import InternalError, RpcError, TooManyRequests, all_error_classes


def test_codes_are_unique_per_condition() -> None:
    """No two conditions share a data.code, and app codes sit in -32000..-32099."""
    classes = [c for c in all_error_classes() if not c.__module__.startswith("tests.")]
    data_codes = [c.data_code for c in classes]
    assert len(data_codes) == len(set(data_codes))
    standard = {-32700, -32600, -32601, -32602, -32603, -32800}
    for cls in classes:
        assert cls.code in standard or -32099 <= cls.code <= -32000, cls


def test_application_codes_have_one_number_each() -> None:
    """An application number is used by exactly one condition."""
    app = [c.code for c in all_error_classes() if -32099 <= c.code <= -32000
           and c.__module__ == "ipc.errors"]
    assert len(app) == len(set(app))


def test_error_shape() -> None:
    """to_error gives code, message and data with the string code and the fields."""
    assert TooManyRequests(limit=4).to_error() == {
        "code": -32000,
        "message": "Too many requests in flight on this connection",
        "data": {"code": "RPC_TOO_MANY_REQUESTS", "limit": 4},
    }
    assert InternalError(errorId="abc").to_error()["data"] == {"code": "INTERNAL", "errorId": "abc"}


def test_custom_message() -> None:
    """A raise site may give a clearer message without changing the codes."""
    err = RpcError("Something specific")
    assert err.to_error() == {"code": -32603, "message": "Something specific",
                              "data": {"code": "INTERNAL"}}


def test_every_domain_error_has_a_wire_code() -> None:
    """Each services.errors code maps to exactly one wire error with that data.code."""
    import services.errors as domain
    from ipc.errors import from_domain

    domain_classes = [c for c in vars(domain).values()
                      if isinstance(c, type) and issubclass(c, domain.StrataError)
                      and c is not domain.StrataError]
    for cls in domain_classes:
        wire = from_domain(cls.code, cls.message, {"n": 1})
        assert wire is not None, cls
        assert wire.data_code == cls.code, cls
        assert wire.to_error()["data"] == {"code": cls.code, "n": 1}


def test_unknown_domain_codes_are_internal() -> None:
    """A domain code with no wire class, or INTERNAL itself, is left to the INTERNAL path."""
    from ipc.errors import from_domain

    assert from_domain("NO_SUCH_CODE", "text", {}) is None
    assert from_domain("INTERNAL", "domain text", {}) is None
