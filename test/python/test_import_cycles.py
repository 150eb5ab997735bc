"""No module of dlpc imports one that imports it back, directly or through others.

grimp reads every import statement of the package, module-level and inside functions
alike (a function-level import is still a cycle: it only defers it). The modules that
import one another form strongly connected components; each component of more than one
module is a cycle, printed as one import chain around it.
"""

from __future__ import annotations

import grimp


def _components(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.find_modules_directly_imported_by(nxt)))))
                elif nxt in on_stack:
                    low[module] = min(low[module], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == module:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def _cycle(graph: grimp.ImportGraph, component: list[str]) -> str:
    """One import chain around the component: its first module to each other one and back."""
    first = component[0]
    shortest: tuple[str, ...] | None = None
    for other in component[1:]:
        there = graph.find_shortest_chain(importer=first, imported=other)
        back = graph.find_shortest_chain(importer=other, imported=first)
        if there and back:
            chain = (*there, *back[1:])
            if shortest is None or len(chain) < len(shortest):
                shortest = chain
    assert shortest is not None
    lines = []
    for importer, imported in zip(shortest, shortest[1:]):
        details = graph.get_import_details(importer=importer, imported=imported)
        where = (
            f" (line {details[0]['line_number']}: {details[0]['line_contents']})" if details else ""
        )
        lines.append(f"  {importer} -> {imported}{where}")
    return f"cycle among {', '.join(component)}:\n" + "\n".join(lines)


def test_no_import_cycle():
    graph = grimp.build_graph("dlpc", include_external_packages=False)
    assert "dlpc.passes.pipeline" in graph.modules  # the package was found
    cycles = [_cycle(graph, c) for c in _components(graph)]
    for text in cycles:
        print(text)
    assert not cycles, "import cycles in dlpc:\n" + "\n".join(cycles)


def test_a_cycle_is_found():
    # the check itself: a graph with a cycle through three modules reports it
    graph = grimp.ImportGraph()
    for m in ("p.a", "p.b", "p.c", "p.d"):
        graph.add_module(m)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.c")
    graph.add_import(importer="p.c", imported="p.a")
    graph.add_import(importer="p.d", imported="p.a")
    assert _components(graph) == [["p.a", "p.b", "p.c"]]
    assert _cycle(graph, ["p.a", "p.b", "p.c"]).splitlines()[1:] == [
        "  p.a -> p.b",
        "  p.b -> p.c",
        "  p.c -> p.a",
    ]
