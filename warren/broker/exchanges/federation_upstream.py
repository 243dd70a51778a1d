"""``x-federation-upstream``: the helper exchange RabbitMQ's federation declares on an upstream.

A federated exchange's link (Warren's, warren/federation/federation.py, or RabbitMQ's) declares
on the upstream broker an internal, auto-delete exchange of this type, binds the upstream
exchange to it with the downstream's binding keys, and binds its own queue to it. It routes
like a fanout, except that it drops a message that would go round a loop or too far: one whose
``x-received-from`` header (the brokers it went through) already holds ``x-max-hops`` entries,
or names the downstream (``x-downstream-name``, ``x-downstream-vhost``) as a broker it passed.
Those three arguments are the exchange's own, set by the link. Warren implements the type so
that RabbitMQ's federation can use a Warren upstream unchanged.
"""

from __future__ import annotations

from warren.broker.exchanges.fanout import FanoutExchange

__all__ = ["FederationUpstreamExchange", "should_forward", "as_text"]

ROUTING_HEADER = "x-received-from"


def should_forward(headers: dict | None, max_hops: int, downstream: str | None, downstream_vhost: str | None) -> bool:
    """RabbitMQ's rule: fewer hops than ``max_hops`` so far, and never back to the downstream."""
    if not headers:
        return True
    hops = headers.get(ROUTING_HEADER)
    if not isinstance(hops, list):
        return True
    if len(hops) >= max_hops:
        return False
    for hop in hops:
        if isinstance(hop, dict) and as_text(hop.get("cluster-name")) == downstream \
                and as_text(hop.get("vhost")) == downstream_vhost:
            return False
    return True


def as_text(value):
    """A table value that may come as octets (a longstr) as text."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return value


class FederationUpstreamExchange(FanoutExchange):
    TYPE = "x-federation-upstream"
    KEY_ROUTED = False  # match() reads the message's hop headers

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        args = self.arguments
        hops = args.get("x-max-hops", 1)
        self.max_hops = hops if isinstance(hops, int) and not isinstance(hops, bool) else 1
        self.downstream = as_text(args.get("x-downstream-name"))
        self.downstream_vhost = as_text(args.get("x-downstream-vhost"))

    def match(self, routing_key, message):
        if not should_forward(message.headers, self.max_hops, self.downstream, self.downstream_vhost):
            return ()
        return self._dests
