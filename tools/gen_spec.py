#!/usr/bin/env python3
"""Generate warren/spec/<version>.py from the protocol definitions in ../shared/spec.

    python tools/gen_spec.py [--spec-dir ../shared/spec] [--out warren/spec] [--check]

Each generated module holds names, ids and types only (never the spec's prose): constants,
one class per method with a specialised ``decode``/``encode``, one properties class per content
class, and the lookup table ``METHODS`` keyed by ``class_id << 16 | method_id``. The versions
other than 0-9-1 repeat most of each other's methods: a method (with its ``-ok``) written
identically by an earlier module is imported from it instead of written again.

Inputs are read by a loader per format into one model (``Spec``): RabbitMQ's codegen JSON
(ids, types, defaults, synchronous flags) and the AMQP XML (``<class>/<method>/<field>`` with
domains). A new version is one line in ``TARGETS``. AMQP 0-10 (``TARGETS_0_10``, another family)
has its own loader and emitter: a declarative module (controls, commands, structs with their
codes, size/pack widths and typed fields, enums, the type table) that warren/codec/amqp0_10
interprets. AMQP 1.0 (``TARGETS_1_0``, a third family) is read from the OASIS XML kept in this
repository (``spec/amqp1_0``, ``--spec-1-0-dir``): encodings, restricted types and their choices,
composites with their descriptors and fields. ``--check`` regenerates in memory and exits 1
if a committed module differs (tests/spec/test_generated.py runs it).
"""

from __future__ import annotations

import argparse
import json
import keyword
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# module name -> (loader, source file, version tuple, title of the module docstring or None)
# INVENTORY.md §1/§9: the standard 0-8 and 0-9 XML, Qpid's variants of both (exchange.bound,
# basic.consume arguments, the recover-ok / recover-sync additions) and Qpid's "0-91".
TARGETS = {
    "amqp0_9_1": ("json", "amqp-rabbitmq-0.9.1.json", (0, 9, 1), None),
    "amqp0_8": ("xml", "amqp0-8.xml", (0, 8, 0), "AMQP 0-8"),
    "amqp0_8_qpid": ("xml", "amqp0-8.qpid.xml", (0, 8, 0), "AMQP 0-8, Qpid's variant"),
    "amqp0_9": ("xml", "amqp0-9.xml", (0, 9, 0), "AMQP 0-9"),
    "amqp0_9_qpid": ("xml", "amqp0-9.qpid.xml", (0, 9, 0), "AMQP 0-9, Qpid's variant"),
    "amqp0_91_qpid": ("xml", "amqp0-9-1.qpid-stripped.xml", (0, 91, 0), "Qpid's AMQP \"0-91\""),
}

FIXED = {"octet": ("B", 1), "short": ("H", 2), "long": ("I", 4), "longlong": ("Q", 8), "timestamp": ("Q", 8)}
DEFAULTS = {"octet": 0, "short": 0, "long": 0, "longlong": 0, "timestamp": 0, "shortstr": "",
            "longstr": b"", "bit": False, "table": None, "content": (0, b"")}
# wire types with a codec function (the others are FIXED or bit); "content" is 0-9 only (§5.1)
CODECS = {"shortstr": "shortstr", "longstr": "longstr", "table": "table", "content": "content"}


@dataclass
class Field:
    name: str
    type: str
    default: object = None


@dataclass
class Method:
    name: str
    id: int
    synchronous: bool
    content: bool
    fields: list[Field] = field(default_factory=list)


@dataclass
class Cls:
    name: str
    id: int
    methods: list[Method] = field(default_factory=list)
    properties: list[Field] = field(default_factory=list)


@dataclass
class Spec:
    source: str
    version: tuple[int, int, int]
    constants: list[tuple[str, int, str]]
    classes: list[Cls]


# --- loaders ---------------------------------------------------------------------------------

def load_json(path: Path, version) -> Spec:
    d = json.loads(path.read_text())
    domains = {name: typ for name, typ in d["domains"]}

    def resolve(arg) -> str:
        return arg["type"] if "type" in arg else domains[arg["domain"]]

    classes = []
    for c in d["classes"]:
        cls = Cls(c["name"], c["id"])
        for m in c["methods"]:
            fields = []
            for a in m["arguments"]:
                t = resolve(a)
                default = a.get("default-value", DEFAULTS[t])
                if t == "table" and default == {}:
                    default = None
                if t == "longstr" and isinstance(default, str):
                    default = default.encode()
                fields.append(Field(a["name"], t, default))
            cls.methods.append(Method(m["name"], m["id"], bool(m.get("synchronous")), bool(m.get("content")), fields))
        cls.properties = [Field(p["name"], resolve(p)) for p in c.get("properties", [])]
        classes.append(cls)
    consts = [(k["name"], k["value"], k.get("class", "")) for k in d["constants"]]
    return Spec(path.name, version, consts, classes)


def _xml_name(name: str) -> str:
    """0-8 XML spells names with spaces ("version major"), later ones with dashes."""
    return " ".join(name.split()).replace(" ", "-")


def load_xml(path: Path, version) -> Spec:
    root = ET.parse(path).getroot()
    # Domain names are matched with spaces and dashes made equal: the 0-8 XML uses spaces, and
    # Qpid's 0-9 / 0-91 files refer to the domain "queue-name" by its label "queue name".
    domains = {_xml_name(dom.get("name")): dom.get("type") for dom in root.iter("domain")}

    def resolve(el) -> str:
        t = el.get("type") or el.get("domain")
        seen = set()
        while t not in DEFAULTS:
            key = _xml_name(t)
            if key not in domains or key in seen:
                raise SystemExit(f"{path.name}: cannot resolve the type of field {el.get('name')!r} ({t!r})")
            seen.add(key)
            t = domains[key]
        return t

    def fields_of(parent) -> list[Field]:
        out = []
        for f in parent.findall("field"):
            t = resolve(f)
            out.append(Field(_xml_name(f.get("name")), t, DEFAULTS[t]))
        return out

    classes = []
    for c in root.findall("class"):
        cls = Cls(_xml_name(c.get("name")), int(c.get("index")))
        cls.properties = [Field(p.name, p.type) for p in fields_of(c)]
        for m in c.findall("method"):
            cls.methods.append(Method(_xml_name(m.get("name")), int(m.get("index")), m.get("synchronous") == "1",
                                      m.get("content") == "1", fields_of(m)))
        classes.append(cls)
    consts = [(_xml_name(k.get("name")), int(k.get("value")), _xml_name(k.get("class", "")))
              for k in root.findall("constant")]
    return Spec(path.name, version, consts, classes)


LOADERS = {"json": load_json, "xml": load_xml}


# --- emitters --------------------------------------------------------------------------------

def pyname(name: str) -> str:
    n = name.replace("-", "_").replace(" ", "_")
    return n + "_" if keyword.iskeyword(n) else n


def camel(*parts: str) -> str:
    return "".join(w.capitalize() for p in parts for w in p.replace("-", " ").split())


_STRUCTS: dict[str, str] = {}
_CODEC_FUNCTIONS: set[str] = set()


def _use(fn: str) -> str:
    """Name of a warren.spec.fields function the module calls (collected while emitting)."""
    _CODEC_FUNCTIONS.add(fn)
    return fn


def st(fmt: str) -> str:
    """The module-level name of a precompiled struct.Struct for `fmt` (collected while emitting)."""
    return _STRUCTS.setdefault(fmt, "_" + fmt[1:])


def field_runs(fields: list[Field]):
    """The field list in the pieces a codec handles at once: ``("bits", up to 8 bit fields sharing
    one octet)``, ``("fixed", a run of fixed-size fields: one struct)``, ``("one", [a field])``."""
    i = 0
    while i < len(fields):
        f = fields[i]
        if f.type == "bit":
            group = []
            while i < len(fields) and fields[i].type == "bit":
                group.append(fields[i])
                i += 1
            for start in range(0, len(group), 8):
                yield "bits", group[start:start + 8]
        elif f.type in FIXED:
            run = []
            while i < len(fields) and fields[i].type in FIXED:
                run.append(fields[i])
                i += 1
            yield "fixed", run
        else:
            yield "one", [f]
            i += 1


def emit_decode(fields: list[Field], out: list[str], target: str, indent: str) -> None:
    """Straight-line decoding of a field list into attributes of `target`."""
    for kind, run in field_runs(fields):
        if kind == "bits":
            out.append(f"{indent}bits = buf[off]")
            out.append(f"{indent}off += 1")
            for j, b in enumerate(run):
                out.append(f"{indent}{target}.{pyname(b.name)} = bool(bits & {1 << j})")
        elif kind == "fixed":
            # a run of fixed-size fields is one unpack
            fmt = ">" + "".join(FIXED[r.type][0] for r in run)
            size = sum(FIXED[r.type][1] for r in run)
            names = ", ".join(f"{target}.{pyname(r.name)}" for r in run)
            out.append(f"{indent}({names},) = {st(fmt)}.unpack_from(buf, off)")
            out.append(f"{indent}off += {size}")
        else:
            f = run[0]
            fn = _use("decode_" + CODECS[f.type])
            out.append(f"{indent}{target}.{pyname(f.name)}, off = {fn}(buf, off)")


def emit_encode(fields: list[Field], out: list[str], target: str, indent: str, head: str) -> None:
    parts = [head] if head else []
    for kind, run in field_runs(fields):
        if kind == "bits":
            terms = " | ".join(f"({1 << j} if {target}.{pyname(b.name)} else 0)" for j, b in enumerate(run))
            parts.append(f"bytes(({terms},))")
        elif kind == "fixed":
            fmt = ">" + "".join(FIXED[r.type][0] for r in run)
            args = ", ".join(f"{target}.{pyname(r.name)}" for r in run)
            parts.append(f"{st(fmt)}.pack({args})")
        else:
            f = run[0]
            fn = _use("encode_" + CODECS[f.type])
            parts.append(f"{fn}({target}.{pyname(f.name)})")
    if not parts:
        out.append(f"{indent}return b''")
    elif len(parts) == 1:
        out.append(f"{indent}return {parts[0]}")
    else:
        out.append(f"{indent}return b''.join((")
        for p in parts:
            out.append(f"{indent}    {p},")
        out.append(f"{indent}))")


def emit_method(cls: Cls, m: Method) -> list[str]:
    name = camel(cls.name, m.name)
    index = cls.id << 16 | m.id
    names = [pyname(f.name) for f in m.fields]
    out = [f"class {name}(Method):"]
    out.append(f"    __slots__ = ({''.join(repr(n) + ', ' for n in names)})")
    out.append(f"    NAME = {cls.name + '.' + m.name!r}")
    out.append(f"    CLASS_ID = {cls.id}")
    out.append(f"    METHOD_ID = {m.id}")
    out.append(f"    INDEX = 0x{index:08X}")
    out.append(f"    SYNCHRONOUS = {m.synchronous}")
    out.append(f"    CONTENT = {m.content}")
    out.append(f"    FIELDS = ({''.join(f'({pyname(f.name)!r}, {f.type!r}), ' for f in m.fields)})")
    out.append("")
    if m.fields:
        params = ", ".join(f"{pyname(f.name)}={f.default!r}" for f in m.fields)
        out.append(f"    def __init__(self, {params}):")
        for f in m.fields:
            n = pyname(f.name)
            if f.type == "table":
                out.append(f"        self.{n} = {{}} if {n} is None else {n}")
            else:
                out.append(f"        self.{n} = {n}")
        out.append("")
    out.append("    @classmethod")
    out.append("    def decode(cls, buf, off):")
    out.append("        m = cls.__new__(cls)")
    emit_decode(m.fields, out, "m", "        ")
    out.append("        return m, off")
    out.append("")
    out.append("    def encode(self):")
    emit_encode(m.fields, out, "self", "        ", f"{index.to_bytes(4, 'big')!r}")
    out.append("")
    out.append("")
    return out


def emit_properties(cls: Cls) -> list[str]:
    name = camel(cls.name, "properties")
    props = cls.properties
    if len(props) > 15:
        raise SystemExit(f"{cls.name}: more than 15 properties needs a second flag word")
    names = [pyname(p.name) for p in props]
    out = [f"class {name}(Properties):"]
    out.append(f"    __slots__ = ({''.join(repr(n) + ', ' for n in names)})")
    out.append(f"    CLASS_ID = {cls.id}")
    out.append(f"    FIELDS = ({''.join(f'({pyname(p.name)!r}, {p.type!r}), ' for p in props)})")
    out.append("")
    params = ", ".join(f"{n}=None" for n in names)
    out.append(f"    def __init__(self, {params}):")
    for n in names:
        out.append(f"        self.{n} = {n}")
    out.append("")
    out.append("    @classmethod")
    out.append("    def decode(cls, buf, off):")
    out.append("        p = cls.__new__(cls)")
    out.append(f"        (flags,) = {st('>H')}.unpack_from(buf, off)")
    out.append("        off += 2")
    out.append("        while (buf[off - 1] & 1):  # a continuation flag word follows; no class here needs it")
    out.append("            off += 2")
    for i, p in enumerate(props):
        n = pyname(p.name)
        mask = 0x8000 >> i
        if p.type == "bit":
            out.append(f"        p.{n} = bool(flags & 0x{mask:04X})")
            continue
        out.append(f"        if flags & 0x{mask:04X}:")
        emit_decode([p], out, "p", "            ")
        out.append("        else:")
        out.append(f"            p.{n} = None")
    out.append("        return p, off")
    out.append("")
    out.append("    def encode(self):")
    out.append("        flags = 0")
    out.append("        parts = [b'']")
    for i, p in enumerate(props):
        n = pyname(p.name)
        mask = 0x8000 >> i
        if p.type == "bit":
            out.append(f"        if self.{n}:")
            out.append(f"            flags |= 0x{mask:04X}")
            continue
        out.append(f"        if self.{n} is not None:")
        out.append(f"            flags |= 0x{mask:04X}")
        sub: list[str] = []
        emit_encode([p], sub, "self", "", "")
        out.append(f"            parts.append({sub[0][len('return '):]})")
    out.append(f"        parts[0] = {st('>H')}.pack(flags)")
    out.append("        return b''.join(parts)")
    out.append("")
    out.append("")
    return out


def emit_groups(cls: Cls) -> list[tuple[list[str], list[str], dict[str, str], set[str]]]:
    """An AMQP class as units that are shared whole or not at all: each method together with
    its ``-ok`` reply (a handler answering a native method finds the reply in the request's
    module), and the properties class. Each unit: (class names, lines, structs used, codec
    functions used), so a module defines only the structs and imports its own code needs."""
    groups: dict[str, list[Method]] = {}
    for m in cls.methods:
        groups.setdefault(m.name.removesuffix("-ok"), []).append(m)
    units = []
    for methods in groups.values():
        _STRUCTS.clear()
        _CODEC_FUNCTIONS.clear()
        lines: list[str] = []
        for m in methods:
            lines.extend(emit_method(cls, m))
        units.append(([camel(cls.name, m.name) for m in methods], lines, dict(_STRUCTS), set(_CODEC_FUNCTIONS)))
    if cls.properties:
        _STRUCTS.clear()
        _CODEC_FUNCTIONS.clear()
        lines = emit_properties(cls)
        units.append(([camel(cls.name, "properties")], lines, dict(_STRUCTS), set(_CODEC_FUNCTIONS)))
    return units


def _import(module: str, names: list[str]) -> list[str]:
    out = [f"from warren.spec.{module} import ("]
    line = "   "
    for n in names:
        if len(line) + len(n) + 2 > 100:
            out.append(line)
            line = "   "
        line += f" {n},"
    out.append(line)
    out.append(")")
    return out


def generate(module: str, spec: Spec, title: str | None = None, shared: dict | None = None) -> str:
    """The module text. ``shared`` maps the text of every unit (``emit_groups``) already emitted
    by another module to that module's name: a unit identical to one of them is imported from
    there instead of written again (the versions repeat most of each other's tables), and this
    module's own units are added to it. ``None``: emit everything."""
    title = title or f'AMQP {".".join(map(str, spec.version))}'
    structs: dict[str, str] = {}
    functions: set[str] = set()
    imports: dict[str, list[str]] = {}  # module -> names taken from it
    body: list[str] = []
    for cls in spec.classes:
        for names, lines, used_structs, used_functions in emit_groups(cls):
            text = "\n".join(lines)
            home = shared.get(text) if shared is not None else None
            if home is not None:
                imports.setdefault(home, []).extend(names)
                continue
            if shared is not None:
                shared[text] = module
            body.extend(lines)
            structs.update(used_structs)
            functions |= used_functions
    out = [
        f'"""{title} protocol tables.',
        "",
        f"Generated from {spec.source} by tools/gen_spec.py; do not edit, run the tool.",
        '"""',
        "",
        "# fmt: off",
    ]
    if structs:
        out.append("from struct import Struct as _Struct")
        out.append("")
    if functions:
        out.append("from warren.spec.fields import (")
        out.append("    " + ", ".join(sorted(functions)) + ",")
        out.append(")")
    out.append("from warren.spec.base import Method, Properties, tables")
    for home, names in imports.items():
        out.extend(_import(home, names))
    out.append("")
    out.append(f"VERSION = {spec.version!r}")
    out.append("")
    for fmt, name in sorted(structs.items(), key=lambda kv: kv[1]):
        out.append(f"{name} = _Struct({fmt!r})")
    if structs:
        out.append("")
    for name, value, klass in spec.constants:
        comment = f"  # {klass}" if klass else ""
        out.append(f"{pyname(name).upper()} = {value}{comment}")
    out.append("")
    out.append("")
    out.extend(body)
    out.append("# METHODS: class_id << 16 | method_id -> method class; PROPERTIES: class id -> properties")
    out.append("# class; CLASS_IDS: class name -> id (of every class defined or imported above)")
    out.append("METHODS, PROPERTIES, CLASS_IDS = tables(globals())")
    out.append("")
    return "\n".join(out)


# --- AMQP 0-10 ---------------------------------------------------------------------------------
#
# 0-10 is another family (INVENTORY.md §11): typed fields in packed structs, controls and
# commands coded by class and op code, structs with size/pack widths. Its module holds tables only
# (classes with FIELDS and codes, enums, the type table); warren/codec/amqp0_10 encodes and
# decodes them, so the generated code stays declarative and the codec is written once.

# module -> (source, the official text it is compared with). Qpid's errata file is what Qpid's
# clients are generated from (qpid-python loads it); where it differs from the official XML the
# difference is listed in the module's docstring.
TARGETS_0_10 = {"amqp0_10": ("amqp0-10.qpid-errata.xml", "amqp0-10.xml")}

_NS = "{http://www.amqp.org/schema/amqp.xsd}"


@dataclass
class Field010:
    name: str
    type: str  # a type name, or the NAME of a struct ("message.reply-to")
    required: bool
    default: object = None
    domain: str | None = None  # the enum domain it takes its values from, if any


@dataclass
class Struct010:
    cls: str
    name: str
    class_code: int
    size: int
    pack: int
    code: int | None
    fields: list = field(default_factory=list)


@dataclass
class Op010:
    kind: str  # control | command
    cls: str
    name: str
    class_code: int
    code: int
    fields: list = field(default_factory=list)
    implement: list = field(default_factory=list)
    responses: list = field(default_factory=list)
    result: str | None = None
    header: list | None = None  # struct NAMEs the header segment may hold; None: no header
    body: bool = False


@dataclass
class Spec010:
    source: str
    version: tuple
    types: list  # (name, code, fixed width, size-prefix width)
    constants: list
    enums: list  # (qualified domain, type, [(choice, value)])
    structs: list
    ops: list


def load_0_10(path: Path) -> Spec010:
    root = ET.parse(path).getroot()
    for el in root.iter():
        el.tag = el.tag.replace(_NS, "")
    types = []
    for t in root.findall("type"):
        code = t.get("code")
        fixed, var = t.get("fixed-width"), t.get("variable-width")
        types.append((t.get("name"), int(code, 16) if code else None, int(fixed) if fixed else None,
                      int(var) if var else None))
    type_names = {t[0] for t in types}
    domains: dict[str, str] = {}  # qualified name -> type (a type, domain or struct name)
    enums = []

    def domain(el, prefix: str) -> None:
        qual = prefix + el.get("name")
        domains[qual] = el.get("type")
        enum = el.find("enum")
        if enum is not None:
            enums.append((qual, el.get("type"), [(c.get("name"), int(c.get("value"), 0)) for c in enum.findall("choice")]))

    for d in root.findall("domain"):
        domain(d, "")
    struct_names: set[str] = set()
    for c in root.findall("class"):
        for d in c.findall("domain"):
            domain(d, c.get("name") + ".")
        for s in c.iter("struct"):
            struct_names.add(c.get("name") + "." + s.get("name"))

    def resolve(t: str, cls: str, where: str) -> tuple[str, str | None]:
        """(wire type or struct NAME, enum domain or None) of a type reference made in class ``cls``."""
        enum_domain = None
        seen = set()
        while True:
            candidates = [t] if "." in t else [f"{cls}.{t}", t]
            for cand in candidates:
                if cand in struct_names:
                    return cand, enum_domain
                if cand in domains:
                    if cand in seen:
                        raise SystemExit(f"{path.name}: domain loop at {cand}")
                    seen.add(cand)
                    if enum_domain is None and any(e[0] == cand for e in enums):
                        enum_domain = cand
                    cls = cand.split(".")[0] if "." in cand else cls
                    t = domains[cand]
                    break
                if cand in type_names:
                    return cand, enum_domain
            else:
                raise SystemExit(f"{path.name}: cannot resolve type {t!r} of {where}")

    def fields_of(el, cls: str, where: str) -> list:
        out = []
        for f in el.findall("field"):
            t, dom = resolve(f.get("type"), cls, f"{where}.{f.get('name')}")
            default = f.get("default")
            if default is not None:
                default = bool(int(default)) if t == "bit" else int(default, 0)
            out.append(Field010(f.get("name"), t, f.get("required") == "true", default, dom))
        return out

    structs, ops = [], []
    for c in root.findall("class"):
        cname, ccode = c.get("name"), int(c.get("code"), 16)

        def struct(s, cname=cname, ccode=ccode) -> str:
            code = s.get("code")
            structs.append(Struct010(cname, s.get("name"), ccode, int(s.get("size")), int(s.get("pack")),
                                     int(code, 16) if code else None,
                                     fields_of(s, cname, f"{cname}.{s.get('name')}")))
            return f"{cname}.{s.get('name')}"

        for s in c.findall("struct"):
            struct(s)
        for kind in ("control", "command"):
            for o in c.findall(kind):
                op = Op010(kind, cname, o.get("name"), ccode, int(o.get("code"), 16),
                           fields_of(o, cname, f"{cname}.{o.get('name')}"),
                           [(i.get("role"), i.get("handle", "MUST").lower()) for i in o.findall("implement")],
                           [r.get("name") for r in o.findall("response")])
                result = o.find("result")
                if result is not None:
                    inner = result.find("struct")
                    op.result = struct(inner) if inner is not None else resolve(result.get("type"), cname,
                                                                                  f"result of {op.name}")[0]
                segments = o.find("segments")
                if segments is not None:
                    header = segments.find("header")
                    if header is not None:
                        op.header = [resolve(e.get("type"), cname, f"header of {op.name}")[0]
                                     for e in header.findall("entry")]
                    op.body = segments.find("body") is not None
                ops.append(op)
    consts = [(k.get("name"), int(k.get("value"))) for k in root.findall("constant")]
    version = (int(root.get("major")), int(root.get("minor")), 0)
    structs.sort(key=lambda s: (s.class_code, s.code is None, s.code or 0))
    return Spec010(path.name, version, types, consts, enums, structs, ops)


def _errata(spec: Spec010, official: Spec010) -> list[str]:
    """What the source changes against the official text, in words, for the module docstring."""
    out = []
    theirs = {(s.cls, s.name): s for s in official.structs}
    for s in spec.structs:
        o = theirs.get((s.cls, s.name))
        if o is None:
            out.append(f"struct {s.cls}.{s.name} is added")
            continue
        for attr in ("size", "pack", "code"):
            if getattr(s, attr) != getattr(o, attr):
                out.append(f"struct {s.cls}.{s.name}: {attr} {getattr(s, attr)} (official: {getattr(o, attr)})")
        if s.fields != o.fields:
            out.append(f"struct {s.cls}.{s.name}: fields differ")
    ops = {(o.cls, o.name): o for o in official.ops}
    for op in spec.ops:
        o = ops.get((op.cls, op.name))
        if o is None:
            out.append(f"{op.kind} {op.cls}.{op.name} is added")
            continue
        for attr in ("code", "fields", "implement", "responses", "result", "header", "body"):
            if getattr(op, attr) != getattr(o, attr):
                out.append(f"{op.kind} {op.cls}.{op.name}: {attr} {getattr(op, attr)!r} (official: {getattr(o, attr)!r})")
    for what in ("types", "constants", "enums"):
        if getattr(spec, what) != getattr(official, what):
            out.append(f"{what} differ")
    return out


def _fields_tuple(fields: list) -> str:
    return "(" + "".join(f"({pyname(f.name)!r}, {f.type!r}, {f.required}), " for f in fields) + ")"


def _init(fields: list, out: list[str]) -> None:
    if not fields:
        return
    params = ", ".join(f"{pyname(f.name)}={(False if f.type == 'bit' else None) if f.default is None else f.default!r}"
                       for f in fields)
    out.append(f"    def __init__(self, {params}):")
    for f in fields:
        out.append(f"        self.{pyname(f.name)} = {pyname(f.name)}")
    out.append("")


def _slots(fields: list) -> str:
    return "(" + "".join(repr(pyname(f.name)) + ", " for f in fields) + ")"


def generate_0_10(spec: Spec010, official: Spec010) -> str:
    errata = _errata(spec, official)
    out = [
        '"""AMQP 0-10 protocol tables.',
        "",
        f"Generated from {spec.source} by tools/gen_spec.py; do not edit, run the tool. Classes and",
        "their meaning: warren/spec/base010.py; wire forms: warren/codec/amqp0_10.",
        "",
        f"Where {spec.source} differs from {official.source} (Qpid's corrections, which Qpid's",
        "clients follow):",
        "",
    ]
    out.extend(f"* {line}" for line in errata)
    out += ['"""', "", "# fmt: off", "import enum", "", "from warren.spec.base010 import Command, Control, Struct, tables",
            "", f"VERSION = {spec.version!r}", ""]
    for name, value in spec.constants:
        out.append(f"{pyname(name).upper()} = {value}")
    out.append("")
    out.append("# type name -> (type code or None, fixed width or None, size-prefix width or None)")
    out.append("TYPES = {")
    for name, code, fixed, var in spec.types:
        out.append(f"    {name!r}: ({'None' if code is None else f'0x{code:02X}'}, {fixed}, {var}),")
    out.append("}")
    out.append("")
    out.append("")
    for qual, typ, choices in spec.enums:
        out.append(f"class {camel(*qual.split('.'))}(enum.IntEnum):")
        out.append(f"    \"\"\"{qual} ({typ})\"\"\"")
        for cname, value in choices:
            out.append(f"    {pyname(cname).upper()} = {value}")
        out.append("")
        out.append("")
    for s in spec.structs:
        out.append(f"class {camel(s.cls, s.name)}(Struct):")
        out.append(f"    __slots__ = {_slots(s.fields)}")
        out.append(f"    NAME = {s.cls + '.' + s.name!r}")
        out.append(f"    CLASS_CODE = {s.class_code}")
        out.append(f"    CODE = {s.code}")
        out.append(f"    INDEX = {'None' if s.code is None else f'0x{s.class_code << 8 | s.code:04X}'}")
        out.append(f"    SIZE = {s.size}")
        out.append(f"    PACK = {s.pack}")
        out.append(f"    FIELDS = {_fields_tuple(s.fields)}")
        out.append("")
        _init(s.fields, out)
        out.append("")
    for op in spec.ops:
        base = "Control" if op.kind == "control" else "Command"
        out.append(f"class {camel(op.cls, op.name)}({base}):")
        out.append(f"    __slots__ = {_slots(op.fields)}")
        out.append(f"    NAME = {op.cls + '.' + op.name!r}")
        out.append(f"    CLASS_CODE = {op.class_code}")
        out.append(f"    CODE = {op.code}")
        out.append(f"    INDEX = 0x{op.class_code << 8 | op.code:04X}")
        out.append(f"    FIELDS = {_fields_tuple(op.fields)}")
        out.append(f"    IMPLEMENT = {tuple(op.implement)!r}")
        if op.responses:
            out.append(f"    RESPONSES = {tuple(op.cls + '.' + r for r in op.responses)!r}")
        if op.result:
            out.append(f"    RESULT = {op.result!r}")
        if op.header is not None:
            out.append("    HEADER = True")
            out.append(f"    HEADER_STRUCTS = {tuple(op.header)!r}")
        if op.body:
            out.append("    BODY = True")
        out.append("")
        _init(op.fields, out)
        out.append("")
    out.append("# CONTROLS, COMMANDS: class code << 8 | op code -> class; STRUCTS: the same for coded structs;")
    out.append("# BY_NAME: NAME -> class (every control, command and struct)")
    out.append("CONTROLS, COMMANDS, STRUCTS, BY_NAME = tables(globals())")
    out.append("# enum domain of a field: (NAME of the control/command/struct, field) -> enum class")
    out.append("FIELD_ENUMS = {")
    for owner in [*((f"{s.cls}.{s.name}", s.fields) for s in spec.structs), *((f"{o.cls}.{o.name}", o.fields) for o in spec.ops)]:
        name, fields = owner
        for f in fields:
            if f.domain:
                out.append(f"    ({name!r}, {pyname(f.name)!r}): {camel(*f.domain.split('.'))},")
    out.append("}")
    out.append("")
    return "\n".join(out)


# --- AMQP 1.0 ----------------------------------------------------------------------------------
#
# 1.0 is a third family (OASIS AMQP 1.0, part 1 "types", part 2 "transport", part 3 "messaging",
# part 4 "transactions", part 5 "security"): a self-describing type system, and composite types
# (described lists) for everything else. Its module holds tables only (the encodings of each
# primitive, restricted types and their choices, one class per composite with its descriptors and
# fields); warren/codec/amqp1_0 encodes and decodes them. The XML is Qpid Proton's copy of the
# OASIS files (spec/amqp1_0/README.md), read from the repository itself, not ../shared/spec.

SPEC_1_0_DIR = ROOT / "spec" / "amqp1_0"
TARGETS_1_0 = {"amqp1_0": ("types.xml", "transport.xml", "messaging.xml", "security.xml", "transactions.xml")}


@dataclass
class Field10:
    name: str
    type: str
    mandatory: bool
    multiple: bool
    default: str | None
    requires: str | None


@dataclass
class Type10:
    name: str
    cls: str  # primitive | restricted | composite
    source: str | None
    provides: tuple
    symbol: str | None = None
    code: int | None = None
    encodings: list = field(default_factory=list)  # (name, code, category, width)
    choices: list = field(default_factory=list)  # (name, value text)
    fields: list = field(default_factory=list)


def load_1_0(spec_dir: Path, files: tuple) -> tuple[list, list, list]:
    """(types in document order, definitions (name, value), file names) of the 1.0 XML files."""
    types, definitions = [], []
    for name in files:
        root = ET.parse(spec_dir / name).getroot()
        for el in root.iter():
            el.tag = el.tag.replace(_NS, "")
        for el in root.iter():
            if el.tag == "definition":
                definitions.append((el.get("name"), el.get("value")))
            if el.tag != "type":
                continue
            provides = tuple(p.strip() for p in (el.get("provides") or "").split(",") if p.strip())
            t = Type10(el.get("name"), el.get("class"), el.get("source"), provides)
            d = el.find("descriptor")
            if d is not None:
                domain, ident = d.get("code").split(":")
                t.symbol, t.code = d.get("name"), int(domain, 16) << 32 | int(ident, 16)
            for e in el.findall("encoding"):
                t.encodings.append((e.get("name"), int(e.get("code"), 16), e.get("category"), int(e.get("width"))))
            for c in el.findall("choice"):
                t.choices.append((c.get("name"), c.get("value")))
            for f in el.findall("field"):
                t.fields.append(Field10(f.get("name"), f.get("type"), f.get("mandatory") == "true",
                                        f.get("multiple") == "true", f.get("default"), f.get("requires")))
            types.append(t)
    return types, definitions, list(files)


def _primitive_1_0(name: str, by_name: dict) -> str:
    """The primitive a declared type encodes as ("*" stays "*"; a composite is "list")."""
    seen = set()
    while name != "*" and name in by_name and by_name[name].cls != "primitive":
        if name in seen:
            raise SystemExit(f"AMQP 1.0: restricted type loop at {name}")
        seen.add(name)
        t = by_name[name]
        if t.cls == "composite":
            return "list"
        name = t.source
    if name != "*" and name not in by_name:
        raise SystemExit(f"AMQP 1.0: unknown type {name!r}")
    return name


def _choice_value(t: Type10, text: str, primitive: str):
    if primitive == "boolean":
        return text == "true"
    if primitive in ("symbol", "string"):
        return text
    return int(text, 0)


def _default_1_0(f: Field10, by_name: dict):
    if f.default is None:
        return None
    t = by_name.get(f.type)
    primitive = _primitive_1_0(f.type, by_name)
    if t is not None and t.choices:
        for name, value in t.choices:
            if name == f.default:
                return _choice_value(t, value, primitive)
        raise SystemExit(f"AMQP 1.0: default {f.default!r} of {f.name} is not a choice of {f.type}")
    return _choice_value(t, f.default, primitive)


def generate_1_0(types: list, definitions: list, files: list) -> str:
    by_name = {t.name: t for t in types}
    out = [
        '"""AMQP 1.0 type tables.',
        "",
        f"Generated from spec/amqp1_0/{{{','.join(files)}}}",
        "by tools/gen_spec.py; do not edit, run the tool. Classes and their meaning:",
        "warren/spec/base1_0.py; wire forms: warren/codec/amqp1_0.",
        '"""',
        "",
        "# fmt: off",
        "import enum",
        "",
        "from warren.spec.base1_0 import Composite, Field as F, tables",
        "",
        "VERSION = (1, 0, 0)",
    ]
    for name, value in definitions:
        out.append(f"{pyname(name).upper()} = {int(value, 0)}")
    out += ["", "# primitive -> ((encoding name or None, code, category, width), ...): part 1 §1.6",
            "ENCODINGS = {"]
    for t in types:
        if t.cls == "primitive":
            out.append(f"    {t.name!r}: (" + "".join(f"({n!r}, 0x{c:02X}, {cat!r}, {w}), " for n, c, cat, w in t.encodings) + "),")
    out += ["}", "", "# restricted type -> the type it restricts (part 1 §1.3)", "RESTRICTED = {"]
    for t in types:
        if t.cls == "restricted":
            out.append(f"    {t.name!r}: {t.source!r},")
    out += ["}", "# restricted types with a descriptor (message sections): name -> (symbol, code, source)",
            "DESCRIBED = {"]
    for t in types:
        if t.cls == "restricted" and t.code is not None:
            out.append(f"    {t.name!r}: ({t.symbol!r}, 0x{t.code:016X}, {t.source!r}),")
    out += ["}", "# what each type provides (part 1 §1.5: a field's \"requires\" names one of these)", "PROVIDES = {"]
    for t in types:
        if t.provides:
            out.append(f"    {t.name!r}: {t.provides!r},")
    out += ["}", "", ""]
    for t in types:
        if not t.choices:
            continue
        primitive = _primitive_1_0(t.source, by_name)
        if primitive == "boolean":  # role: a bool cannot be an enum member value
            out.append(f"class {camel(t.name)}:")
            out.append(f"    \"\"\"{t.name} ({t.source})\"\"\"")
        elif primitive in ("symbol", "string"):
            out.append(f"class {camel(t.name)}(str, enum.Enum):")
            out.append(f"    \"\"\"{t.name} ({t.source})\"\"\"")
        else:
            out.append(f"class {camel(t.name)}(enum.IntEnum):")
            out.append(f"    \"\"\"{t.name} ({t.source})\"\"\"")
        for name, value in t.choices:
            out.append(f"    {pyname(name).upper()} = {_choice_value(t, value, primitive)!r}")
        out += ["", ""]
    composites = [t for t in types if t.cls == "composite"]
    for t in composites:
        out.append(f"class {camel(t.name)}(Composite):")
        out.append(f"    __slots__ = (" + "".join(f"{pyname(f.name)!r}, " for f in t.fields) + ")")
        out.append(f"    NAME = {t.name!r}")
        out.append(f"    SYMBOL = {t.symbol!r}")
        out.append(f"    CODE = 0x{t.code:016X}")
        out.append(f"    PROVIDES = {t.provides!r}")
        out.append("    FIELDS = (")
        for f in t.fields:
            out.append(f"        F({pyname(f.name)!r}, {f.type!r}, {_primitive_1_0(f.type, by_name)!r}, {f.mandatory}, "
                       f"{f.multiple}, {_default_1_0(f, by_name)!r}, {f.requires!r}),")
        out.append("    )")
        out += ["", ""]
    out.append("# numeric descriptor -> class, symbolic descriptor -> class: every composite")
    out.append("BY_CODE, BY_SYMBOL = tables(globals())")

    def group(what: str) -> str:
        return "{" + ", ".join(f"0x{t.code:02X}: {camel(t.name)}" for t in composites if what in t.provides) + "}"

    out.append(f"PERFORMATIVES = {group('frame')}")
    out.append(f"SASL_FRAMES = {group('sasl-frame')}")
    out.append(f"OUTCOMES = {group('outcome')}")
    out.append(f"DELIVERY_STATES = {group('delivery-state')}")
    out.append("# the sections of a message, in the order they may appear (part 3 §3.2)")
    out.append("SECTIONS = {" + ", ".join(f"{t.name!r}: 0x{t.code:02X}" for t in types if "section" in t.provides) + "}")
    out.append("")
    return "\n".join(out)


def build(spec_dir: Path, spec_1_0_dir: Path = SPEC_1_0_DIR) -> dict[str, str]:
    result = {}
    shared: dict[str, str] = {}  # class text -> module, among the versions other than 0-9-1
    for module, (loader, filename, version, title) in TARGETS.items():
        spec = LOADERS[loader](spec_dir / filename, version)
        # 0-9-1 stays whole: it is the broker's own table and the hot path's
        result[module] = generate(module, spec, title, None if module == "amqp0_9_1" else shared)
    for module, (filename, official) in TARGETS_0_10.items():
        result[module] = generate_0_10(load_0_10(spec_dir / filename), load_0_10(spec_dir / official))
    for module, files in TARGETS_1_0.items():
        result[module] = generate_1_0(*load_1_0(spec_1_0_dir, files))
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec-dir", type=Path, default=ROOT.parent / "shared" / "spec")
    ap.add_argument("--spec-1-0-dir", type=Path, default=SPEC_1_0_DIR,
                    help="the AMQP 1.0 XML (default: spec/amqp1_0 in this repository)")
    ap.add_argument("--out", type=Path, default=ROOT / "warren" / "spec")
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed modules differ")
    args = ap.parse_args(argv)
    stale = []
    for module, text in build(args.spec_dir, args.spec_1_0_dir).items():
        path = args.out / f"{module}.py"
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print("out of date: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
