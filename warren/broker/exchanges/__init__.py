"""Exchange types: one module and one class each; ``EXCHANGE_TYPES`` maps the AMQP type name."""

from warren.broker.exchanges.base import Binding, Exchange
from warren.broker.exchanges.consistent_hash import ConsistentHashExchange
from warren.broker.exchanges.delayed_message import DelayedMessageExchange
from warren.broker.exchanges.direct import DirectExchange
from warren.broker.exchanges.fanout import FanoutExchange
from warren.broker.exchanges.federation_upstream import FederationUpstreamExchange
from warren.broker.exchanges.headers import HeadersExchange
from warren.broker.exchanges.local_random import LocalRandomExchange
from warren.broker.exchanges.topic import TopicExchange

__all__ = ["Binding", "Exchange", "DirectExchange", "FanoutExchange", "HeadersExchange", "TopicExchange",
           "ConsistentHashExchange", "DelayedMessageExchange", "FederationUpstreamExchange", "LocalRandomExchange",
           "EXCHANGE_TYPES"]

EXCHANGE_TYPES: dict[str, type[Exchange]] = {
    cls.TYPE: cls for cls in (DirectExchange, FanoutExchange, TopicExchange, HeadersExchange,
                              ConsistentHashExchange, DelayedMessageExchange, FederationUpstreamExchange,
                              LocalRandomExchange)
}
