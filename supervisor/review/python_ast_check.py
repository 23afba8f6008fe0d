# The python_ast reviewer's checker. Runs inside a throwaway airlock sandbox, never on the host.
# Reads {"code", "deny_imports", "deny_calls", "deny_attributes"} as JSON on stdin and prints one
# verdict {"verdict", "rule", "reason"} as JSON on stdout. Iterative walks only, so deep nesting
# cannot exhaust the checker's own stack. Under `airlock serve` it is started ahead in a pool and
# blocks on stdin: everything before main()'s read costs nothing at check time.
import ast
import json
import os
import sys

AST = ast.AST


def nodes_of(tree):
    """Every node of the tree, breadth first as ast.walk, without its generators (3x faster)."""
    out = [tree]
    i = 0
    while i < len(out):
        node = out[i]
        i += 1
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, AST):
                out.append(value)
            elif type(value) is list:
                for item in value:
                    if isinstance(item, AST):
                        out.append(item)
    return out


def answer(verdict, rule="", reason=""):
    sys.stdout.write(json.dumps({"verdict": verdict, "rule": rule, "reason": reason}) + "\n")
    sys.stdout.flush()
    # Nothing to finalize: skipping the interpreter's teardown saves ~4 ms per check.
    os._exit(0)


def main():
    req = json.loads(sys.stdin.read())
    code = req["code"]
    deny_imports = req["deny_imports"]
    deny_calls = req["deny_calls"]
    deny_attributes = set(req["deny_attributes"])
    sys.setrecursionlimit(100000)
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        answer("allow", "syntax-error",
               "not valid Python (%s, line %s): the interpreter refuses it too" % (e.msg, e.lineno))
    except (RecursionError, MemoryError, ValueError) as e:
        answer("deny", "unparsable",
               "the code cannot be analysed (%s): too deeply nested or too large" % type(e).__name__)

    def import_denied(module):
        return any(module == d or module.startswith(d + ".") for d in deny_imports)

    exact = frozenset(d for d in deny_calls if not d.endswith("*"))
    prefixes = tuple(d[:-1] for d in deny_calls if d.endswith("*"))

    def call_denied(name):
        if name.startswith("builtins."):
            name = name[len("builtins."):]
        return name in exact or name.startswith(prefixes)

    nodes = nodes_of(tree)
    aliases = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                if import_denied(a.name):
                    answer("deny", "import", "imports %s, which this profile denies" % a.name)
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if import_denied(module):
                answer("deny", "import", "imports from %s, which this profile denies" % module)
            for a in node.names:
                full = module + "." + a.name if module else a.name
                if import_denied(full):
                    answer("deny", "import", "imports %s, which this profile denies" % full)
                if call_denied(full):
                    answer("deny", "call", "imports %s, which this profile denies" % full)
                aliases[a.asname or a.name] = full

    def dotted(node):
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.append(aliases.get(node.id, node.id))
        return ".".join(reversed(parts))

    for node in nodes:
        if isinstance(node, ast.Attribute) and node.attr in deny_attributes:
            answer("deny", "attribute", "uses the attribute %s, which this profile denies" % node.attr)
        if isinstance(node, ast.Name) and node.id in deny_attributes:
            answer("deny", "attribute", "uses %s, which this profile denies" % node.id)
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = dotted(node)
            if name and call_denied(name):
                answer("deny", "call", "uses %s, which this profile denies" % name)
        if isinstance(node, ast.Call):
            func = dotted(node.func)
            if func in ("getattr", "builtins.getattr", "setattr", "delattr") and len(node.args) >= 2:
                attr = node.args[1]
                if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
                    answer("deny", "dynamic-getattr",
                           "calls %s with a computed attribute name, which cannot be checked" % func)
                if attr.value in deny_attributes:
                    answer("deny", "attribute",
                           "uses the attribute %s, which this profile denies" % attr.value)
                base = dotted(node.args[0])
                if base and call_denied(base + "." + attr.value):
                    answer("deny", "call", "uses %s.%s, which this profile denies" % (base, attr.value))
    answer("allow")


main()
