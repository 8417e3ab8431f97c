"""IR text: a :class:`~jittape.compiler.ir.Graph` written so that it parses back to an equal graph
(saved models store their traced functions this way). ``dump_graph`` writes it,
``parse_graph`` reads it with ``ast`` (never executing it); the first line names the
format's version.
"""

from __future__ import annotations

import ast
import base64
import re

import numpy as np

from .dims import Dim, Symbol
from .ir import (
    OP_TABLE, Const, Graph, GraphError, Node, Opaque, OpDef, Type, _SHORT, dtype_name, verify,
)


IR_TEXT_VERSION = 1  # the version dump_graph writes; parse_graph reads it and older ones
_LONG = {short: name for name, short in _SHORT.items()}
_INLINE = 16  # constants up to this many elements are written as values, larger in base64
_PLAIN_NAME = re.compile(r"[A-Za-z_][\w.<>-]*")
_RESERVED = frozenset({"inf", "nan", "array", "type", "op", "slice", "True", "False", "None"})


class GraphTextError(ValueError):
    """A graph that IR text cannot hold, or text that does not parse as a graph."""


def dump_graph(g: Graph) -> str:
    """``g`` as IR text that :func:`parse_graph` reads back to an equal graph.

    The layout of :func:`print_graph`, with everything a graph means written out
    exactly: attributes as Python literals (constants by their values, or by their bytes
    in base64 when they have more than 16 elements; ``array``, ``type``, ``op`` and
    ``slice`` name the other kinds of value), each input's name, and each symbolic size
    declared with where it comes from. Node locations are not written. The first line
    gives the version (``IR_TEXT_VERSION``)::

        jittape-ir 1
        symbol s0 "dimension 0 of argument 'x'"
        graph serve(%0: f32[s0,2] 'arg:x', %1: f32[2,2] 'var:w') {
          %2 = matmul %0, %1                 : f32[s0,2]
          %3 = reduce_sum %2 {axis=(1,), keepdims=False} : f32[s0]
          return %3
        }

    Raises :class:`GraphTextError` naming the node whose attribute text cannot hold: a
    Python object (a custom gradient's function), a fused kernel's body.
    """
    symbols: dict = {}  # name -> Symbol, in order of first use
    where = f"graph {g.name!r}"
    named = len(g.input_names) == len(g.inputs)
    args = []
    for k, (v, t) in enumerate(zip(g.inputs, g.input_types)):
        _note_symbols(t, symbols, where)
        args.append(f"%{v}: {_type_text(t)}" + (f" {g.input_names[k]!r}" if named else ""))
    name = g.name if _PLAIN_NAME.fullmatch(g.name) else repr(g.name)
    body = [f"graph {name}({', '.join(args)}) {{"]
    for n in g.nodes:
        at = f"{where}, node {', '.join(f'%{o}' for o in n.outputs)} = {n.op.name}"
        for t in n.types:
            _note_symbols(t, symbols, at)
        attrs = []
        for k, v in n.attrs:
            if not k.isidentifier():
                raise GraphTextError(f"{at}: attribute name {k!r} is not an identifier")
            _note_symbols(v, symbols, at)
            attrs.append(f"{k}={_attr_text(v, at, k)}")
        lhs = f"  {', '.join(f'%{o}' for o in n.outputs)} = {n.op.name}"
        if n.inputs:
            lhs += " " + ", ".join(f"%{i}" for i in n.inputs)
        if attrs:
            lhs += " {" + ", ".join(attrs) + "}"
        body.append(f"{lhs:<36} : {', '.join(_type_text(t) for t in n.types)}")
    body.append("  return" + ("" if not g.outputs else " " + ", ".join(
        f"%{o}" for o in g.outputs)))
    body.append("}")
    head = [f"jittape-ir {IR_TEXT_VERSION}"]
    head += [f"symbol {s.name} {s.origin!r}" for s in symbols.values()]
    return "\n".join(head + body) + "\n"


def _type_text(t: Type) -> str:
    return str(t).replace(" ", "")


def _note_symbols(v, symbols: dict, where: str) -> None:
    """Add the root symbols in ``v`` (a Type, a size, a tuple of them) to ``symbols``."""
    if isinstance(v, Type):
        dims = [d for d in v.shape if isinstance(d, Dim)]
    elif isinstance(v, Dim):
        dims = [v]
    elif type(v) is tuple:
        for x in v:
            _note_symbols(x, symbols, where)
        return
    else:
        return
    for d in dims:
        for s in d.symbols():
            have = symbols.setdefault(s.name, s)
            if have is not s:
                raise GraphTextError(f"{where}: two different symbolic sizes are both named "
                                     f"{s.name} ({have.origin}; {s.origin})")


def _attr_text(v, where: str, key: str) -> str:
    t = type(v)
    if v is None or t in (bool, int, float, str, bytes):
        return repr(v)  # inf and nan print as names that parse_graph reads
    if t is tuple:
        items = [_attr_text(x, where, key) for x in v]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if t is Dim:
        return str(v)
    if t is Const:
        return _array_text(v.array, where, key)
    if t is Type:
        return f"type({_type_text(v)!r})"
    if t is OpDef:
        return f"op({v.name!r})"
    if t is slice:
        return "slice({}, {}, {})".format(*(_attr_text(x, where, key)
                                             for x in (v.start, v.stop, v.step)))
    if isinstance(v, np.generic):
        return _attr_text(v.item(), where, key)
    if t is Graph:
        raise GraphTextError(f"{where}: attribute {key!r} is a fused kernel's body; IR text "
                             "holds graphs before fusion (a traced graph)")
    if t is Opaque:
        raise GraphTextError(f"{where}: attribute {key!r} holds a Python object "
                             f"(<{v.label}>), which IR text cannot hold")
    raise GraphTextError(f"{where}: attribute {key!r} is a {t.__name__} ({v!r:.60}), "
                         "which IR text cannot hold")


def _array_text(a: np.ndarray, where: str, key: str) -> str:
    if a.dtype.kind not in "biuf":
        raise GraphTextError(f"{where}: attribute {key!r} is a constant of dtype "
                             f"{a.dtype.name}, which IR text cannot hold")
    ty = _type_text(Type(a.shape, a.dtype.name))
    if a.size <= _INLINE:
        return f"array({ty!r}, [{', '.join(repr(x) for x in a.reshape(-1).tolist())}])"
    data = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()
    return f"array({ty!r}, b64={base64.b64encode(data).decode('ascii')!r})"


def parse_graph(text: str, check: bool = True) -> Graph:
    """The graph :func:`dump_graph` wrote as ``text``. ``check``: verify it, so that
    every node's type is the one its op infers (the ops' rules of this version).

    Raises :class:`GraphTextError` naming the line of text it cannot read, an op this
    version does not have, and text of a newer version.
    """
    return _TextParser(text).graph(check)


class _TextParser:
    """Reads IR text a line at a time; attributes are parsed with ``ast`` (never run)."""

    _NODE = re.compile(r"\s*(%\d+(?:, %\d+)*) = ([A-Za-z_]\w*)(.*)$")
    _INPUTS = re.compile(r" (%\d+(?:, %\d+)*)")
    _ARG = re.compile(r"%(\d+): ([A-Za-z0-9_]+\[[^\]]*\])")
    _TYPE = re.compile(r"([A-Za-z0-9_]+)\[([^\]]*)\]")

    def __init__(self, text: str):
        self.lines = [(k + 1, ln) for k, ln in enumerate(text.splitlines())
                      if ln.strip() and not ln.lstrip().startswith("#")]
        self.symbols: dict = {}
        self.at = 0

    def error(self, msg: str, line=None):
        no, ln = line if line is not None else self.lines[max(self.at - 1, 0)]  # the last read
        return GraphTextError(f"IR text line {no}: {msg}: {ln.strip()[:100]!r}")

    def next(self):
        if self.at >= len(self.lines):
            last = self.lines[-1] if self.lines else (0, "")
            raise self.error("the text ends before the graph does", last)
        self.at += 1
        return self.lines[self.at - 1]

    def graph(self, check: bool) -> Graph:
        if not self.lines:
            raise GraphTextError("IR text is empty")
        no, ln = self.next()
        m = re.fullmatch(r"jittape-ir (\d+)", ln.strip())
        if m is None:
            raise self.error("not IR text (the first line is 'jittape-ir <version>')")
        if int(m.group(1)) > IR_TEXT_VERSION:
            raise self.error(f"IR text version {m.group(1)} is newer than this jittape "
                             f"reads (up to {IR_TEXT_VERSION})")
        no, ln = self.next()
        while ln.startswith("symbol "):
            self.symbol(ln)
            no, ln = self.next()
        name, inputs, types, names = self.signature(ln)
        nodes = []
        no, ln = self.next()
        while not ln.strip().startswith("return"):
            nodes.append(self.node(ln))
            no, ln = self.next()
        outs = ln.strip()[len("return"):].strip()
        outputs = [self.value_id(x) for x in outs.split(", ")] if outs else []
        no, ln = self.next()
        if ln.strip() != "}":
            raise self.error("expected '}' after the return line")
        if self.at < len(self.lines):
            raise self.error("text after the end of the graph", self.lines[self.at])
        g = Graph(tuple(inputs), tuple(types), tuple(nodes), tuple(outputs), name, names)
        if check:
            try:
                verify(g)
            except GraphError as e:
                raise GraphTextError(f"IR text of graph {name!r} does not verify: {e}") from None
        return g

    def value_id(self, tok: str) -> int:
        if not re.fullmatch(r"%\d+", tok.strip()):
            raise self.error(f"{tok.strip()!r} is not a value (%<number>)")
        return int(tok.strip()[1:])

    def symbol(self, ln: str) -> None:
        parts = ln.split(" ", 2)
        if len(parts) != 3 or not parts[1].isidentifier() or parts[1] in _RESERVED:
            raise self.error("expected: symbol <name> '<origin>'")
        origin, end = self.string(parts[2], 0)
        if end != len(parts[2]):
            raise self.error("text after the symbol's origin")
        self.symbols[parts[1]] = Symbol(parts[1], origin)

    def string(self, s: str, pos: int):
        """The Python string literal at ``s[pos:]`` and where it ends."""
        q = s[pos:pos + 1]
        if q not in ("'", '"'):
            raise self.error("expected a quoted string")
        j = pos + 1
        while j < len(s):
            if s[j] == "\\":
                j += 2
            elif s[j] == q:
                return ast.literal_eval(s[pos:j + 1]), j + 1
            else:
                j += 1
        raise self.error("a string is not closed")

    def signature(self, ln: str):
        if not ln.startswith("graph ") or not ln.endswith(") {"):
            raise self.error("expected: graph <name>(<inputs>) {")
        s = ln[len("graph "):-len(" {")]
        if s[:1] in ("'", '"'):
            name, pos = self.string(s, 0)
        else:
            pos = s.find("(")
            name = s[:pos]
        if s[pos:pos + 1] != "(":
            raise self.error("expected '(' after the graph's name")
        inputs, types, names = [], [], []
        pos += 1
        end = len(s) - 1  # the closing parenthesis
        while pos < end:
            m = self._ARG.match(s, pos)
            if m is None:
                raise self.error("expected an input: %<number>: <type>")
            inputs.append(int(m.group(1)))
            types.append(self.type(m.group(2)))
            pos = m.end()
            if s.startswith(" ", pos):
                nm, pos = self.string(s, pos + 1)
                names.append(nm)
            if s.startswith(", ", pos):
                pos += 2
            elif pos != end:
                raise self.error("expected ', ' between inputs")
        if names and len(names) != len(inputs):
            raise self.error("either every input has a name or none has")
        return name, inputs, types, tuple(names)

    def node(self, ln: str) -> Node:
        m = self._NODE.match(ln)
        if m is None:
            raise self.error("expected: %<out>, ... = <op> %<in>, ... {<attrs>} : <types>")
        outs = [int(x[1:]) for x in m.group(1).split(", ")]
        op = OP_TABLE.get(m.group(2))
        if op is None:
            raise self.error(f"no op named {m.group(2)!r} in this jittape")
        head, sep, tys = m.group(3).rpartition(" : ")
        if not sep:
            raise self.error("expected ' : <types>' at the end of a node")
        head = head.rstrip()
        ins = []
        mi = self._INPUTS.match(head)
        if mi is not None:
            ins = [int(x[1:]) for x in mi.group(1).split(", ")]
            head = head[mi.end():]
        attrs: dict = {}
        head = head.strip()
        if head:
            if not (head.startswith("{") and head.endswith("}")):
                raise self.error("expected the attributes in braces: {name=value, ...}")
            attrs = self.attrs(head[1:-1])
        types = self.types(tys.strip())
        if len(types) != len(outs):
            raise self.error(f"{len(outs)} outputs but {len(types)} types")
        return Node(op, tuple(ins), tuple(outs), tuple(sorted(attrs.items())), tuple(types))

    def attrs(self, inner: str) -> dict:
        try:
            call = ast.parse(f"_({inner})", mode="eval").body
        except SyntaxError as e:
            raise self.error(f"the attributes do not parse ({e.msg})") from None
        if not isinstance(call, ast.Call) or call.args:
            raise self.error("expected the attributes as name=value pairs")
        return {kw.arg: self.value(kw.value) for kw in call.keywords}

    def value(self, node):
        """One attribute value from its syntax tree."""
        if isinstance(node, ast.Constant) and type(node.value) in (
                bool, int, float, str, bytes, type(None)):
            return node.value
        if isinstance(node, ast.Tuple):
            return tuple(self.value(x) for x in node.elts)
        if isinstance(node, ast.Name):
            if node.id in ("inf", "nan"):
                return float(node.id)
            s = self.symbols.get(node.id)
            if s is None:
                raise self.error(f"{node.id!r} is not a declared symbol")
            return Dim({((s, 1),): 1})
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = self.value(node.operand)
            if type(v) not in (int, float, Dim):
                raise self.error(f"a sign before {ast.unparse(node.operand)!r}")
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult,
                                                                 ast.Pow)):
            a, b = self.value(node.left), self.value(node.right)
            if type(a) not in (int, Dim) or type(b) not in (int, Dim):
                raise self.error(f"size arithmetic on {ast.unparse(node)!r}")
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if type(b) is not int or b < 0:
                raise self.error(f"a power of a size must be a whole number: "
                                 f"{ast.unparse(node)!r}")
            out = 1
            for _ in range(b):
                out = out * a
            return out
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return self.call(node)
        raise self.error(f"cannot read the attribute value {ast.unparse(node)!r}")

    def call(self, node):
        fn = node.func.id
        args = [self.value(a) if not isinstance(a, ast.List) else a for a in node.args]
        kw = {k.arg: self.value(k.value) for k in node.keywords}
        if fn == "type" and len(args) == 1 and type(args[0]) is str and not kw:
            return self.type(args[0])
        if fn == "slice" and len(args) == 3 and not kw and all(
                x is None or type(x) is int for x in args):
            return slice(*args)
        if fn == "op" and len(args) == 1 and type(args[0]) is str and not kw:
            op = OP_TABLE.get(args[0])
            if op is None:
                raise self.error(f"no op named {args[0]!r} in this jittape")
            return op
        if fn == "array" and args and type(args[0]) is str:
            ty = self.type(args[0])
            if ty.size is None or np.dtype(ty.dtype).kind not in "biuf":
                raise self.error(f"a constant of type {args[0]} (sizes known, a number dtype)")
            if len(args) == 2 and isinstance(args[1], ast.List) and not kw:
                vals = [self.value(x) for x in args[1].elts]
                if len(vals) != ty.size or any(type(x) not in (bool, int, float) for x in vals):
                    raise self.error(f"{ty} takes {ty.size} numbers")
                return Const(np.array(vals, dtype=ty.dtype).reshape(ty.shape))
            if len(args) == 1 and set(kw) == {"b64"} and type(kw["b64"]) is str:
                dt = np.dtype(ty.dtype)
                raw = base64.b64decode(kw["b64"], validate=True)
                if len(raw) != ty.size * dt.itemsize:
                    raise self.error(f"{ty} takes {ty.size * dt.itemsize} bytes, not {len(raw)}")
                a = np.frombuffer(raw, dtype=dt.newbyteorder("<")).astype(dt)
                return Const(a.reshape(ty.shape))
        raise self.error(f"cannot read {ast.unparse(node)[:60]!r} (array(type, [values]), "
                         "array(type, b64=...), type(...), op(...), slice(...))")

    def type(self, text: str) -> Type:
        m = self._TYPE.fullmatch(text)
        if m is None:
            raise self.error(f"{text!r} is not a type (like f32[2,s0])")
        dtype = _LONG.get(m.group(1), m.group(1))
        try:
            dtype = dtype_name(dtype)
        except TypeError:
            raise self.error(f"{m.group(1)!r} is not a dtype") from None
        dims = []
        for d in m.group(2).split(",") if m.group(2) else ():
            if d == "?":
                dims.append(None)
                continue
            try:
                v = self.value(ast.parse(d, mode="eval").body)
            except SyntaxError:
                v = None
            if type(v) not in (int, Dim):
                raise self.error(f"{d!r} is not a size")
            dims.append(v)
        return Type(tuple(dims), dtype)

    def types(self, text: str) -> list:
        found = [m.group(0) for m in self._TYPE.finditer(text)]
        if ", ".join(found) != text:
            raise self.error(f"{text!r} is not a list of types")
        return [self.type(t) for t in found]
