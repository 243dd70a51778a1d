"""SQL filter expressions and JMS message selectors: one small parser and evaluator, sans-IO.

Two dialects of the same SQL-92 WHERE-clause subset select messages for a receiving link:

* ``SQL``: RabbitMQ 4.2's ``amqp:sql-filter`` (AMQP Filter Expressions csd01 §6, the subset its
  stream-filtering guide lists). Keywords in capitals only (``AND OR NOT LIKE IN IS NULL ESCAPE
  TRUE FALSE UTC``), and a regular identifier that is a reserved word in any case (``and``,
  ``exists``, ``upper``...) is refused; identifiers are ``header.priority`` / ``h.priority``,
  ``properties.FIELD`` / ``p.FIELD`` (the 1.0 property names with ``_`` for ``-``),
  ``application_properties.KEY`` / ``a.KEY``, a bare ``KEY`` or a delimited ``[any key]`` (an
  application property); strings in ``'`` or ``"``, binary constants ``0x0A1B``, ``!=`` for
  ``<>``, ``%`` (integer remainder), ``UTC()`` (now, in ms); no ``BETWEEN``; ``<`` and ``>``
  compare strings too (octet order).
* ``JMS``: the message selectors of JMS 1.1 §3.8.1 (``apache.org:selector-filter:string``).
  Keywords in any case, ``BETWEEN``, Java-style identifiers and numbers (``10L``, ``0x1F``,
  ``1.5e3``), single-quoted strings; the JMS header names read the 1.0 sections as the AMQP JMS
  mapping places them (``JMS_HEADERS``), any other name is an application property.

Evaluation is JMS's three-valued logic (unknown is None): a missing property is unknown, and so
is any comparison or arithmetic that involves one; ``AND``/``OR``/``NOT`` follow JMS tables 3-4
to 3-6; only values of like kinds compare (numbers with numbers, booleans with booleans,
strings with strings: a string equals a binary with the same octets, as RabbitMQ compares them);
division by zero, a remainder of non-integers, arithmetic on a non-number are unknown. A message
matches when the whole expression is exactly ``True``.

Everything is checked when the link attaches (``parse`` raises ``SqlError`` saying why): at most
``MAX_LENGTH`` characters and ``MAX_TOKENS`` tokens (RabbitMQ 4.2's limits, which also bound the
parser's recursion), known section fields, LIKE patterns without control characters or a
dangling escape. LIKE is matched without regular expressions (``_Like``): a pattern costs at
most its length times the subject's per message, never backtracking without bound.
"""

from __future__ import annotations

import re
import time
import uuid

from warren.codec.amqp1_0.types import Decimal32, Decimal64, Decimal128, Described

__all__ = ["SqlError", "Expression", "parse", "SQL", "JMS", "JMS_HEADERS", "MAX_LENGTH", "MAX_TOKENS"]

MAX_LENGTH = 4096  # characters of one expression (RabbitMQ 4.2's MAX_EXPRESSION_LENGTH)
MAX_TOKENS = 200  # tokens of one expression (RabbitMQ 4.2's MAX_TOKENS)
MAX_NESTING = 50  # parentheses within parentheses: the parser recurses about 8 calls deep for each
DEFAULT_PRIORITY = 4  # a message without a priority has 1.0's (and JMS's) default
SQL, JMS = "sql", "jms"


class SqlError(ValueError):
    """An expression that cannot be read: the text says where and why."""


# --- tokens ----------------------------------------------------------------------------------

_SQL_KEYWORDS = frozenset(("AND", "OR", "NOT", "LIKE", "IN", "IS", "NULL", "ESCAPE", "TRUE", "FALSE", "UTC"))
# words an SQL identifier may not be, in any case (filtex §6.3: reserved for functions and constants)
_SQL_RESERVED = frozenset(w.lower() for w in _SQL_KEYWORDS) | {
    "exists", "nan", "inf", "lower", "upper", "left", "right", "substring", "date"}
_JMS_KEYWORDS = frozenset(("AND", "OR", "NOT", "LIKE", "IN", "IS", "NULL", "ESCAPE", "TRUE", "FALSE", "BETWEEN"))

# one alternation per dialect; the first group that matches names the token's kind
_SQL_TOKEN = re.compile(r"""
    (?P<ws>[ \t\f\n\r]+)
  | (?P<binary>0x(?:[0-9A-F]{2})+(?![0-9A-Za-z_]))
  | (?P<float>[0-9]+\.[0-9]+(?:E[+-]?[0-9]+)?)
  | (?P<int>[0-9]+)
  | (?P<string>'(?:[^']|'')*'|"(?:[^"]|"")*")
  | (?P<section>[a-zA-Z][a-zA-Z_-]*\.[a-zA-Z][a-zA-Z0-9_]*)
  | (?P<delimited>\[(?:[^\[\]]|\[\[|\]\])*\])
  | (?P<word>[a-zA-Z][a-zA-Z0-9_]*)
  | (?P<op><>|!=|>=|<=|[=<>+\-*/%(),])
""", re.VERBOSE)
_JMS_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<hex>0[xX][0-9a-fA-F]+[lL]?(?![\w$]))
  | (?P<float>(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?(?![\w$])
             |[0-9]+(?:[eE][+-]?[0-9]+[fFdD]?|[fFdD])(?![\w$]))
  | (?P<int>[0-9]+[lL]?(?![\w$]))
  | (?P<string>'(?:[^']|'')*')
  | (?P<word>(?:[^\W\d]|\$)[\w$]*)
  | (?P<op><>|>=|<=|[=<>+\-*/(),])
""", re.VERBOSE)


def _control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def _tokens(text: str, dialect: str) -> list:
    """(kind, value, position) of each token: kinds ``lit`` (a constant), ``id`` (a field
    reader), ``kw`` (a keyword, in capitals) and ``op``."""
    pattern = _SQL_TOKEN if dialect == SQL else _JMS_TOKEN
    out = []
    pos, end = 0, len(text)
    while pos < end:
        m = pattern.match(text, pos)
        if m is None:
            raise SqlError(f"unexpected character {text[pos]!r} at {pos}")
        kind, value = m.lastgroup, m.group()
        if kind == "ws":
            pass
        elif kind == "op":
            out.append(("op", "<>" if value == "!=" else value, pos))
        elif kind == "string":
            quote = value[0]
            out.append(("lit", value[1:-1].replace(quote + quote, quote), pos))
        elif kind == "int":
            digits = value.rstrip("lL")
            # Java's integer literals: a leading 0 makes an octal one (when it can be)
            octal = dialect == JMS and len(digits) > 1 and digits[0] == "0" and set(digits) <= set("01234567")
            out.append(("lit", int(digits, 8 if octal else 10), pos))
        elif kind == "hex":
            out.append(("lit", int(value.rstrip("lL"), 16), pos))
        elif kind == "float":
            out.append(("lit", float(value.rstrip("fFdD")), pos))
        elif kind == "binary":
            out.append(("lit", bytes.fromhex(value[2:]), pos))
        elif kind == "section":
            out.append(("id", _section_field(value), pos))
        elif kind == "delimited":
            key = value[1:-1]
            if _control(key):
                raise SqlError(f"a control character in the identifier at {pos}")
            out.append(("id", _application(key.replace("[[", "[").replace("]]", "]")), pos))
        else:  # a word: a keyword or an identifier
            out.append(_word(value, pos, dialect))
        if len(out) > MAX_TOKENS:
            raise SqlError(f"more than {MAX_TOKENS} tokens")
        pos = m.end()
    return out


def _word(value: str, pos: int, dialect: str):
    if dialect == SQL:
        if value in _SQL_KEYWORDS:
            return ("kw", value, pos)
        if value.lower() in _SQL_RESERVED:
            raise SqlError(f"{value!r} at {pos} is a reserved word (keywords are written in capitals)")
        return ("id", _application(value), pos)
    upper = value.upper()
    if upper in _JMS_KEYWORDS:
        return ("kw", upper, pos)
    reader = JMS_HEADERS.get(value)
    return ("id", reader if reader is not None else _application(value), pos)


# --- values as the evaluator sees them ---------------------------------------------------------
# None (unknown), bool, int, float, str or bytes; anything else a message holds (a list, a map,
# a decimal) reads as unknown.

def _plain(v):
    if v is None or type(v) is bool:
        return v
    if isinstance(v, str):
        return str(v)  # a symbol or a char: its text
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    if isinstance(v, (Decimal32, Decimal64, Decimal128)):
        return None
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, uuid.UUID):
        return v.bytes  # compared as its 16 octets, as RabbitMQ compares it
    return None


def _application(key: str):
    def read(m):
        return _plain(m.application.get(key))
    return read


def _property(name: str):
    def read(m):
        return _plain(getattr(m.properties, name, None)) if m.properties is not None else None
    return read


def _priority(m):
    p = m.header.priority if m.header is not None else None
    return DEFAULT_PRIORITY if p is None else int(p)


_PROPERTY_FIELDS = ("message_id", "user_id", "to", "subject", "reply_to", "correlation_id", "content_type",
                    "content_encoding", "absolute_expiry_time", "creation_time", "group_id", "group_sequence",
                    "reply_to_group_id")
_SECTION_FIELDS = {("header", "priority"): _priority}
_SECTION_FIELDS.update({("properties", f): _property(f) for f in _PROPERTY_FIELDS})
_SECTION_NAMES = {"header": "header", "h": "header", "properties": "properties", "p": "properties",
                  "application_properties": "application", "a": "application"}


def _section_field(text: str):
    section, _, field = text.partition(".")
    section = _SECTION_NAMES.get(section)
    if section == "application":
        return _application(field)
    reader = _SECTION_FIELDS.get((section, field))
    if reader is None:
        raise SqlError(f"unsupported field {text!r}")
    return reader


def _jms_id(v):
    """A message or correlation id as JMS shows it (the AMQP JMS mapping's prefixes for ids that
    are not strings)."""
    v = _plain(v) if not isinstance(v, uuid.UUID) else v
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, uuid.UUID):
        return "ID:AMQP_UUID:" + str(v)
    if isinstance(v, bytes):
        return "ID:AMQP_BINARY:" + v.hex().upper()
    if isinstance(v, int) and not isinstance(v, bool):
        return "ID:AMQP_ULONG:" + str(v)
    return None


def _jms_message_id(m):
    return _jms_id(m.properties.message_id) if m.properties is not None else None


def _jms_correlation_id(m):
    return _jms_id(m.properties.correlation_id) if m.properties is not None else None


def _jms_delivery_mode(m):
    return "PERSISTENT" if m.header is not None and m.header.durable else "NON_PERSISTENT"


def _jms_type(m):
    # Qpid JMS puts JMSType in the message annotation x-opt-jms-type; other clients in the subject
    annotations = m.annotations or {}
    kind = annotations.get("x-opt-jms-type")
    if isinstance(kind, str):
        return str(kind)
    return _plain(m.properties.subject) if m.properties is not None else None


def _jms_user(m):
    user = m.properties.user_id if m.properties is not None else None
    if isinstance(user, (bytes, bytearray, memoryview)):
        try:
            return bytes(user).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return _plain(user)


def _jms_delivery_count(m):
    count = m.header.delivery_count if m.header is not None else None
    return (int(count) if count is not None else 0) + 1


# the JMS names a selector may use for the 1.0 sections (JMS 1.1 §3.8.1.1; JMSX per the mapping)
JMS_HEADERS = {
    "JMSDeliveryMode": _jms_delivery_mode, "JMSPriority": _priority, "JMSMessageID": _jms_message_id,
    "JMSTimestamp": _property("creation_time"), "JMSCorrelationID": _jms_correlation_id, "JMSType": _jms_type,
    "JMSXUserID": _jms_user, "JMSXGroupID": _property("group_id"), "JMSXGroupSeq": _property("group_sequence"),
    "JMSXDeliveryCount": _jms_delivery_count,
}


# --- comparison and arithmetic ---------------------------------------------------------------

def _number(v) -> bool:
    return (type(v) is int or type(v) is float) and v == v  # a NaN is no number to compare


def _octets(v):
    return v.encode("utf-8") if type(v) is str else v


def _equal(a, b):
    """True, False, or None (unknown)."""
    if a is None or b is None:
        return None
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return ta is tb and a == b
    if _number(a) and _number(b):
        return a == b
    if ta in (str, bytes) and tb in (str, bytes):
        return a == b if ta is tb else _octets(a) == _octets(b)
    return False  # values of unlike kinds


def _not_equal(a, b):
    eq = _equal(a, b)
    return None if eq is None else not eq


def _order(op, strings: bool):
    def compare(a, b):
        if a is None or b is None:
            return None
        if _number(a) and _number(b):
            return op(a, b)
        if strings and type(a) in (str, bytes) and type(b) in (str, bytes):
            return op(_octets(a), _octets(b))
        return False  # "the comparison of non-like type values": false
    return compare


def _arithmetic(op):
    def apply(a, b):
        if not (_number(a) and _number(b)):
            return None
        return op(a, b)
    return apply


def _divide(a, b):
    return None if b == 0 else a / b


def _remainder(a, b):
    if type(a) is not int or type(b) is not int or b == 0:
        return None
    r = abs(a) % abs(b)  # the sign of the dividend, as Erlang's rem and Java's %
    return -r if a < 0 else r


_COMPARISONS = {"=": _equal, "<>": _not_equal}
_ARITHMETIC = {"+": _arithmetic(lambda a, b: a + b), "-": _arithmetic(lambda a, b: a - b),
               "*": _arithmetic(lambda a, b: a * b), "/": _arithmetic(_divide), "%": _arithmetic(_remainder)}


def _orderings(strings: bool) -> dict:
    return {">": _order(lambda a, b: a > b, strings), "<": _order(lambda a, b: a < b, strings),
            ">=": _order(lambda a, b: a >= b, strings), "<=": _order(lambda a, b: a <= b, strings)}


# --- LIKE --------------------------------------------------------------------------------------

_ANY, _ONE = object(), object()


class _Like:
    """A LIKE pattern: ``%`` any run of characters, ``_`` any one, ``escape`` makes the next
    character literal. Matched by the greedy wildcard walk that backs up only to the last ``%``:
    at most len(pattern) * len(subject) steps."""

    __slots__ = ("items", "exact", "prefix", "suffix")

    def __init__(self, pattern: str, escape: str | None) -> None:
        if _control(pattern):
            raise SqlError("a control character in a LIKE pattern")
        items: list = []
        i = 0
        while i < len(pattern):
            c = pattern[i]
            if escape is not None and c == escape:
                if i + 1 == len(pattern):
                    raise SqlError("a LIKE pattern ends with its escape character")
                items.append(pattern[i + 1])
                i += 2
                continue
            items.append(_ANY if c == "%" else _ONE if c == "_" else c)
            i += 1
        self.items = items
        # the common shapes (no wildcard, or one %) need no walk
        wild = [k for k, item in enumerate(items) if item is _ANY or item is _ONE]
        self.exact = self.prefix = self.suffix = None
        if not wild:
            self.exact = "".join(items)
        elif len(wild) == 1 and items[wild[0]] is _ANY:
            self.prefix, self.suffix = "".join(items[:wild[0]]), "".join(items[wild[0] + 1:])

    def matches(self, s: str) -> bool:
        if self.exact is not None:
            return s == self.exact
        if self.prefix is not None:
            return (len(s) >= len(self.prefix) + len(self.suffix) and s.startswith(self.prefix)
                    and s.endswith(self.suffix))
        items = self.items
        i = k = 0
        star = -1  # the last % met, and where in s its run of characters ends for now
        mark = 0
        n, m = len(s), len(items)
        while i < n:
            if k < m and items[k] is not _ANY and (items[k] is _ONE or items[k] == s[i]):
                i += 1
                k += 1
            elif k < m and items[k] is _ANY:
                star, mark = k, i
                k += 1
            elif star >= 0:  # back up: the last % takes one more character
                mark += 1
                i, k = mark, star + 1
            else:
                return False
        while k < m and items[k] is _ANY:
            k += 1
        return k == m


# --- the parser: tokens to closures over a message --------------------------------------------

class _Parser:
    """Recursive descent over the token list, each rule returning a function of the message
    (``m``: its ``header``, ``annotations``, ``properties``, ``application``). Precedence, lowest
    first: OR, AND, NOT, comparisons (not chained), + -, * / %, unary + -."""

    def __init__(self, tokens: list, dialect: str, clock) -> None:
        self.tokens, self.dialect, self.clock = tokens, dialect, clock
        self.i = 0
        self.depth = 0
        self.orderings = _orderings(dialect == SQL)

    def peek(self, kind: str, value=None) -> bool:
        if self.i >= len(self.tokens):
            return False
        t = self.tokens[self.i]
        return t[0] == kind and (value is None or t[1] == value)

    def take(self, kind: str, value=None):
        if not self.peek(kind, value):
            raise SqlError(f"expected {value or kind} {self.where()}")
        t = self.tokens[self.i]
        self.i += 1
        return t[1]

    def where(self) -> str:
        if self.i >= len(self.tokens):
            return "at the end"
        return f"at {self.tokens[self.i][2]} ({self.tokens[self.i][1]!r})" if self.tokens[self.i][0] != "id" \
            else f"at {self.tokens[self.i][2]}"

    def expression(self):
        f = self.disjunction()
        if self.i != len(self.tokens):
            raise SqlError(f"unexpected token {self.where()}")
        return f

    def disjunction(self):
        return self._chain("OR", self.conjunction, _or)

    def conjunction(self):
        return self._chain("AND", self.negation, _and)

    def _chain(self, keyword: str, operand, combine):
        """``operand (keyword operand)*``, folded left with ``combine``."""
        f = operand()
        while self.peek("kw", keyword):
            self.i += 1
            f = combine(f, operand())
        return f

    def negation(self):
        if self.peek("kw", "NOT"):
            self.i += 1
            return _not(self.negation())
        return self.comparison()

    def comparison(self):
        start = self.i
        left = self.additive()
        if self.i >= len(self.tokens):
            return left
        kind, value, _ = self.tokens[self.i]
        if kind == "op" and value in ("=", "<>", ">", "<", ">=", "<="):
            self.i += 1
            compare = _COMPARISONS.get(value) or self.orderings[value]
            right = self.additive()
            return lambda m: compare(left(m), right(m))
        negated = kind == "kw" and value == "NOT" and self.i + 1 < len(self.tokens)
        if negated:
            kind, value, _ = self.tokens[self.i + 1]
            if kind != "kw" or value not in ("LIKE", "IN", "BETWEEN"):
                return left
            self.i += 1
        if kind != "kw":
            return left
        if value == "LIKE":
            self.i += 1
            f = self.like(left)
        elif value == "IN":
            self.i += 1
            f = self.within(left)
        elif value == "BETWEEN" and self.dialect == JMS:
            self.i += 1
            f = self.between(left)
        elif value == "IS" and not negated:
            if self.i - start != 1 or self.tokens[start][0] != "id":
                raise SqlError(f"IS NULL applies to an identifier {self.where()}")
            self.i += 1
            is_not = self.peek("kw", "NOT")
            if is_not:
                self.i += 1
            self.take("kw", "NULL")
            return (lambda m: left(m) is not None) if is_not else (lambda m: left(m) is None)
        else:
            return left
        return _not(f) if negated else f

    def like(self, subject):
        pattern = self.take("lit")
        escape = None
        if self.peek("kw", "ESCAPE"):
            self.i += 1
            escape = self.take("lit")
            if type(escape) is not str or len(escape) != 1:
                raise SqlError("ESCAPE takes a string of one character")
        if type(pattern) is not str:
            raise SqlError("LIKE takes a string pattern")
        like = _Like(pattern, escape)

        def f(m):
            s = subject(m)
            if type(s) is bytes:
                try:
                    s = s.decode("utf-8")
                except UnicodeDecodeError:
                    return None
            if type(s) is not str:
                return None  # "If identifier of a LIKE ... is NULL, the value is unknown"
            return like.matches(s)
        return f

    def within(self, subject):
        self.take("op", "(")
        items = [self.additive()]
        while self.peek("op", ","):
            self.i += 1
            items.append(self.additive())
        self.take("op", ")")

        def f(m):
            v = subject(m)
            if v is None:
                return None
            return any(_equal(v, item(m)) is True for item in items)
        return f

    def between(self, subject):
        low = self.additive()
        self.take("kw", "AND")
        high = self.additive()
        at_least, at_most = self.orderings[">="], self.orderings["<="]
        return _and(lambda m: at_least(subject(m), low(m)), lambda m: at_most(subject(m), high(m)))

    def additive(self):
        f = self.multiplicative()
        while self.peek("op", "+") or self.peek("op", "-"):
            f = self.binary(f, self.take("op"), self.multiplicative)
        return f

    def multiplicative(self):
        f = self.unary()
        while self.peek("op", "*") or self.peek("op", "/") or (self.dialect == SQL and self.peek("op", "%")):
            f = self.binary(f, self.take("op"), self.unary)
        return f

    def binary(self, left, op: str, operand):
        right = operand()
        apply = _ARITHMETIC[op]
        return lambda m: apply(left(m), right(m))

    def unary(self):
        if self.peek("op", "-") or self.peek("op", "+"):
            minus = self.take("op") == "-"
            operand = self.unary()

            def f(m):
                v = operand(m)
                if not _number(v):
                    return None
                return -v if minus else v
            return f
        return self.primary()

    def primary(self):
        if self.peek("op", "("):
            self.i += 1
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise SqlError(f"parentheses nested more than {MAX_NESTING} deep")
            f = self.disjunction()
            self.take("op", ")")
            self.depth -= 1
            return f
        if self.peek("lit"):
            value = self.take("lit")
            return lambda m: value
        if self.peek("kw", "TRUE") or self.peek("kw", "FALSE"):
            value = self.take("kw") == "TRUE"
            return lambda m: value
        if self.peek("id"):
            return self.take("id")
        if self.dialect == SQL and self.peek("kw", "UTC"):
            self.i += 1
            self.take("op", "(")
            self.take("op", ")")
            clock = self.clock
            return lambda m: int(clock() * 1000)
        raise SqlError(f"expected a value {self.where()}")


def _junction(f, g, decisive: bool):
    """AND (``decisive`` False) or OR (True) in three-valued logic: ``decisive`` on either side
    decides; both sides the other way decide the other way; anything else is unknown (None)."""
    other = not decisive

    def junction(m):
        a = f(m)
        if a is decisive:
            return decisive
        b = g(m)
        if b is decisive:
            return decisive
        return other if a is other and b is other else None
    return junction


def _and(f, g):
    return _junction(f, g, False)


def _or(f, g):
    return _junction(f, g, True)


def _not(f):
    def negated(m):
        a = f(m)
        return (not a) if type(a) is bool else None
    return negated


class Expression:
    """A parsed expression: ``matches(properties, application, header, annotations)`` says
    whether a message (as a 1.0 consumer sees it, ``message.view``) is selected."""

    __slots__ = ("text", "dialect", "_test")

    def __init__(self, text: str, dialect: str, test) -> None:
        self.text, self.dialect, self._test = text, dialect, test

    def matches(self, properties, application: dict, header=None, annotations=None) -> bool:
        return self._test(_Message(header, annotations, properties, application)) is True

    def __repr__(self) -> str:
        return f"<{self.dialect} expression {self.text!r}>"


class _Message:
    __slots__ = ("header", "annotations", "properties", "application")

    def __init__(self, header, annotations, properties, application) -> None:
        self.header, self.annotations, self.properties = header, annotations, properties
        self.application = application if application is not None else {}


def parse(text, dialect: str = SQL, clock=time.time) -> Expression:
    """The expression ``text`` of ``dialect`` (``SQL`` or ``JMS``), or ``SqlError``. A JMS
    selector of only white space selects everything (JMS: "no message selector")."""
    if isinstance(text, Described) or not isinstance(text, str):
        raise SqlError("the expression is not a string")
    if len(text) > MAX_LENGTH:
        raise SqlError(f"{len(text)} characters, more than {MAX_LENGTH}")
    tokens = _tokens(text, dialect)
    if not tokens and dialect == JMS:
        return Expression(text, dialect, lambda m: True)
    parser = _Parser(tokens, dialect, clock)
    return Expression(text, dialect, parser.expression())
