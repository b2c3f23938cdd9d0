#!/usr/bin/env python3
"""Prints the functions of one binary that a callgrind run executed, one mangled name per line,
in order of their first appearance: the input of lld's --symbol-ordering-file.

Why: nearly all of the node's code is resident once it runs, because the kernel maps a file's
cached pages in 64 KiB windows around each page a process touches (fault-around), and start-up
touches code everywhere. Linking the functions an idle node runs next to each other leaves the
rest (Bluetooth, GATT, IIO, the hub link's error paths...) in windows an idle Wi-Fi node never
touches, so they stay out of its resident set. A stale list only costs that benefit: lld skips
names it does not find (--no-warn-symbol-ordering).

Regenerate (after large changes to the node): run the Embedded node idle under
  valgrind --tool=callgrind --callgrind-out-file=OUT piconet-node --name idle --interface lo ...
for about 20 s in a network namespace, stop it with SIGTERM, then
  scripts/lib/callgrind-hot-symbols.py OUT piconet-node > scripts/lib/node-hot-symbols.txt
"""
import re
import sys


def main(path: str, binary: str) -> None:
    objects, names, seen, order = {}, {}, set(), []
    current = None
    pattern = re.compile(r'^(c?ob|c?fn)=\((\d+)\)(?: (.*))?$')
    with open(path, encoding='utf-8', errors='replace') as f:
        for line in f:
            m = pattern.match(line.rstrip('\n'))
            if not m:
                continue
            kind, ident, name = m.groups()
            if kind.endswith('ob'):
                if name is not None:
                    objects[ident] = name
                if kind == 'ob':
                    current = objects.get(ident, '')
            else:
                if name is not None:
                    names[ident] = name
                fn = names.get(ident, '')
                if kind == 'fn' and current and current.endswith(binary) and fn not in seen \
                        and not fn.startswith('0x'):
                    seen.add(fn)
                    order.append(fn)
    sys.stdout.write(''.join(n + '\n' for n in order))


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit('usage: callgrind-hot-symbols.py CALLGRIND_OUT BINARY_NAME')
    main(sys.argv[1], sys.argv[2])
