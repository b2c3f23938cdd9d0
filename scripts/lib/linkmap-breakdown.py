#!/usr/bin/env python3
"""Bytes of a linked binary per input archive or module, from an lld linker map (-Map).

    linkmap-breakdown.py MAP            # prints "<group>\t<bytes>" lines, biggest first

Only allocated output sections count (what the binary loads: code, read-only data, data,
.eh_frame; .bss, which takes no file bytes, and debug sections are left out). An input is
named by its archive (libsodium.a, libswiftCore.a, ...) or by the Swift module whose
object it is (Foo.build/x.swift.o -> Foo); the linker's own sections (PLT, GOT, dynamic
symbols, .eh_frame_hdr) are "linker", the C runtime start files and libc_nonshared
"libc glue". Every .eh_frame input goes to one ".eh_frame" group of its own, whoever
brought it: it is what an unwinder would read, and the Embedded node has none.
"""
import collections
import re
import sys

SKIP_OUT = {".bss", ".tbss", ".comment", ".symtab", ".strtab", ".shstrtab", ".relro_padding"}


def group_of(section: str, name: str) -> str:
    name = re.sub(r":\(.*\)$", "", name)  # the input section's name, e.g. ":(.text.foo)"
    if section in (".eh_frame", ".eh_frame_hdr"):
        return ".eh_frame"
    if name.startswith("<internal>") or name.startswith("<"):
        return "linker"
    m = re.search(r"([^/]+\.a)\(", name)
    if m:
        lib = m.group(1)
        if lib in ("libc_nonshared.a", "libgcc.a"):
            return "libc glue"
        return lib
    m = re.search(r"/([^/]+)\.build/[^/]+\.o", name)
    if m:
        return m.group(1)
    if re.search(r"(^|/)(S?crt[1in]|crt[a-zA-Z]*)\.o$", name):
        return "libc glue"
    m = re.search(r"([^/]+\.o)$", name)
    return m.group(1) if m else name


def main() -> int:
    sizes = collections.Counter()
    out_section = None
    with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
        next(f, None)  # header
        for line in f:
            # VMA LMA Size Align, then the name indented by depth: 1 = output section, 9 = input, 17 = symbol
            m = re.match(r"\s*([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+(\d+) (\s*)(.*)$", line)
            if not m:
                continue
            depth, text = len(m.group(5)), m.group(6)
            if depth == 0:
                out_section = text.strip()
                continue
            if depth != 8 or out_section is None or out_section in SKIP_OUT or out_section.startswith(".debug"):
                continue
            section = re.sub(r"\+0x[0-9a-f]+\)$", ")", text)
            sec = re.search(r":\((\.[^)+ ]*)", section)
            sizes[group_of(sec.group(1) if sec else out_section, text)] += int(m.group(3), 16)
    for name, size in sizes.most_common():
        print(f"{name}\t{size}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
