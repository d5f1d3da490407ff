#!/usr/bin/env python3
"""The largest circle in a folder's include graph.

A module is a file name without its extension (txn_exec.c and txn_exec.h
are one module); module A points at module B when a file of A includes
B's header.  Prints the largest strongly connected component (modules
that reach each other through includes) and its size, for the modules
and for the headers alone.

    tools/include_cycles.py src/node
"""
import os
import re
import sys

INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def graph(folder, module_of):
    nodes, edges = set(), {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(('.c', '.h')):
            continue
        src = module_of(name)
        if src is None:
            continue
        nodes.add(src)
        with open(os.path.join(folder, name), encoding='utf-8') as f:
            text = f.read()
        own = os.path.basename(os.path.normpath(folder)) + '/'
        for inc in INC.findall(text):
            if inc.startswith(own):
                inc = inc[len(own):]  # "node/x.h" inside src/node
            if '/' in inc or not os.path.exists(os.path.join(folder, inc)):
                continue  # another folder's header
            dst = module_of(inc)
            if dst is not None and dst != src:
                edges.setdefault(src, set()).add(dst)
    return nodes, edges


def sccs(nodes, edges):
    """Tarjan's algorithm, iteratively."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def report(title, nodes, edges):
    comps = [c for c in sccs(nodes, edges) if len(c) > 1]
    comps.sort(key=len, reverse=True)
    if not comps:
        print(f'{title}: no circle ({len(nodes)} nodes)')
        return
    big = comps[0]
    print(f'{title}: largest circle {len(big)} of {len(nodes)} nodes '
          f'({len(comps)} circles): {" ".join(big)}')


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else 'src/node'
    report('modules', *graph(folder, lambda n: n.rsplit('.', 1)[0]))
    report('headers', *graph(folder,
                             lambda n: n if n.endswith('.h') else None))


if __name__ == '__main__':
    main()
